"""Epochs fence: a replaced incarnation acknowledges nothing, and readers refuse a zombie's batch.

A lock can be lost while its holder runs on (an NFS lease that expired while the client was
stalled). These tests lose it on purpose (``LOCK_UN`` on the first incarnation's lock), so a
second incarnation takes the lock from another open file description and bumps the epoch, as a
restarted actor elsewhere would.
"""

import fcntl
import os

import pytest

from groupcoord.coordinator import Shard
from groupcoord.storage import (
    CorruptLogError,
    LogClosedError,
    StorageError,
    list_segments,
    load,
    open_partition_log,
    read_log,
    write_export_watermark,
)
from groupcoord.storage.codec import encode_record, frame_batch

from .helpers import loaded_state, record_at, records_between, state_of


def _lose_lock(log) -> None:
    fcntl.flock(log._lock_fd, fcntl.LOCK_UN)


def _assert_fenced(call) -> None:
    with pytest.raises(StorageError) as caught:
        call()
    assert type(caught.value).__name__ == "LogFencedError", caught.value
    assert "was replaced" in str(caught.value)


def test_a_replaced_incarnation_acknowledges_nothing(tmp_path):
    path = str(tmp_path)
    first = open_partition_log(path)
    first.load_into(Shard(0, 1))
    first.append(records_between(0, 10))
    _lose_lock(first)
    second = open_partition_log(path)  # takes over: lock and the next epoch
    assert second.epoch == first.epoch + 1
    loaded_state(second)
    second.append(records_between(10, 20))
    size_before = list_segments(path)[-1].size_bytes
    _assert_fenced(lambda: first.append(records_between(10, 15)))
    assert list_segments(path)[-1].size_bytes == size_before  # nothing written
    with pytest.raises(LogClosedError, match="must be reopened"):  # failed for good
        first.append(records_between(10, 15))
    with pytest.raises(LogClosedError):
        first.snapshot()
    first.close()
    second.append(records_between(20, 30))
    second.close()
    entries = list(read_log(path))
    assert [e.offset for e in entries] == list(range(30))
    assert all(e.record == record_at(e.offset) for e in entries)
    readonly = Shard(0, 1)
    load(path, readonly)
    assert readonly.durable_state() == state_of(records_between(0, 30))


def test_an_append_overtaken_during_its_fsync_is_not_acknowledged(tmp_path, monkeypatch):
    path = str(tmp_path)
    first = open_partition_log(path)
    first.load_into(Shard(0, 1))
    first.append(records_between(0, 10))
    real_fsync, taken = os.fsync, []

    def fsync_then_replaced(fd):
        real_fsync(fd)
        if not taken:
            taken.append(True)
            _lose_lock(first)
            taken.append(open_partition_log(path))

    monkeypatch.setattr(os, "fsync", fsync_then_replaced)
    _assert_fenced(lambda: first.append(records_between(10, 15)))
    monkeypatch.undo()
    assert first.end_offset == 10
    first.close()
    taken[1].close()


def test_snapshots_and_retention_of_a_replaced_incarnation_are_refused(tmp_path):
    path = str(tmp_path)
    first = open_partition_log(path)
    first.load_into(Shard(0, 1))
    first.append(records_between(0, 10))
    _lose_lock(first)
    with open_partition_log(path):
        _assert_fenced(first.snapshot)
    assert not [name for name in os.listdir(path) if name.endswith(".snap")]
    first.close()


def _two_incarnations(path: str) -> tuple[str, int]:
    """Offsets 0-9 written by one incarnation and 10-19 by the next: the last segment's path
    and the second one's epoch."""
    with open_partition_log(path) as log:
        log.append(records_between(0, 10))
    with open_partition_log(path) as log:
        log.append(records_between(10, 20))
        return list_segments(path)[-1].path, log.epoch


def _batch(first: int, end: int, epoch: int) -> bytes:
    """One whole append of the records at offsets ``first`` to ``end`` - 1, stamped ``epoch``."""
    return frame_batch(
        [encode_record(r) for r in records_between(first, end)], first, first, epoch, True
    )


def _every_reader_refuses(path: str, match: str) -> None:
    """The loader, the reader and the writer's open all raise CorruptLogError matching it."""
    readers = (lambda: load(path, Shard(0, 1)), lambda: list(read_log(path)))
    for read in (*readers, lambda: open_partition_log(path)):
        with pytest.raises(CorruptLogError, match=match):
            read()


def test_readers_refuse_a_batch_of_an_older_epoch_after_a_newer_one(tmp_path):
    # A zombie that passed its check just before being replaced may still land one write.
    path = str(tmp_path)
    segment, epoch = _two_incarnations(path)
    with open(segment, "ab") as f:  # offsets line up: only the epoch tells
        f.write(_batch(20, 25, epoch - 1))
    _every_reader_refuses(path, f"epoch {epoch - 1} follows one of epoch {epoch}")


def test_a_zombies_stale_batch_before_its_successors_appends_is_refused_not_truncated(tmp_path):
    # A zombie stalled between its owner check and its write (multinode test_zombie, once in
    # CI) lands a batch of its own, older offsets in the middle of its successor's segment, and
    # the successor appends after it. That stale batch is intact: no crash tore it, so it is no
    # torn tail, and the successor's append behind it was acknowledged. Before, readers took
    # both for a torn tail and the writer's next open truncated the acknowledged records away.
    path = str(tmp_path)
    segment, epoch = _two_incarnations(path)
    with open(segment, "ab") as f:
        f.write(_batch(5, 8, epoch - 1))  # the zombie's, behind the log
        f.write(_batch(20, 22, epoch))  # the successor's, acknowledged
    size = os.path.getsize(segment)
    _every_reader_refuses(path, "acknowledged data is damaged")
    assert os.path.getsize(segment) == size  # the writer truncated nothing


def test_an_older_epoch_in_a_later_segment_is_refused_too(tmp_path):
    path = str(tmp_path)
    with open_partition_log(path) as log:
        log.append(records_between(0, 10))
    with open_partition_log(path) as log:
        log.append(records_between(10, 20))
    with open(os.path.join(path, f"{20:020d}.log"), "wb") as f:
        f.write(frame_batch([encode_record(r) for r in records_between(20, 25)], 20, 20, 1, True))
    with pytest.raises(CorruptLogError, match="epoch 1 follows one of epoch 2"):
        load(path, Shard(0, 1))
    with pytest.raises(CorruptLogError, match="epoch 1 follows one of epoch 2"):
        list(read_log(path))


def test_a_lost_epoch_file_does_not_make_new_batches_look_older(tmp_path):
    path = str(tmp_path)
    for start in (0, 10):
        with open_partition_log(path) as log:
            log.append(records_between(start, start + 10))
    os.remove(os.path.join(path, "epoch.json"))
    with open_partition_log(path) as log:
        assert log.epoch == 3  # above every epoch in the log, not 1
        log.append(records_between(20, 30))
    readonly = Shard(0, 1)
    load(path, readonly)
    assert readonly.durable_state() == state_of(records_between(0, 30))


def test_a_lost_epoch_file_is_recovered_from_older_segments_when_the_last_is_empty(tmp_path):
    path = str(tmp_path)
    for start in (0, 10):
        with open_partition_log(path) as log:
            log.append(records_between(start, start + 10))
    write_export_watermark(path, "lake1", 25)  # the next open rolls to an empty segment
    with open_partition_log(path) as log:
        loaded_state(log)
        assert log.end_offset == 25
    assert list_segments(path)[-1].size_bytes == 0
    os.remove(os.path.join(path, "epoch.json"))
    with open_partition_log(path) as log:
        assert log.epoch == 3  # above epoch 2, the newest in the log
        loaded_state(log)
        log.append(records_between(25, 30))
    assert [e.offset for e in read_log(path)] == list(range(20)) + list(range(25, 30))
