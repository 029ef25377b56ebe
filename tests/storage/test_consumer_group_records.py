"""KIP-848 consumer-group records through the real log: codec round trip, snapshots (compacted
with tombstones), and a reload that rebuilds exactly the live consumer groups."""

import msgspec

from groupcoord.coordinator import Shard
from groupcoord.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTopicPartitions,
)
from groupcoord.coordinator.records import Record
from groupcoord.storage import LogConfig, load, open_partition_log
from groupcoord.storage.codec import decode_records, encode_payload, envelopes_of
from groupcoord.storage.snapshot import SnapGroup, list_snapshots, read_snapshot

from ..core.consumer_simulation import ConsumerSimulation

CONFIG = dict(segment_bytes=64 * 1024, snapshot_every_bytes=0, snapshot_every_records=0)


def test_every_consumer_record_type_round_trips_through_the_codec():
    records = [
        Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7)),
        Record(
            ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
            ConsumerGroupCurrentMemberAssignmentValue(
                3, 2, "unrevoked_partitions", (ConsumerGroupTopicPartitions("t", (0, 4)),)
            ),
        ),
        Record(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None),
    ]
    assert decode_records(encode_payload(envelopes_of(records))) == records


def test_an_older_snapshot_group_decodes_with_no_consumer_records():
    class OldSnapGroup(msgspec.Struct, array_like=True):
        group: str
        metadata: None
        topics: list

    old = msgspec.msgpack.encode(OldSnapGroup("g", None, []))
    assert msgspec.msgpack.decode(old, type=SnapGroup).records == []
    # And an older reader ignores the appended field.
    new = msgspec.msgpack.encode(SnapGroup("g", None, [], []))
    assert msgspec.msgpack.decode(new, type=OldSnapGroup).group == "g"


def test_reload_from_log_and_snapshots_rebuilds_the_live_consumer_groups(tmp_path):
    path = str(tmp_path)
    sim = ConsumerSimulation(seed=3, check_replay_every=0)
    config = LogConfig(**CONFIG)
    written = 0
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        for step in range(400):
            sim.step()
            log.append(sim.records[written:])
            written = len(sim.records)
            if step % 97 == 0:
                log.snapshot()
        log.snapshot()
        for _ in range(50):  # and a tail after the last snapshot
            sim.step()
        log.append(sim.records[written:])
    image = read_snapshot(list_snapshots(path)[-1][1])
    assert image.records  # the snapshot carries consumer-group records
    assert sum(len(g.members) for g in sim.shard.consumer_groups()) > 0  # a live state
    shard = Shard(0, 1, config=sim.config)
    summary = load(path, shard)
    assert summary.snapshot_offset >= 0
    assert shard.consumer_durable_state() == sim.shard.consumer_durable_state()
    assert shard.durable_state() == sim.shard.durable_state()
