"""Snapshots: thresholds, compaction, retention, fallback from damaged snapshots, export
retention."""

import errno
import logging
import os
import random
import subprocess
import sys
import threading

import msgspec
import pytest
from msgspec.structs import fields

from groupcoord.coordinator import Shard
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import (
    CorruptLogError,
    LogConfig,
    list_segments,
    load,
    log_start_offset,
    open_partition_log,
    read_export_watermarks,
    read_log,
    watermark_file,
    write_export_watermark,
)
from groupcoord.storage import snapshot as snapshot_module
from groupcoord.storage.snapshot import (
    SnapshotDamaged,
    SnapValue,
    list_snapshots,
    offsets_of,
    read_snapshot,
    write_snapshot,
)

from .helpers import loaded_state, records_between, state_of

TINY = dict(
    segment_bytes=8 * 1024, max_record_bytes=1024, max_batch_bytes=2048, snapshot_every_bytes=0
)


class Untouchable:
    """maybe_snapshot runs while the event loop mutates the shard: it must never look at it."""

    def __getattr__(self, name):
        raise AssertionError(f"maybe_snapshot touched shard.{name}")


def _fill(path, config, end, chunk=37, load_first=True):
    with open_partition_log(path, config) as log:
        if load_first:
            log.load_into(Shard(0, 1))
        snapshots = []
        while log.end_offset < end:
            start = log.end_offset
            log.append(records_between(start, min(start + chunk, end)))
            taken = log.maybe_snapshot(Untouchable())
            if taken:
                snapshots.append(taken)
    return snapshots


def test_snapshots_follow_the_record_threshold(tmp_path):
    config = LogConfig(snapshot_every_records=100, snapshot_every_bytes=0)
    with open_partition_log(str(tmp_path), config) as log:
        log.append(records_between(0, 50))
        assert log.maybe_snapshot(Untouchable()) is None  # not loaded: no state to snapshot
        with pytest.raises(Exception, match="load_into"):
            log.snapshot()
    with open_partition_log(str(tmp_path), config) as log:
        log.load_into(Shard(0, 1))  # the 50 loaded records count
        log.append(records_between(50, 99))
        assert log.maybe_snapshot(Untouchable()) is None
        log.append(records_between(99, 100))
        path = log.maybe_snapshot(Untouchable())
        assert path is not None and path.endswith("snapshot-00000000000000000100.snap")
        assert log.maybe_snapshot(Untouchable()) is None


def test_snapshots_follow_the_byte_threshold(tmp_path):
    config = LogConfig(snapshot_every_records=0, snapshot_every_bytes=20_000)
    with open_partition_log(str(tmp_path), config) as log:
        log.load_into(Shard(0, 1))
        taken = []
        for start in range(0, 1000, 10):
            log.append(records_between(start, start + 10))
            taken.append(log.maybe_snapshot(Untouchable()))
    offsets = [int(os.path.basename(p)[9:29]) for p in taken if p]
    assert 2 <= len(offsets) <= 10 and offsets == sorted(offsets)


def test_a_snapshot_is_the_compacted_state_and_bounds_the_load(tmp_path):
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=500, keep_snapshots=2, **TINY)
    snapshots = _fill(path, config, 5000)
    assert len(snapshots) >= 8
    kept = list_snapshots(path)
    assert len(kept) == 2  # keep_snapshots
    image = read_snapshot(kept[-1][1])
    expected = state_of(records_between(0, image.offset))
    assert {g.group for g in image.groups} == set(expected)
    assert image.offset_count == sum(len(offsets) for _, offsets in expected.values())
    # segments wholly below the OLDEST kept snapshot are gone; the log starts at or below it
    assert 0 < log_start_offset(path) <= kept[0][0]
    assert list_segments(path)[1].base_offset > kept[0][0]
    with open_partition_log(path, config) as log:
        state, summary = loaded_state(log)
    assert state == state_of(records_between(0, 5000))
    assert summary.snapshot_offset == kept[-1][0] and summary.records == 5000 - kept[-1][0]
    readonly = Shard(0, 1)
    assert load(path, readonly).snapshot_offset == kept[-1][0]
    assert readonly.durable_state() == state


def test_dead_tombstones_are_not_in_snapshots(tmp_path):
    records = [
        Record(OffsetCommitKey(f"g{i % 3}", "t", i), OffsetCommitValue(i)) for i in range(30)
    ]
    records += [Record(GroupMetadataKey(f"g{i}"), None) for i in range(3)]
    records += [Record(OffsetCommitKey(f"g{i % 3}", "t", i), None) for i in range(30)]
    with open_partition_log(str(tmp_path), LogConfig(snapshot_every_records=1)) as log:
        log.load_into(Shard(0, 1))
        log.append(records[:30])
        first = read_snapshot(log.maybe_snapshot(None))
        log.append(records[30:])
        second = read_snapshot(log.maybe_snapshot(None))
    assert (len(first.groups), first.offset_count) == (3, 30)
    assert (second.groups, second.offset_count, second.offset) == ([], 0, 63)


@pytest.mark.parametrize("seed", range(20))
def test_a_damaged_newest_snapshot_falls_back_to_the_previous_one(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=400, keep_snapshots=2, **TINY)
    _fill(path, config, 3000 + rng.randrange(500))
    (older, _), (newest, newest_path) = list_snapshots(path)
    size = os.path.getsize(newest_path)
    with open(newest_path, "r+b") as f:
        if rng.random() < 0.5:
            f.truncate(rng.randrange(size))
        else:
            for _ in range(rng.randint(1, 3)):
                position = rng.randrange(size)
                f.seek(position)
                byte = f.read(1)[0]
                f.seek(position)
                f.write(bytes([byte ^ rng.randint(1, 255)]))
    with open_partition_log(path, config) as log:
        state, summary = loaded_state(log)
        end = log.end_offset
    assert summary.snapshot_offset == older
    assert len(summary.damaged_snapshots) == 1 and newest_path in summary.damaged_snapshots[0]
    assert state == state_of(records_between(0, end))


def test_a_snapshot_nested_too_deep_is_damaged_not_a_crash(tmp_path):
    # A group nesting arrays past msgspec's depth limit (it raises RecursionError), behind a
    # valid CRC as only a crafted file has it: damaged, so the loader tries an older one.
    path = write_snapshot(str(tmp_path), 5, [msgspec.Raw(b"\x91" * 100_000 + b"\xc0")], 0)
    with pytest.raises(SnapshotDamaged, match="nested too deep"):
        read_snapshot(path)


def test_without_usable_snapshots_the_full_log_or_a_clear_error(tmp_path):
    whole, trimmed = str(tmp_path / "whole"), str(tmp_path / "trimmed")
    _fill(
        whole, LogConfig(snapshot_every_records=300, keep_snapshots=1, segment_bytes=1 << 30), 1000
    )
    _fill(trimmed, LogConfig(snapshot_every_records=300, keep_snapshots=1, **TINY), 1000)
    for path in (whole, trimmed):
        for _, snapshot in list_snapshots(path):
            with open(snapshot, "r+b") as f:
                f.truncate(10)
    shard = Shard(0, 1)
    summary = load(whole, shard)  # one segment, nothing deleted: replay it all
    assert summary.snapshot_offset == -1 and summary.records == 1000 and summary.damaged_snapshots
    assert shard.durable_state() == state_of(records_between(0, 1000))
    with pytest.raises(CorruptLogError, match="no usable snapshot"):
        load(trimmed, Shard(0, 1))


def test_retain_until_exported_keeps_what_the_exporter_has_not_read(tmp_path):
    base = dict(snapshot_every_records=300, keep_snapshots=1, retain_until_exported=True, **TINY)
    config = LogConfig(**base)
    path = str(tmp_path)
    _fill(path, config, 2000)
    assert log_start_offset(path) == 0  # no watermark file: keep everything
    write_export_watermark(path, "lake1", 700, exported_at="test")
    _fill(path, config, 2600)
    start = log_start_offset(path)
    assert 0 < start <= 700  # deleted up to the watermark, not past it
    assert [e.offset for e in read_log(path, from_offset=700)][:1] == [700]
    with open(os.path.join(path, watermark_file("lake1")), "w") as f:
        f.write("garbage")
    _fill(path, config, 3200)
    assert log_start_offset(path) == start  # an unreadable watermark deletes nothing
    write_export_watermark(path, "lake1", 3200)  # everything written so far is exported
    _fill(path, config, 3800)
    assert log_start_offset(path) > 2600  # deleted up to the new watermark
    with pytest.raises(ValueError, match="next_offset"):
        write_export_watermark(path, "lake1", -1)


def test_retention_waits_for_the_lake_furthest_behind(tmp_path, caplog):
    # Two lakes export the same log: each has its own watermark, and the lower one holds.
    caplog.set_level(logging.INFO, logger="groupcoord.storage")
    config = LogConfig(
        snapshot_every_records=300, keep_snapshots=1, retain_until_exported=True, **TINY
    )
    path = str(tmp_path)
    _fill(path, config, 1000)
    write_export_watermark(path, "behind", 300)
    write_export_watermark(path, "ahead", 1000)
    _fill(path, config, 2000)
    assert 0 < log_start_offset(path) <= 300
    assert sorted(read_export_watermarks(path).values()) == [300, 1000]
    # The operator learns which lake holds the history back.
    assert f"retention waits at offset 300 for {watermark_file('behind')}" in caplog.text
    write_export_watermark(path, "behind", 2000)  # now the other one is furthest behind
    _fill(path, config, 2600)
    assert 300 < log_start_offset(path) <= 1000


def test_the_single_watermark_file_of_earlier_versions_counts_until_a_lake_replaces_it(
    tmp_path,
):
    config = LogConfig(
        snapshot_every_records=300, keep_snapshots=1, retain_until_exported=True, **TINY
    )
    path = str(tmp_path)
    _fill(path, config, 1000)
    with open(os.path.join(path, "export-watermark.json"), "w") as f:
        f.write('{"next_offset": 300}')
    _fill(path, config, 2000)
    assert 0 < log_start_offset(path) <= 300
    write_export_watermark(path, "lake1", 2000)
    assert read_export_watermarks(path) == {watermark_file("lake1"): 2000}
    _fill(path, config, 2600)
    assert log_start_offset(path) > 1000
    with pytest.raises(ValueError, match="letters and digits"):
        write_export_watermark(path, "../x", 1)


def test_no_offset_any_lake_has_passed_is_reused(tmp_path):
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=0, **TINY)
    _fill(path, config, 100)
    write_export_watermark(path, "ahead", 105)  # it saw 5 records the crash took
    write_export_watermark(path, "behind", 90)
    with open_partition_log(path, config) as log:
        loaded_state(log)
        assert log.end_offset == 105


def test_a_log_that_lost_records_below_a_snapshot_continues_after_it(tmp_path):
    # With fsync "never", a power loss can lose log records that an (always fsynced) snapshot holds.
    path = str(tmp_path)
    config = LogConfig(fsync_policy="never", snapshot_every_records=0, snapshot_every_bytes=0)
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        log.append(records_between(0, 300))
        log.snapshot()
    segment = list_segments(path)[0].path
    with open(segment, "r+b") as f:
        f.truncate(os.path.getsize(segment) // 2)
    with open_partition_log(path, config) as log:
        assert log.end_offset < 300
        state, summary = loaded_state(log)
        assert summary.snapshot_offset == 300 and log.end_offset == 300
        log.append(records_between(300, 310))
    assert state == state_of(records_between(0, 300))
    with open_partition_log(path, config) as log:
        assert loaded_state(log)[0] == state_of(records_between(0, 310))


def test_leftover_temporary_files_are_removed_on_open(tmp_path):
    with open_partition_log(str(tmp_path)):
        pass
    (tmp_path / "snapshot-00000000000000000100.snap.tmp").write_bytes(b"half a snapshot")
    with open_partition_log(str(tmp_path)) as log:
        assert loaded_state(log)[1].damaged_snapshots == []
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))


def test_snapshot_values_carry_every_offset_field():
    assert [(f.name, f.type, f.default) for f in fields(SnapValue)] == [
        (f.name, f.type, f.default) for f in fields(OffsetCommitValue)
    ]


def test_a_writer_opening_mid_watermark_write_does_not_break_the_exporter(tmp_path, monkeypatch):
    # The exporter writes the watermark without the writer lock, so a writer (re)opening the
    # partition at that moment must not remove the exporter's temporary file under it.
    path = str(tmp_path)
    open_partition_log(path).close()
    real_fsync = os.fsync
    reopened = []

    def fsync_then_a_writer_opens(fd):
        real_fsync(fd)
        if not reopened:
            reopened.append(True)
            open_partition_log(path).close()  # recovery runs its tmp cleanup here

    monkeypatch.setattr(os, "fsync", fsync_then_a_writer_opens)
    write_export_watermark(path, "lake1", 123)
    monkeypatch.undo()
    assert reopened
    assert read_export_watermarks(path) == {watermark_file("lake1"): 123}
    assert not any(name.endswith(".tmp") for name in os.listdir(path))


def test_a_damaged_snapshot_is_set_aside_so_retention_keeps_the_good_one(tmp_path):
    # With keep_snapshots=2, a damaged newest snapshot must not count as one of the two kept:
    # otherwise the next snapshot's retention deletes the good older one (and the segments
    # below it), and a second fault would leave nothing to rebuild from.
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=400, keep_snapshots=2, **TINY)
    _fill(path, config, 1000)
    (older, _), (newest, newest_path) = list_snapshots(path)
    with open(newest_path, "r+b") as f:
        f.truncate(10)
    with open_partition_log(path, config) as log:
        _, summary = loaded_state(log)
        assert summary.snapshot_offset == older
        fresh = read_snapshot(log.snapshot()).offset
    assert [offset for offset, _ in list_snapshots(path)] == [older, fresh]
    assert os.path.exists(newest_path + ".damaged")
    with open_partition_log(path, config) as log:  # and it still loads
        state, summary = loaded_state(log)
        assert summary.snapshot_offset == fresh and not summary.damaged_snapshots
        assert state == state_of(records_between(0, log.end_offset))


def test_offsets_the_exporter_has_passed_are_never_reused(tmp_path):
    # The exporter reads without the lock, so after a machine crash it may have exported
    # records the log lost (written, not yet fsynced). New records must not take those offsets:
    # the exporter's watermark has passed them and would never export the new records.
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=0, **TINY)
    _fill(path, config, 100)
    write_export_watermark(path, "lake1", 105)  # it saw 5 records the crash took
    with open_partition_log(path, config) as log:
        loaded_state(log)
        assert log.end_offset == 105
        log.append(records_between(105, 110))
    offsets = [entry.offset for entry in read_log(path)]
    assert offsets == list(range(100)) + list(range(105, 110))


def test_a_log_continued_past_the_watermark_loads_again_and_again(tmp_path):
    # After a machine crash the log ends at 100 below the exporter's watermark 105, so the
    # writer goes on at 105. That hole must be a durable, accepted fact: for every later open,
    # for the read-only readers, and for a fallback to an older snapshot below it.
    path = str(tmp_path)
    config = LogConfig(snapshot_every_records=0, keep_snapshots=2, **TINY)
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        log.append(records_between(0, 60))
        log.snapshot()  # @60: below the coming hole
        log.append(records_between(60, 100))
    write_export_watermark(path, "lake1", 105)  # it saw 5 records the crash took
    acked = records_between(0, 100)
    kept = list(range(100))
    with open_partition_log(path, config) as log:  # reopen after the crash
        assert loaded_state(log)[0] == state_of(acked)
        assert log.end_offset == 105
        log.append(records_between(105, 130))
        log.snapshot()  # @130: above it
        log.append(records_between(130, 150))
    acked += records_between(105, 150)
    kept += list(range(105, 150))

    def check(expect_snapshot):
        with open_partition_log(path, config) as log:
            state, summary = loaded_state(log)
            assert state == state_of(acked) and summary.snapshot_offset == expect_snapshot
            assert log.end_offset == kept[-1] + 1
        readonly = Shard(0, 1)
        load(path, readonly)
        assert readonly.durable_state() == state_of(acked)
        entries = list(read_log(path, from_offset=log_start_offset(path)))
        assert [e.offset for e in entries] == [o for o in kept if o >= log_start_offset(path)]

    check(130)  # reopen: used to fail ("missing")
    check(130)  # and again
    (_, older), (_, newest) = list_snapshots(path)
    with open(newest, "r+b") as f:  # the newest snapshot is damaged:
        f.truncate(10)
    check(60)  # @60 + the log, across the hole
    with open_partition_log(path, config) as log:  # retention past the hole
        loaded_state(log)
        for _ in range(3):
            start = log.end_offset
            log.append(records_between(start, start + 200))
            log.snapshot()
        acked += records_between(150, log.end_offset)
        kept += list(range(150, log.end_offset))
    assert log_start_offset(path) > 105 and not os.path.exists(older)
    check(list_snapshots(path)[-1][0])


def _image_state(image) -> dict:
    shard = Shard(0, 1)
    for group in image.groups:
        shard.restore(group.group, group.metadata, offsets_of(group))
    return shard.durable_state()


@pytest.mark.parametrize("seed", range(3))
def test_snapshots_taken_beside_appends_hold_exactly_the_records_below_their_offset(tmp_path, seed):
    # The runtime builds snapshots on their own thread while appends go on. A snapshot whose
    # offset ran ahead of its state (or behind it) would lose or double records on reload.
    rng = random.Random(seed)
    path = str(tmp_path)
    config = LogConfig(
        **{**TINY, "snapshot_every_records": 0, "snapshot_every_bytes": 0, "keep_snapshots": 100}
    )
    end = 6_000
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        images, done = [], threading.Event()

        def snapshotter():
            while not done.is_set():
                images.append(read_snapshot(log.snapshot()))

        thread = threading.Thread(target=snapshotter)
        switch_s = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads often: the races must get a chance
        thread.start()
        try:
            while log.end_offset < end:
                start = log.end_offset
                log.append(records_between(start, min(start + rng.randint(1, 40), end)))
        finally:
            done.set()
            thread.join()
            sys.setswitchinterval(switch_s)
    assert len({image.offset for image in images}) >= 3  # snapshots really interleaved
    for image in images:
        assert _image_state(image) == state_of(records_between(0, image.offset)), image.offset
    with open_partition_log(path, config) as log:
        state, _ = loaded_state(log)
    assert state == state_of(records_between(0, end))


def test_two_writers_of_one_file_never_mix_their_bytes(tmp_path, monkeypatch):
    # A fenced writer still running (its lock lost) snapshots at the offset its successor
    # snapshots at. Before: both wrote through `<path>.tmp`, one inode; the successor's rename
    # published it while the zombie, stalled between its chunks, still wrote into it: the
    # snapshot held half of each.
    path = str(tmp_path / "snapshot-00000000000000000042.snap")
    chunk_bytes = 4096
    zombie_mid_write, successor_done = threading.Event(), threading.Event()
    real_write = snapshot_module.os.write
    zombie = threading.Thread(
        target=lambda: _swallow(
            lambda: snapshot_module.write_atomically(path, [b"Z" * chunk_bytes] * 2)
        )
    )

    def write(fd, data):
        if threading.current_thread() is zombie and zombie_mid_write.is_set():
            assert successor_done.wait(30)  # the zombie's second chunk: after the successor
        written = real_write(fd, data)
        if threading.current_thread() is zombie:
            zombie_mid_write.set()
        return written

    monkeypatch.setattr(snapshot_module.os, "write", write)
    zombie.start()
    assert zombie_mid_write.wait(30)
    snapshot_module.write_atomically(path, [b"S" * chunk_bytes * 2])
    successor_done.set()
    zombie.join(30)
    with open(path, "rb") as f:
        assert f.read() in (b"S" * chunk_bytes * 2, b"Z" * chunk_bytes * 2)


def _swallow(call) -> None:
    try:
        call()
    except OSError:
        pass  # the zombie's rename may find its file gone; the file's bytes are what count


_FULL_DISK_CHILD = """
import os, resource, signal, sys
from groupcoord.storage.snapshot import create_atomically, write_atomically
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
write = {"write": write_atomically, "create": create_atomically}[sys.argv[1]]
try:
    write(sys.argv[2], [b"x" * 40, b"y" * 40])
except OSError as exc:
    print(exc.errno)
"""


@pytest.mark.parametrize("how", ["write", "create"])
def test_a_write_the_disk_refuses_leaves_no_temporary_file(tmp_path, how):
    # A disk that fills up (here: a file-size limit, the same failed write(2)) mid-write used to
    # leave the call's private `<path>.<pid>-<random>.tmp` behind for good where no owner
    # cleans on open (a deployment's root: deployment.json, the catalog's directory).
    path = tmp_path / "deployment.json"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, how, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == str(errno.EFBIG)
    assert sorted(os.listdir(tmp_path)) == []
