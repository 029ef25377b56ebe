"""groupcoord.wire: Kafka's wire protocol, sans-IO (DESIGN.md, the ``wire/`` layer).

``connection.Connection`` frames bytes into decoded requests and responses into bytes, with
bounded buffers and Kafka's close-the-connection answer to anything unreadable; ``apis`` holds the
supported (api key, version) table and the ApiVersions answer; ``translate`` maps kio's group
messages to and from the core's; ``builders`` answers FindCoordinator, Metadata, ListOffsets and
Fetch from what the listener knows. No sockets, no clock, no event loop: the listeners in
``actors/`` do the I/O.

The codec is kio (pinned 0.6.5, Apache-2.0, Aiven): message classes generated from Kafka's own
JSON schemas (Kafka 4.x: flexible versions, tagged fields, KIP-896's removals), decoding in native
code (about 1 µs for a JoinGroup v9), encoding in Python (about 30 µs). Two limits shape this
layer: kio raises on a tagged field its schemas do not define (Kafka would skip it), which closes
the connection; and it has no OffsetCommit v0-1 / OffsetFetch v0, which Kafka 4 dropped too.
"""

from .apis import SUPPORTED_VERSIONS, ApiKey, api_versions_response
from .builders import (
    Node,
    fetch_response,
    find_coordinator_response,
    list_offsets_response,
    metadata_response,
)
from .connection import DEFAULT_MAX_FRAME_BYTES, Connection, ProtocolError, WireRequest
from .translate import (
    offset_fetch_from_core,
    offset_fetch_to_core,
    request_to_core,
    response_from_core,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES", "SUPPORTED_VERSIONS", "ApiKey", "Connection", "Node",
    "ProtocolError", "WireRequest", "api_versions_response", "fetch_response",
    "find_coordinator_response", "list_offsets_response", "metadata_response",
    "offset_fetch_from_core", "offset_fetch_to_core", "request_to_core", "response_from_core",
]
