"""Groups per state are counted as groups move (issue #9 item 12: the gauge must not scan every
group every 5 s). The counts must equal a full scan after anything: the simulator checks it after
every step, the harness after every scenario step; these tests cover loading and unloading."""

import random

from groupcoord.coordinator import Shard
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

from .harness import scanned_state_counts
from .simulation import Simulation


def test_counts_follow_a_simulated_run_and_its_reload():
    sim = Simulation(3)
    for _ in range(1_500):
        sim.step()  # checks counts == scan after every step
    assert sim.shard.group_state_counts() == scanned_state_counts(sim.shard) != {}
    fresh = Shard(0, 2, sim.config)
    for record in sim.records:
        fresh.replay(record)
    assert fresh.group_state_counts() == scanned_state_counts(fresh)
    fresh.on_loaded(sim.now)
    assert fresh.group_state_counts() == scanned_state_counts(fresh)
    fresh.on_unloaded(sim.now)
    assert fresh.group_state_counts() == {} == scanned_state_counts(fresh)


def _member(i: int) -> MemberMetadataValue:
    return MemberMetadataValue(f"m{i}", None, "c", "h", 100, 100, b"", b"")


def test_counts_follow_random_restores_replays_and_tombstones():
    rng = random.Random(11)
    shard = Shard(0, 1)
    for _ in range(2_000):
        group_id = f"g{rng.randrange(40)}"
        roll = rng.random()
        members = tuple(_member(i) for i in range(rng.randrange(3)))
        value = GroupMetadataValue(
            "consumer", 1, "range" if members else None, "m0" if members else None, 5, members
        )
        if roll < 0.3:
            shard.restore(
                group_id,
                value if rng.random() < 0.5 else None,
                {("t", rng.randrange(3)): OffsetCommitValue(1)},
            )
        elif roll < 0.55:
            shard.replay(Record(GroupMetadataKey(group_id), value if roll < 0.45 else None))
        else:
            key = OffsetCommitKey(group_id, "t", rng.randrange(3))
            shard.replay(Record(key, OffsetCommitValue(2) if roll < 0.8 else None))
        assert shard.group_state_counts() == scanned_state_counts(shard)
    shard.on_loaded(0)  # drops offsets-only groups left empty
    assert shard.group_state_counts() == scanned_state_counts(shard)
