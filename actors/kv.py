"""Ray's internal KV store (in the GCS), in groupcoord's namespace: the small facts that must
outlive an actor process — who owns a partition, how many loads in a row failed, which port a
listener took. Blocking calls: from a coroutine, run them in a thread."""

from __future__ import annotations

from ray.experimental import internal_kv

NAMESPACE = "groupcoord"


def kv_get(key: bytes) -> bytes | None:
    return internal_kv._internal_kv_get(key, namespace=NAMESPACE)


def kv_put(key: bytes, value: bytes) -> None:
    internal_kv._internal_kv_put(key, value, overwrite=True, namespace=NAMESPACE)
