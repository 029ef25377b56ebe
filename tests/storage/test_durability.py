"""Names survive a machine crash (directory fsyncs), and lock-free readers see only durable data.

``NameLog`` hooks the os functions storage uses to create and rename files and directories, and
``os.fsync``; it records, in order, each name that enters a directory and each fsync of a
directory. A name is made durable only by an fsync of its directory that comes after it.
"""

import os
import stat

from groupcoord.coordinator import Shard
from groupcoord.storage import (
    LogConfig,
    durable_end_offset,
    list_segments,
    open_partition_log,
    read_durable_end,
    read_log,
    watermark_file,
    write_export_watermark,
)
from groupcoord.storage.snapshot import list_snapshots

from .helpers import loaded_state, records_between, state_of


def _dir_id(path: str) -> tuple[int, int]:
    st = os.stat(os.path.dirname(os.path.abspath(path)))
    return st.st_dev, st.st_ino


class NameLog:
    def __init__(self, monkeypatch) -> None:
        self.events: list[tuple[str, tuple[int, int], str]] = []
        real_mkdir, real_open, real_replace, real_fsync = os.mkdir, os.open, os.replace, os.fsync

        def mkdir(path, *args, **kwargs):
            real_mkdir(path, *args, **kwargs)
            self.events.append(("name", _dir_id(path), str(path)))

        def open_(path, flags, *args, **kwargs):
            new = bool(flags & os.O_CREAT) and not os.path.exists(path)
            fd = real_open(path, flags, *args, **kwargs)
            if new:
                self.events.append(("name", _dir_id(path), str(path)))
            return fd

        def replace(src, dst, *args, **kwargs):
            real_replace(src, dst, *args, **kwargs)
            self.events.append(("name", _dir_id(dst), str(dst)))

        def fsync(fd):
            real_fsync(fd)
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                self.events.append(("fsync", (st.st_dev, st.st_ino), ""))

        for name, hook in (
            ("mkdir", mkdir),
            ("open", open_),
            ("replace", replace),
            ("fsync", fsync),
        ):
            monkeypatch.setattr(os, name, hook)

    def names(self) -> set[str]:
        return {os.path.basename(path) for kind, _, path in self.events if kind == "name"}

    def unsynced(self) -> list[str]:
        """Names no later fsync of their directory made durable."""
        return [
            path
            for i, (kind, directory, path) in enumerate(self.events)
            if kind == "name" and ("fsync", directory, "") not in self.events[i + 1 :]
        ]


def test_every_created_or_renamed_name_is_made_durable(tmp_path, monkeypatch):
    path = str(tmp_path / "cluster" / "partition-3")
    config = LogConfig(
        segment_bytes=4096,
        max_record_bytes=1024,
        max_batch_bytes=2048,
        snapshot_every_records=0,
        snapshot_every_bytes=0,
    )
    names = NameLog(monkeypatch)
    log = open_partition_log(path, config)  # two directories, epoch, log id, segment, ...
    assert {"cluster", "partition-3", "epoch.json", "log-id.json", f"{0:020d}.log"} <= names.names()
    assert names.unsynced() == []
    names.events.clear()
    log.load_into(Shard(0, 1))
    for start in range(0, 300, 30):  # rolls, snapshots
        log.append(records_between(start, start + 30))
        if start in (120, 270):
            log.snapshot()
    log.close()
    assert len([n for n in names.names() if n.endswith(".log")]) > 2 and list_snapshots(path)
    assert names.unsynced() == []
    with open(list_snapshots(path)[-1][1], "r+b") as f:  # a damaged snapshot is set aside
        f.truncate(10)
    with open_partition_log(path, config) as log:
        names.events.clear()
        loaded_state(log)
        assert any(name.endswith(".damaged") for name in names.names())
        assert names.unsynced() == []
    names.events.clear()
    write_export_watermark(path, "lake1", 310)  # and a skip past it
    with open_partition_log(path, config) as log:
        loaded_state(log)
        assert log.end_offset == 310
    assert {watermark_file("lake1"), "skipped-offsets.json", f"{310:020d}.log"} <= names.names()
    assert names.unsynced() == []


def test_the_published_durable_end_moves_only_after_an_fsync(tmp_path, monkeypatch):
    path = str(tmp_path)
    log = open_partition_log(path)  # fsync policy "always"
    log.load_into(Shard(0, 1))
    assert read_durable_end(path) == 0
    published_at_fsync = []
    real_fsync = os.fsync

    def fsync(fd):
        published_at_fsync.append(read_durable_end(path))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    log.append(records_between(0, 10))
    monkeypatch.undo()
    assert published_at_fsync == [0]  # not before the bytes are on disk
    assert read_durable_end(path) == 10  # and right after
    log.close()


def test_with_policy_never_lock_free_readers_get_only_what_was_synced(tmp_path):
    # The exporter reads without the lock: bytes in the page cache may be gone after a machine
    # crash, so it must stop at the durable end, which only fsyncs move.
    path = str(tmp_path)
    config = LogConfig(
        fsync_policy="never",
        segment_bytes=4096,
        max_record_bytes=1024,
        max_batch_bytes=2048,
        snapshot_every_records=0,
        snapshot_every_bytes=0,
    )
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        log.append(records_between(0, 5))
        assert durable_end_offset(path) == 0
        while len(list_segments(path)) < 3:  # each roll syncs the sealed segment
            start = log.end_offset
            log.append(records_between(start, start + 20))
        sealed = list_segments(path)[-1].base_offset
        assert durable_end_offset(path) == sealed < log.end_offset
        bounded = list(read_log(path, to_offset=durable_end_offset(path)))
        assert [e.offset for e in bounded] == list(range(sealed))
        log.snapshot()  # a snapshot syncs the active segment
        assert durable_end_offset(path) == log.end_offset
        log.append(records_between(log.end_offset, log.end_offset + 3))
        assert durable_end_offset(path) == log.end_offset - 3
        end = log.end_offset
    assert durable_end_offset(path) == end  # close syncs
    with open_partition_log(path, config) as log:
        assert loaded_state(log)[0] == state_of(records_between(0, end))


def test_only_policy_never_appends_without_waiting_for_an_fsync(tmp_path, monkeypatch):
    # The runtime writes on its event loop when append_may_block is False: no append of that
    # log may fsync, but the one that rolls the segment.
    fsyncs = []
    real_fsync = os.fsync
    for policy in ("always", "interval", "never"):
        config = LogConfig(fsync_policy=policy, snapshot_every_records=0, snapshot_every_bytes=0)
        with open_partition_log(str(tmp_path / policy), config) as log:
            log.load_into(Shard(0, 1))
            monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
            log.append(records_between(0, 5))
            monkeypatch.undo()
            assert log.append_may_block == (policy != "never")
            assert bool(fsyncs) == (policy == "always")
            fsyncs.clear()
