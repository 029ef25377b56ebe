"""Group id -> offsets partition, exactly as Kafka computes it (spec §7.1).

``partition = Utils.abs(String.hashCode(group_id)) % num_partitions``, so a group lands on the
same partition number here as on a Kafka cluster with the same partition count.
"""

from __future__ import annotations

import sys
from array import array

_INT32_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: 31-polynomial over UTF-16 code units, 32-bit signed wrap."""
    units = array("H")
    units.frombytes(s.encode("utf-16-le", "surrogatepass"))
    if sys.byteorder == "big":
        units.byteswap()
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def utils_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` but maps Integer.MIN_VALUE to 0 (not to itself)."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return utils_abs(java_string_hashcode(group_id)) % num_partitions
