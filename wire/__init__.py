"""groupcoord.wire: Kafka's wire protocol, sans-IO (DESIGN.md, the ``wire/`` layer).

``connection.Connection`` frames bytes into decoded requests and responses into bytes, with
bounded buffers and Kafka's close-the-connection answer to anything unreadable; ``apis`` holds the
supported (api key, version) table and the ApiVersions answer; ``translate`` maps kio's group
messages to and from the core's (``consumer_groups`` the KIP-848 ones, topic ids to names;
``fast_requests`` reads the requests on every member's path, OffsetCommit, Heartbeat,
JoinGroup and SyncGroup, straight into the core's, and ``fast_responses`` encodes their
answers, and ListGroups', directly);
``builders`` answers FindCoordinator, ListOffsets and Fetch from what the listener knows, and
refuses Produce; ``fast_metadata`` writes the Metadata answer, whose size grows with the topic
catalog, directly (``encoding`` holds Kafka's primitive encodings for the direct writers);
``sasl`` authenticates a connection (PLAIN, SCRAM) and ``acl`` decides group ACLs. No
sockets, no clock, no event loop: the listeners in ``actors/`` do the I/O.

The codec is kio (pinned 0.6.5; Apache-2.0; Aiven, released 2026-10): message classes generated
from Kafka 4.x's own JSON schemas, with flexible versions, tagged fields and every version of the
APIs above (KIP-896's removals excepted). Decoding is native code (a Heartbeat ~1 µs, a JoinGroup
~10 µs, an OffsetCommit of 50 partitions ~40 µs), encoding is Python (a Heartbeat answer ~20 µs,
an OffsetCommit answer for 50 partitions ~0.4-0.7 ms), measured on a loaded 2-core machine.
Its limits, each ending in a clean close here: a tagged field its schemas do not define raises
(Kafka would skip it), durations beyond ``datetime.timedelta`` do not decode, and its reader
trusts array lengths (it reserves room for as many elements as a prefix claims, and a failed
reservation aborts the process), so ``frame_check`` holds every length in a request body to
the bytes after it before kio reads the body. OffsetCommit, Heartbeat, JoinGroup and
SyncGroup are read by ``fast_requests`` instead, which checks each length as it reads, and
skips unknown tagged fields and takes any int64 retention time, as Kafka does. kio's writers
need asyncio for a type annotation, and kio imports hypothesis when installed; nothing here
uses either.
The alternatives in Python, kafka-python's and aiokafka's protocol modules, are
hand-written structs rather than generated from Kafka's schemas.
"""

from .acl import AclFile, AclRule, Authorizer, parse_acl_file
from .apis import SUPPORTED_VERSIONS, ApiKey, api_versions_response
from .builders import (
    Node,
    describe_cluster_response,
    fetch_response,
    find_coordinator_response,
    list_offsets_response,
    produce_expects_response,
    produce_response,
)
from .connection import (
    DEFAULT_MAX_FRAME_BYTES,
    Connection,
    EncodedResponse,
    ProtocolError,
    WireRequest,
)
from .consumer_groups import (
    consumer_describe_from_core,
    consumer_describe_to_core,
    consumer_heartbeat_from_core,
    consumer_heartbeat_to_core,
)
from .fast_metadata import metadata_response
from .fast_responses import fast_response
from .sasl import SaslServer, SaslStep, ScramCredential, illegal_state_response, scram_credential
from .translate import (
    error_response,
    offset_fetch_from_core,
    offset_fetch_to_core,
    request_to_core,
    response_from_core,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "AclFile",
    "AclRule",
    "ApiKey",
    "Authorizer",
    "Connection",
    "EncodedResponse",
    "Node",
    "ProtocolError",
    "SaslServer",
    "SaslStep",
    "ScramCredential",
    "WireRequest",
    "api_versions_response",
    "consumer_describe_from_core",
    "consumer_describe_to_core",
    "consumer_heartbeat_from_core",
    "consumer_heartbeat_to_core",
    "error_response",
    "fast_response",
    "fetch_response",
    "describe_cluster_response",
    "find_coordinator_response",
    "list_offsets_response",
    "metadata_response",
    "offset_fetch_from_core",
    "offset_fetch_to_core",
    "parse_acl_file",
    "illegal_state_response",
    "produce_expects_response",
    "produce_response",
    "request_to_core",
    "response_from_core",
    "scram_credential",
]
