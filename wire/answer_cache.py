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
  catalog changes. A bigger answer is built per request. A caller that numbers its catalogs
  (``catalog_version``: one number, one catalog, as the router's and the listeners' are) has
  each entry checked by that number; otherwise the catalog is copied into each entry and
  compared by value, so a catalog changed in place is seen too, at the catalog's size per
  request (6–8 ms at 90,000 topics, for an answer naming one topic: bench/catalog.py's
  "metadata" row).
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
        # (version, topics asked, brokers, leader, cluster id, operations)
        #   -> (catalog version, or the catalog and topic ids as they were; the encoded answer)
        self._entries: OrderedDict[tuple, tuple[object, EncodedResponse]] = OrderedDict()
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
        catalog_version: int | None = None,
    ) -> EncodedResponse:
        """The answer to ``request``; ``catalog_version``, when the caller numbers its
        catalogs, names the one ``partitions`` and ``topic_ids`` are (module docstring); None
        or negative: not numbered."""
        if catalog_version is not None and catalog_version < 0:
            catalog_version = None
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
        if entry is not None:
            catalog = entry[0]
            if (
                catalog == catalog_version
                if catalog_version is not None
                else isinstance(catalog, tuple) and catalog == (partitions, topic_ids)
            ):
                self._entries.move_to_end(key)
                return entry[1]
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
            self._cached_bytes -= len(self._entries.pop(key)[1].body)
        if len(encoded.body) <= MAX_CACHED_BYTES:
            catalog = (
                catalog_version
                if catalog_version is not None
                else (dict(partitions), dict(topic_ids))
            )
            self._entries[key] = (catalog, encoded)
            self._cached_bytes += len(encoded.body)
            while len(self._entries) > MAX_ENTRIES or self._cached_bytes > MAX_CACHED_BYTES:
                self._cached_bytes -= len(self._entries.popitem(last=False)[1][1].body)
        return encoded
