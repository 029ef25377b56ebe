"""Records stay out of the cyclic garbage collector (``records.Record``, ``gc=False``).

A commit of N partitions writes N records, and they live on after the answer: queued for the
log's append, then held unfolded until the snapshot thread folds them. Tracked, each would be
counted toward every young collection and scanned by the older ones while it waits (in a
partition actor, 13.6–15.5 µs of GC a commit of 64 partitions against 3.4–4.0 untracked,
bench/wire-findings.md). A record cannot be part of a cycle: every record type is a frozen
Struct of scalars, bytes, tuples and frozen Structs, all set when it is built."""

import gc

from groupcoord.coordinator.records import GroupMetadataValue, OffsetCommitValue

from .harness import Harness


def test_the_records_a_shard_writes_are_not_tracked_by_the_cyclic_collector():
    h = Harness()
    ids, generation = h.join_stable(2)
    errors = h.commit({("t", p): 5 for p in range(4)}, member_id=ids[0], generation=generation)
    assert set(errors.values()) == {0}
    h.leave(*ids)
    values = {type(r.value) for r in h.records}
    assert {GroupMetadataValue, OffsetCommitValue} <= values, values
    assert [r for r in h.records if gc.is_tracked(r)] == []
