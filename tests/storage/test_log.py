"""The segmented log: append, batching, rolling, limits, the writer lock, epochs, fsync policies."""

import os
import subprocess
import sys
import threading

import pytest

from groupcoord.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import (
    LogClosedError,
    LogConfig,
    LogLockedError,
    RecordTooLargeError,
    list_segments,
    log_start_offset,
    open_partition_log,
    read_log,
)
from groupcoord.storage.segments import read_segment_bytes, scan_segment

from .helpers import loaded_state, record_at, records_between, state_of


def _scan(path, base):
    return scan_segment(read_segment_bytes(path), path, base, is_last=True)


def test_append_returns_end_offsets_and_read_log_gives_every_record(tmp_path):
    with open_partition_log(str(tmp_path)) as log:
        assert log.end_offset == 0
        assert log.append(records_between(0, 5)) == 5
        assert log.append([]) == 5
        assert log.append(records_between(5, 105)) == 105
    entries = list(read_log(str(tmp_path)))
    assert [e.offset for e in entries] == list(range(105))
    assert [e.record for e in entries] == records_between(0, 105)
    assert [e.offset for e in read_log(str(tmp_path), from_offset=77)] == list(range(77, 105))
    with pytest.raises(ValueError, match="from_offset"):
        list(read_log(str(tmp_path), from_offset=-1))


def test_one_append_is_split_into_bounded_batches_and_one_fsync(tmp_path, monkeypatch):
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    config = LogConfig(max_record_bytes=1024, max_batch_bytes=4096)
    with open_partition_log(str(tmp_path), config) as log:
        fsyncs.clear()
        log.append(records_between(0, 2000))  # many requests' records, one group commit
        assert len(fsyncs) == 1
    scan = _scan(str(tmp_path / "00000000000000000000.log"), 0)
    assert len(scan.batches) > 10
    assert all(38 + header.length <= 4096 for _, header in scan.batches)
    assert {header.append_offset for _, header in scan.batches} == {0}
    assert [bool(header.flags & 1) for _, header in scan.batches] == [False] * (
        len(scan.batches) - 1
    ) + [True]
    assert [e.record for e in read_log(str(tmp_path))] == records_between(0, 2000)


@pytest.mark.parametrize("policy", ["interval", "never"])
def test_other_fsync_policies_do_not_fsync_on_append(tmp_path, monkeypatch, policy):
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    config = LogConfig(fsync_policy=policy, fsync_interval_ms=60_000)
    log = open_partition_log(str(tmp_path), config)
    fsyncs.clear()
    for start in range(0, 50, 10):
        log.append(records_between(start, start + 10))
    assert fsyncs == []
    log.close()  # close always syncs
    assert len(fsyncs) == 1
    with open_partition_log(str(tmp_path), config) as log:
        assert log.end_offset == 50


def test_interval_policy_syncs_in_the_background(tmp_path, monkeypatch):
    synced = threading.Event()
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.set(), real_fsync(fd))[1])
    with open_partition_log(
        str(tmp_path), LogConfig(fsync_policy="interval", fsync_interval_ms=10)
    ) as log:
        synced.clear()
        log.append(records_between(0, 10))
        assert synced.wait(30), "the interval flusher never synced"
        with log._io_lock:  # the flusher clears it under this lock
            assert not log._dirty


def test_segments_roll_at_the_size_limit_and_continue_each_other(tmp_path):
    config = LogConfig(segment_bytes=8192, max_record_bytes=1024, max_batch_bytes=2048)
    with open_partition_log(str(tmp_path), config) as log:
        for start in range(0, 1000, 25):
            log.append(records_between(start, start + 25))
    segments = list_segments(str(tmp_path))
    assert len(segments) > 5
    expected = 0
    for segment in segments:
        assert segment.base_offset == expected
        scan = _scan(segment.path, segment.base_offset)
        assert scan.torn is None and scan.valid_bytes == segment.size_bytes
        # an append never spans two segments, so a segment holds whole appends only
        assert scan.batches[-1][1].flags & 1
        expected = scan.next_offset
    assert expected == 1000
    assert all(s.size_bytes <= 8192 for s in segments)
    one = list(read_log(str(tmp_path), segment=segments[2]))
    assert [e.offset for e in one] == list(range(segments[2].base_offset, segments[3].base_offset))
    assert [e.offset for e in read_log(str(tmp_path), segment=segments[-1].path)][-1] == 999
    with pytest.raises(ValueError, match="no segment"):
        list(read_log(str(tmp_path), segment="/nowhere/00000000000000000000.log"))


def test_an_append_larger_than_a_segment_gets_its_own_segment(tmp_path):
    config = LogConfig(segment_bytes=4096, max_record_bytes=1024, max_batch_bytes=2048)
    with open_partition_log(str(tmp_path), config) as log:
        log.append(records_between(0, 3))
        log.append(records_between(3, 300))
    segments = list_segments(str(tmp_path))
    assert [s.base_offset for s in segments] == [0, 3]
    assert segments[1].size_bytes > 4096


def test_a_record_over_the_limit_is_a_named_error_and_nothing_is_written(tmp_path):
    config = LogConfig(max_record_bytes=512, max_batch_bytes=4096)
    big = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, metadata="x" * 600))
    with open_partition_log(str(tmp_path), config) as log:
        log.append(records_between(0, 3))
        size = os.path.getsize(tmp_path / "00000000000000000000.log")
        with pytest.raises(RecordTooLargeError, match="max_record_bytes=512"):
            log.append(records_between(3, 10) + [big])
        with pytest.raises(ValueError):
            log.append([record_at(3), Record(GroupMetadataKey("g"), OffsetCommitValue(1))])
        assert os.path.getsize(tmp_path / "00000000000000000000.log") == size
        assert log.end_offset == 3
        assert log.append(records_between(3, 5)) == 5  # still usable
    assert [e.record for e in read_log(str(tmp_path))] == records_between(0, 5)


def test_only_one_writer_and_each_open_bumps_the_epoch(tmp_path):
    first = open_partition_log(str(tmp_path))
    assert first.epoch == 1
    with pytest.raises(LogLockedError, match=f"pid {os.getpid()}"):
        open_partition_log(str(tmp_path))
    first.close()
    first.close()  # idempotent
    with pytest.raises(LogClosedError):
        first.append(records_between(0, 1))
    with open_partition_log(str(tmp_path)) as second:
        assert second.epoch == 2
    with open_partition_log(str(tmp_path)) as third:
        assert third.epoch == 3


def test_another_process_holding_the_lock_is_refused_until_it_dies(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from groupcoord.storage import open_partition_log;"
            f"log = open_partition_log({str(tmp_path)!r}); print('held', flush=True); "
            "time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LogLockedError, match=f"pid {holder.pid}"):
            open_partition_log(str(tmp_path))
    finally:
        holder.kill()
        holder.wait()
    with open_partition_log(str(tmp_path)) as log:  # the kernel released the dead holder's lock
        assert log.epoch == 2


def test_a_failed_write_fails_the_log_until_reopened(tmp_path, monkeypatch):
    log = open_partition_log(str(tmp_path))
    log.append(records_between(0, 10))

    def broken_write(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken_write)
    monkeypatch.setattr(os, "writev", broken_write)
    with pytest.raises(OSError, match="No space"):
        log.append(records_between(10, 20))
    monkeypatch.undo()
    with pytest.raises(LogClosedError, match="failed"):
        log.append(records_between(10, 20))
    log.close()
    with open_partition_log(str(tmp_path)) as log:
        assert log.end_offset == 10
        state, _ = loaded_state(log)
    assert state == state_of(records_between(0, 10))


def test_reader_racing_a_writer_sees_a_clean_prefix(tmp_path):
    config = LogConfig(segment_bytes=64 * 1024, max_record_bytes=1024, max_batch_bytes=4096)
    done = threading.Event()

    def write():
        with open_partition_log(str(tmp_path), config) as log:
            for start in range(0, 20_000, 500):
                log.append(records_between(start, start + 500))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while not done.is_set():
            entries = list(read_log(str(tmp_path)))
            assert [e.offset for e in entries] == list(range(len(entries)))
            assert all(e.record == record_at(e.offset) for e in entries[-50:])
    finally:
        writer.join()
    assert len(list(read_log(str(tmp_path)))) == 20_000
    assert log_start_offset(str(tmp_path)) == 0


def test_bad_config_argument(tmp_path):
    with pytest.raises(ValueError, match="LogConfig"):
        open_partition_log(str(tmp_path), {"fsync_policy": "always"})


def test_group_records_round_trip(tmp_path):
    value = GroupMetadataValue("consumer", 3, "range", "m", 5, ())
    with open_partition_log(str(tmp_path)) as log:
        log.append([Record(GroupMetadataKey("g"), value), Record(GroupMetadataKey("g"), None)])
    assert [e.record.value for e in read_log(str(tmp_path))] == [value, None]


def test_a_failed_roll_fails_the_log_and_close_still_releases_the_lock(tmp_path, monkeypatch):
    config = LogConfig(segment_bytes=4096, max_record_bytes=1024, max_batch_bytes=2048)
    log = open_partition_log(str(tmp_path), config)
    log.append(records_between(0, 40))
    real_open = os.open

    def no_new_segment(path, *args, **kwargs):
        if str(path).endswith(".log"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_new_segment)
    with pytest.raises(OSError, match="No space"):
        log.append(records_between(40, 80))  # past segment_bytes: rolls first
    monkeypatch.undo()
    with pytest.raises(LogClosedError, match="failed"):
        log.append(records_between(40, 80))
    log.close()  # the old segment's fd is not closed twice
    with open_partition_log(str(tmp_path), config) as log:  # and the lock was released
        assert log.end_offset == 40


def test_an_append_of_more_batches_than_one_writev_takes(tmp_path):
    # writev accepts at most 1024 buffers; a big group commit of small batches needs more.
    config = LogConfig(max_record_bytes=1024, max_batch_bytes=2048)
    with open_partition_log(str(tmp_path), config) as log:
        assert log.append(records_between(0, 40_000)) == 40_000
        assert log.append(records_between(40_000, 40_005)) == 40_005
    scan = _scan(str(tmp_path / "00000000000000000000.log"), 0)
    assert len(scan.batches) > 1100 and scan.torn is None and scan.next_offset == 40_005
    assert [e.record for e in read_log(str(tmp_path), from_offset=39_990)] == records_between(
        39_990, 40_005
    )


@pytest.mark.parametrize("batches", ["one writev", "more than one writev"])
def test_short_writes_are_finished(tmp_path, monkeypatch, batches):
    # A regular file's writev may write less than asked (a full disk freeing up, a signal):
    # the rest is written before the append returns, whether the parts took one writev or more.
    config = LogConfig(max_record_bytes=1024, max_batch_bytes=2048)
    count = 10 if batches == "one writev" else 40_000
    real_writev, shortened = os.writev, []

    def short_writev(fd, parts):
        whole = b"".join(parts)
        shortened.append(len(whole))
        return os.write(fd, whole[: max(len(whole) // 3, 1)])

    with open_partition_log(str(tmp_path), config) as log:
        monkeypatch.setattr(os, "writev", short_writev)
        assert log.append(records_between(0, count)) == count
        monkeypatch.setattr(os, "writev", real_writev)
    assert (len(shortened) == 1) == (batches == "one writev")
    assert [e.record for e in read_log(str(tmp_path))] == records_between(0, count)


def test_a_failed_background_fsync_fails_the_log(tmp_path, monkeypatch):
    failed = threading.Event()
    real_fsync = os.fsync

    def flusher_fsync_fails(fd):
        if threading.current_thread().name.startswith("fsync-"):
            failed.set()
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    log = open_partition_log(
        str(tmp_path), LogConfig(fsync_policy="interval", fsync_interval_ms=10)
    )
    monkeypatch.setattr(os, "fsync", flusher_fsync_fails)
    log.append(records_between(0, 10))
    assert failed.wait(30), "the interval flusher never ran"
    with log._io_lock:  # the flusher records the failure under it
        pass
    with pytest.raises(LogClosedError, match="Input/output error"):
        log.append(records_between(10, 20))
    assert log.maybe_snapshot(None) is None
    log.close()
    monkeypatch.undo()
    with open_partition_log(str(tmp_path)) as log:  # pages still cached: reopen goes on
        assert log.end_offset == 10
