"""Encoded answers to the requests clients repeat: Metadata and ApiVersions.

Clients ask both often and alike. While a 100-member librdkafka group joined, a partition's
listener answered about 300 ApiVersions requests (one per connection) and 390 Metadata requests
(about four per member, for the subscribed topics), and kio writing them was most of the
partition's CPU in that join: an ApiVersions answer lists every supported range, and a
64-partition topic is 64 nested entities. Neither answer's body holds the correlation id (the
response header, which the connection writes per request, does), so one encoded body serves
every request that asks the same thing:

* ``api_versions_answer``: the answer listing every range depends on the request's version
  only, and is encoded once per version. The two refusals (``apis.api_versions_refusal``) are
  built per request.
* ``MetadataAnswers``: a Metadata answer (``metadata_response``) depends on the request's
  version, the topics it names and the authorized operations it asks for (the caller's), and on
  the listener's view: its brokers, the leader it names, the cluster id and the topic catalog.
  At most ``MAX_ENTRIES`` answers are kept, of ``MAX_CACHED_BYTES`` in all (least recently
  used first out). The budget holds an answer naming every partition of the largest catalog
  (``catalog.MAX_CATALOG_PARTITIONS``, about 5 MB, still tens of milliseconds of a
  listener's loop to write directly, ``fast_metadata``): a client that asks for every topic
  again (a pattern subscription, an admin client listing topics) costs it nothing until the
  catalog changes. A bigger answer is built per request. The view is copied into each entry
  and compared by value, so a catalog changed in place is seen too.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from kio.static.protocol import Payload

from .apis import ApiKey, api_versions_ranges, api_versions_refusal
from .builders import Node, answered_operations
from .connection import EncodedResponse, WireRequest, encode_body
from .fast_metadata import metadata_response

MAX_ENTRIES = 32
MAX_CACHED_BYTES = 16 * 1024 * 1024
# ApiVersions version -> its encoded answer listing every range (a handful of versions).
_API_VERSIONS: dict[int, EncodedResponse] = {}


def api_versions_answer(request: WireRequest) -> EncodedResponse | Payload:
    """``apis.api_versions_response``, encoded once per version when it lists every range."""
    refusal = api_versions_refusal(request)
    if refusal is not None:
        return refusal
    version = request.body_version
    encoded = _API_VERSIONS.get(version)
    if encoded is None:
        body = encode_body(api_versions_ranges(version))
        encoded = _API_VERSIONS[version] = EncodedResponse(ApiKey.API_VERSIONS, version, body)
    return encoded


class MetadataAnswers:
    """``answer`` is ``metadata_response`` encoded, from a bounded cache (module docstring)."""

    def __init__(self) -> None:
        # (version, topics asked, brokers, leader, cluster id)
        #   -> (catalog, topic ids, the encoded answer)
        self._entries: OrderedDict[tuple, tuple[dict, dict, EncodedResponse]] = OrderedDict()
        self._cached_bytes = 0  # of the bodies in ``_entries``

    def __len__(self) -> int:
        return len(self._entries)

    def answer(
        self,
        request: WireRequest,
        *,
        brokers: Sequence[Node],
        leader_id: int,
        partitions: Mapping[str, int],
        cluster_id: str | None,
        topic_ids: Mapping[str, uuid.UUID],
        operations: tuple[int, int],
    ) -> EncodedResponse:
        asked = request.body.topics
        key = (
            request.api_version,
            None if asked is None else tuple((t.name, getattr(t, "topic_id", None)) for t in asked),
            tuple(brokers),
            leader_id,
            cluster_id,
            answered_operations(request, operations),
        )
        entry = self._entries.get(key)
        if entry is not None and entry[0] == partitions and entry[1] == topic_ids:
            self._entries.move_to_end(key)
            return entry[2]
        encoded = metadata_response(
            request,
            brokers=brokers,
            leader_id=leader_id,
            partitions=partitions,
            cluster_id=cluster_id,
            topic_ids=topic_ids,
            operations=operations,
        )
        if entry is not None:  # a stale answer to the same question
            self._cached_bytes -= len(self._entries.pop(key)[2].body)
        if len(encoded.body) <= MAX_CACHED_BYTES:
            self._entries[key] = (dict(partitions), dict(topic_ids), encoded)
            self._cached_bytes += len(encoded.body)
            while len(self._entries) > MAX_ENTRIES or self._cached_bytes > MAX_CACHED_BYTES:
                self._cached_bytes -= len(self._entries.popitem(last=False)[1][2].body)
        return encoded
