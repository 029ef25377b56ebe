"""The offset-retention cleanup works in bounded turns (issue #9 item 12): at most
``offsets_cleanup_max_offsets_per_turn`` offsets examined per timer turn, resuming 1 ms later,
so requests are served between turns; every expired offset is still removed."""

from groupcoord.coordinator import Errors, OffsetCommitKey
from groupcoord.coordinator.routing import partition_for

from .harness import Harness


def _groups_on_our_partition(h: Harness, count: int) -> list[str]:
    ids = [g for g in (f"g{i}" for i in range(1_000)) if partition_for(g, 2) == 0]
    return ids[:count]


def test_cleanup_examines_a_bounded_number_of_offsets_per_turn_and_finishes():
    h = Harness(
        offsets_retention_ms=10_000,
        offsets_retention_check_interval_ms=1_000,
        offsets_cleanup_max_offsets_per_turn=5,
    )
    groups = _groups_on_our_partition(h, 6)
    for group_id in groups:
        assert set(h.commit({("t", 0): 1, ("t", 1): 2}, group_id=group_id).values()) == {
            Errors.NONE
        }
    h.advance(10_000)  # every offset expired; the sweep at 10,000 starts
    turns = []
    while any(h.shard.group(g) is not None for g in groups):
        tombstones = [r for r in h.records if type(r.key) is OffsetCommitKey and r.value is None]
        turns.append(len(tombstones))
        # Between turns a request is served at once.
        assert h.fetch(group_id=groups[-1]).error == Errors.NONE
        h.advance(1)
    # A turn takes 2 groups (2 offsets + 1 each, over a budget of 5): 6 groups in 3 turns,
    # the first two seen above, the third by the loop's exit.
    assert turns == [4, 8]
    assert len([r for r in h.records if r.value is None]) == 12


def test_a_finished_sweep_waits_the_interval_before_the_next():
    h = Harness(
        offsets_retention_ms=10_000,
        offsets_retention_check_interval_ms=1_000,
        offsets_cleanup_max_offsets_per_turn=5,
    )
    for group_id in _groups_on_our_partition(h, 4):
        h.commit({("t", 0): 1}, group_id=group_id)
    h.advance(1_000)  # a sweep: 4 groups, 2 per turn
    assert h.shard.next_deadline_ms() == 1_001
    h.advance(1)
    assert h.shard.next_deadline_ms() == 2_001
