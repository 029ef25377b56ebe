"""Epochs fence: a replaced incarnation acknowledges nothing, and readers pass over the append it
may land after the takeover (by epoch, ``storage.segments``), or refuse what they cannot sort out.

A lock can be lost while its holder runs on (an NFS lease that expired while the client was
stalled). These tests lose it on purpose (``LOCK_UN`` on the first incarnation's lock), so a
second incarnation takes the lock from another open file description and bumps the epoch, as a
restarted actor elsewhere would.
"""

import fcntl
import os
import random
import threading

import pytest

from groupcoord.coordinator import Shard
from groupcoord.storage import (
    CorruptLogError,
    LogClosedError,
    LogConfig,
    StorageError,
    batch_crc_holding,
    list_segments,
    load,
    open_partition_log,
    read_log,
    write_export_watermark,
)
from groupcoord.storage import partition_log as writer_module
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


def _every_reader_reads(path: str, offsets: list[int], records=None, torn: bool = False) -> None:
    """read_log (whole, and segment by segment as the exporter splits it), the loader and the
    writer's own load all hold exactly ``records`` (by default those ``record_at`` gives) at
    ``offsets``, and nothing else; the loader and the writer report a torn tail if ``torn``."""
    records = [record_at(o) for o in offsets] if records is None else records
    whole = [(e.offset, e.record) for e in read_log(path)]
    assert whole == list(zip(offsets, records, strict=True))
    by_segment = [(e.offset, e.record) for s in list_segments(path) for e in read_log(path, 0, s)]
    assert by_segment == whole
    assert all(batch_crc_holding(path, o) is not None for o in offsets)  # the exporter's
    want = state_of(records)
    readonly = Shard(0, 1)
    summary = load(path, readonly)
    assert readonly.durable_state() == want and (summary.truncated is not None) == torn
    with open_partition_log(path) as log:
        assert (log.truncated is not None) == torn
        assert loaded_state(log)[0] == want


def test_a_zombies_batch_of_an_older_epoch_after_a_newer_one_is_passed_over(tmp_path):
    # A zombie that passed its owner check just before being replaced lands its append after
    # its successor's: written after the takeover, it was never acknowledged.
    path = str(tmp_path)
    segment, epoch = _two_incarnations(path)
    with open(segment, "ab") as f:  # offsets line up: only the epoch tells
        f.write(_batch(20, 25, epoch - 1))
    _every_reader_reads(path, list(range(20)))
    assert load(path, Shard(0, 1)).passed_over_batches == 1  # and the loader says so
    with open_partition_log(path) as log:  # the next one appends after it
        loaded_state(log)
        assert log.end_offset == 20
        log.append(records_between(20, 23))
    _every_reader_reads(path, list(range(23)))


def test_a_zombies_stale_batch_before_its_successors_appends_is_passed_over_not_truncated(tmp_path):
    # A zombie stalled between its owner check and its write (multinode test_zombie, once in
    # CI) lands a batch of its own, older offsets in the middle of its successor's segment, and
    # the successor appends after it. Once, readers took both for a torn tail and the writer's
    # next open truncated the acknowledged records away; then they refused the log.
    path = str(tmp_path)
    segment, epoch = _two_incarnations(path)
    with open(segment, "ab") as f:
        f.write(_batch(5, 8, epoch - 1))  # the zombie's, behind the log
        f.write(_batch(20, 22, epoch))  # the successor's, acknowledged
    size = os.path.getsize(segment)
    _every_reader_reads(path, list(range(22)))
    assert os.path.getsize(segment) == size  # the writer truncated nothing


# Each zombie patches these anew (the last one made is the one that stalls).
_REAL_WRITE_ALL = writer_module.write_all
_REAL_OPEN_SEGMENT = writer_module.PartitionLog._open_segment


class _StalledZombie:
    """A first incarnation whose append stops between its owner check and its write (a long
    pause or a stalled NFS client) while a second one takes the log over, then resumes.
    ``in_roll``: it stops in the roll before its write, before it creates the new segment."""

    def __init__(self, path: str, config: LogConfig, monkeypatch, in_roll: bool = False) -> None:
        self.log = open_partition_log(path, config)
        self.log.load_into(Shard(0, 1))
        self.armed, self.stalled, self.resume = False, threading.Event(), threading.Event()
        self.failure: list[Exception] = []

        def stall() -> None:
            self.stalled.set()
            assert self.resume.wait(10)

        def write_all(fd, parts):
            if self.armed and not in_roll and fd == self.log._fd:
                stall()
            _REAL_WRITE_ALL(fd, parts)

        def open_segment(log, base_offset):
            if self.armed and in_roll and log is self.log:
                stall()
            return _REAL_OPEN_SEGMENT(log, base_offset)

        monkeypatch.setattr(writer_module, "write_all", write_all)
        monkeypatch.setattr(writer_module.PartitionLog, "_open_segment", open_segment)

    def stall_in(self, records) -> None:
        def append():
            try:
                self.log.append(records)
            except StorageError as exc:
                self.failure.append(exc)

        self.armed = True
        self.thread = threading.Thread(target=append)
        self.thread.start()
        assert self.stalled.wait(10)
        _lose_lock(self.log)

    def land(self) -> None:
        self.resume.set()
        self.thread.join(10)
        assert [type(e).__name__ for e in self.failure] == ["LogFencedError"]
        self.log.close()


@pytest.mark.parametrize("stalls_in", ["its write", "a roll"])
@pytest.mark.parametrize("lands", ["before its successor writes", "after"])
def test_a_stalled_zombies_append_is_passed_over_wherever_it_lands(
    tmp_path, monkeypatch, stalls_in, lands
):
    path = str(tmp_path)
    config = LogConfig(segment_bytes=4096)
    zombie = _StalledZombie(path, config, monkeypatch, in_roll=stalls_in == "a roll")
    written = 0
    while list_segments(path)[-1].size_bytes < 3000:  # the zombie's own segment, nearly full
        zombie.log.append(records_between(written, written + 4))
        written += 4
    # Unlike the successor's records; 30 of them roll the segment, 3 do not.
    zombie.stall_in(_zombies_records(written, 30 if stalls_in == "a roll" else 3))
    successor = open_partition_log(path, config)
    loaded_state(successor)
    if lands == "before its successor writes":
        zombie.land()
    successor.append(records_between(written, written + 1))
    if lands == "after":
        zombie.land()
    successor.append(records_between(written + 1, written + 3))
    successor.close()
    # The successor wrote into a segment of its own: the one the zombie rolled to, if it did.
    assert [info.base_offset for info in list_segments(path)][-1] == written
    _every_reader_reads(path, list(range(written + 3)))


@pytest.mark.parametrize("left_bytes", [0, 20])
def test_a_zombies_append_before_a_successors_torn_first_append_is_passed_over(
    tmp_path, monkeypatch, left_bytes
):
    # The zombie's append lands at the end of the segment its successor then rolls away from,
    # and a crash tears the successor's first append: nothing of it (or a scrap) is in the new
    # segment, which still begins inside the one before.
    path = str(tmp_path)
    zombie = _StalledZombie(path, LogConfig(), monkeypatch)
    zombie.log.append(records_between(0, 10))
    zombie.stall_in(_zombies_records(10, 3))
    successor = open_partition_log(path)
    loaded_state(successor)
    zombie.land()
    successor.append(records_between(10, 12))  # rolls to a segment at offset 10
    successor.close()
    torn = os.path.join(path, f"{10:020d}.log")
    os.truncate(torn, left_bytes)  # the crash: that append was never acknowledged
    _every_reader_reads(path, list(range(10)), torn=left_bytes > 0)
    with open_partition_log(path) as log:
        loaded_state(log)
        log.append(records_between(10, 11))
    _every_reader_reads(path, list(range(11)))


def _zombies_records(offset: int, count: int):
    """Records a reader can tell from those the log holds at these offsets (``record_at``)."""
    return records_between(offset + 100_000, offset + 100_000 + count)


ZOMBIE_SEEDS = int(os.environ.get("GROUPCOORD_ZOMBIE_SEEDS", "12"))


def test_stalled_zombies_in_seeded_runs_cost_nothing_acknowledged(tmp_path, monkeypatch):
    # Incarnation after incarnation is replaced while its append is stalled; the append lands
    # after a random number of its successor's appends (large ones roll segments, and small
    # batches split appends; now and then a crash tears the successor's last append), and
    # every reader must hold what was acknowledged, and only that and the one kind of zombie
    # append that is kept: one no successor's write followed (module docstring of
    # storage.segments).
    for seed in range(ZOMBIE_SEEDS):
        rng = random.Random(seed)
        path = str(tmp_path / f"seed-{seed}")
        config = LogConfig(segment_bytes=4096, max_record_bytes=512, max_batch_bytes=700)
        with open_partition_log(path, config) as log:
            held = records_between(0, rng.randrange(1, 20))
            log.append(held)
        for _ in range(rng.randrange(1, 4)):
            in_roll = rng.random() < 0.5
            zombie = _StalledZombie(path, config, monkeypatch, in_roll)
            # Its first append rolls (if its segment is not empty), later ones need not.
            for _ in range(rng.randrange(int(in_roll), 3)):
                written = records_between(len(held), len(held) + rng.randrange(1, 6))
                zombie.log.append(written)
                held += written
            # Over a segment's worth of records after one append: it rolls, and ``in_roll``
            # stalls it there.
            count = 80 if in_roll else rng.randrange(1, 12)
            stalled = _zombies_records(len(held), count)
            zombie.stall_in(stalled)
            successor = open_partition_log(path, config)
            loaded_state(successor)
            appends = rng.randrange(0, 4)
            lands_after = rng.randrange(0, appends + 1)
            for index in range(appends + 1):
                if index == lands_after:
                    zombie.land()
                if index < appends:
                    end = successor.end_offset
                    written = records_between(end, end + rng.choice([1, 3, 25]))
                    sizes = {info.path: info.size_bytes for info in list_segments(path)}
                    successor.append(written)
                    active = list_segments(path)[-1]
                    last_append = (active.path, sizes.get(active.path, 0), active.size_bytes)
                    held += written
            successor.close()
            if not appends:  # indistinguishable from an append made before the takeover
                held += stalled
            elif appends > 1 and rng.random() < 0.3:  # a crash tore its last append
                segment, start, end = last_append
                os.truncate(segment, rng.randrange(start + 1, end))  # a scrap is left
                held = held[: len(held) - len(written)]
                _every_reader_reads(path, list(range(len(held))), held, torn=True)
        _every_reader_reads(path, list(range(len(held))), held)


def test_a_misplaced_batch_of_the_same_epoch_is_still_damage(tmp_path):
    # Passing over is for batches of an older epoch only: a batch of the same epoch that does
    # not begin where the log ends is damage, and acknowledged data behind it is refused.
    path = str(tmp_path)
    segment, epoch = _two_incarnations(path)
    with open(segment, "ab") as f:
        f.write(_batch(5, 8, epoch))
        f.write(_batch(20, 22, epoch))
    _every_reader_refuses(path, "acknowledged data is damaged")


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
