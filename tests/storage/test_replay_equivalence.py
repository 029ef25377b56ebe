"""State rebuilt through the real log (with and without snapshots) equals the live shard's.

Records come from the core's scenario harness and its seeded client simulation; they are
appended in random group-commit chunks, with snapshots taken by threshold along the way.
"""

import random

import pytest

from groupcoord.coordinator import Shard
from groupcoord.storage import LogConfig, load, open_partition_log
from groupcoord.storage.snapshot import read_snapshot
from tests.core.harness import GROUP, Harness, replayed_shard
from tests.core.simulation import Simulation

CONFIGS = {
    "no_snapshots": LogConfig(snapshot_every_records=0, snapshot_every_bytes=0),
    "frequent_snapshots": LogConfig(
        snapshot_every_records=40,
        snapshot_every_bytes=0,
        keep_snapshots=2,
        segment_bytes=4096,
        max_record_bytes=2048,
        max_batch_bytes=4096,
    ),
    "byte_snapshots": LogConfig(
        snapshot_every_records=0,
        snapshot_every_bytes=3000,
        keep_snapshots=1,
        segment_bytes=4096,
        max_record_bytes=2048,
        max_batch_bytes=4096,
    ),
}


def _persist(path, records, config, rng):
    """Append in random chunks (many requests per group commit), snapshots by threshold."""
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 2))
        i = 0
        while i < len(records):
            n = rng.randint(1, 12)
            log.append(records[i : i + n])
            log.maybe_snapshot(None)
            i += n


def _assert_same(loaded: Shard, reference: Shard) -> None:
    durable = reference.durable_state()
    assert loaded.durable_state() == durable
    for group_id in durable:  # groups with nothing durable need not exist
        group, twin = reference.group(group_id), loaded.group(group_id)
        assert twin is not None, group.group_id
        assert (
            twin.state,
            twin.generation_id,
            twin.leader_id,
            list(twin.members),
            twin.protocol_type,
            twin.protocol_name,
        ) == (
            group.state,
            group.generation_id,
            group.leader_id,
            list(group.members),
            group.protocol_type,
            group.protocol_name,
        )


def _check(tmp_path, live: Shard, records, seed: int) -> None:
    reference = replayed_shard(live, records)  # replayed in memory, no disk
    assert reference.durable_state() == live.durable_state()
    for name, config in CONFIGS.items():
        path = str(tmp_path / name)
        _persist(path, records, config, random.Random(seed))
        with open_partition_log(path, config) as log:
            loaded = Shard(live.partition, live.num_partitions, live.config)
            summary = log.load_into(loaded)
        assert summary.end_offset == len(records)
        if name != "no_snapshots" and len(records) > 100:
            assert summary.snapshot_offset > 0, name
        _assert_same(loaded, reference)
        readonly = Shard(live.partition, live.num_partitions, live.config)
        load(path, readonly)
        _assert_same(readonly, reference)


def test_scenario_through_the_log(tmp_path):
    h = Harness()
    ids, gen = h.join_stable(3)
    h.commit({("t", 0): 5, ("t", 1): 7}, member_id=ids[0], generation=gen)
    h.commit({("u", 0): 1}, group_id="group-0")
    h.leave(ids[2])
    h.advance(2_000)  # sessions expire, group rebalances
    ids, gen = h.join_stable(2)
    for i in range(60):
        h.commit({("t", i % 4): 100 + i}, member_id=ids[i % 2], generation=gen)
    assert h.committed(GROUP)
    _check(tmp_path, h.shard, h.records, seed=1)


@pytest.mark.parametrize("seed", range(6))
def test_simulated_clients_through_the_log(tmp_path, seed):
    sim = Simulation(seed, replay_every=10**9)
    for _ in range(1500):
        sim.step()
    assert len(sim.records) > 50
    _check(tmp_path, sim.shard, sim.records, seed)


def test_after_everything_expired_the_snapshot_is_empty(tmp_path):
    sim = Simulation(11, replay_every=10**9)
    sim.run(800)  # settle: every group and offset expires
    assert sim.shard.durable_state() == {}
    path = str(tmp_path)
    _persist(path, sim.records, CONFIGS["no_snapshots"], random.Random(0))
    with open_partition_log(path) as log:
        log.load_into(Shard(0, 2))

        image = read_snapshot(log.snapshot())
    assert (image.groups, image.offset_count, image.offset) == ([], 0, len(sim.records))
    loaded = Shard(0, 2)
    assert load(path, loaded).snapshot_offset == len(sim.records)
    assert loaded.durable_state() == {}
