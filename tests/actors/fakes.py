"""Test doubles for the partition log, importable by Ray workers (``tests.actors.fakes``).

``MemoryLog`` keeps records in a list shared per directory (so a "restarted" runtime in the same
process reloads what was durable), with switches to hold appends back, fail them, or fail opens.
"""

from __future__ import annotations

import threading


class MemoryLog:
    def __init__(self, store: list, epoch: int = 1) -> None:
        self.store = store
        self.epoch = epoch
        self.gate = threading.Event()
        self.gate.set()
        self.load_gate = threading.Event()
        self.load_gate.set()
        self.fail_appends: BaseException | None = None
        self.appends: list[int] = []          # batch sizes, one per append (= one fsync)
        self.snapshots = 0
        self.closed = False

    def load_into(self, shard, progress=None):
        self.load_gate.wait(10)
        for record in self.store:
            shard.replay(record)
        return {"records": len(self.store)}

    def append(self, records) -> int:
        self.gate.wait(10)
        if self.fail_appends is not None:
            raise self.fail_appends
        self.store.extend(records)
        self.appends.append(len(records))
        return len(self.store)

    def maybe_snapshot(self, shard) -> None:
        self.snapshots += 1

    def close(self) -> None:
        self.closed = True


class FileLog:
    """A minimal durable log for the Ray tests while ``groupcoord.storage`` is not there:
    length + CRC32 framed msgpack records in one file, one fsync per append, a torn tail
    truncated on open, an flock so two incarnations never write at once."""

    def __init__(self, directory: str) -> None:
        import fcntl
        import os
        os.makedirs(directory, exist_ok=True)
        self._lock = open(os.path.join(directory, "lock"), "a+")
        fcntl.flock(self._lock, fcntl.LOCK_EX)          # blocks until the old writer is gone
        epoch_path = os.path.join(directory, "epoch")
        self.epoch = (int(open(epoch_path).read()) if os.path.exists(epoch_path) else 0) + 1
        with open(epoch_path, "w") as f:
            f.write(str(self.epoch))
            f.flush()
            os.fsync(f.fileno())
        self.path = os.path.join(directory, "records.log")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _frames(self):
        import os
        import struct
        import zlib
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        pos = 0
        while pos + 8 <= len(data):
            length, crc = struct.unpack_from(">II", data, pos)
            body = data[pos + 8:pos + 8 + length]
            if len(body) < length or zlib.crc32(body) != crc:
                break
            yield body
            pos += 8 + length
        os.ftruncate(self._fd, pos)                      # drop a torn tail

    def load_into(self, shard, progress=None):
        import msgspec

        from groupcoord.coordinator.records import RECORD_TYPES, Record
        count = 0
        for body in list(self._frames()):
            for number, key, value in msgspec.msgpack.decode(body):
                key_type, value_type = RECORD_TYPES[number]
                shard.replay(Record(msgspec.convert(key, key_type),
                                    None if value is None else msgspec.convert(value, value_type)))
                count += 1
        return {"records": count}

    def append(self, records) -> int:
        import os
        import struct
        import zlib

        import msgspec

        from groupcoord.coordinator.records import RECORD_TYPE_OF
        body = msgspec.msgpack.encode([(RECORD_TYPE_OF[type(r.key)], r.key, r.value)
                                       for r in records])
        os.lseek(self._fd, 0, os.SEEK_END)
        os.write(self._fd, struct.pack(">II", len(body), zlib.crc32(body)) + body)
        os.fsync(self._fd)
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def maybe_snapshot(self, shard) -> None:
        return None

    def close(self) -> None:
        import os
        os.close(self._fd)
        self._lock.close()


def file_log_factory(directory: str, log_config=None) -> FileLog:
    return FileLog(directory)


def log_factory_for_tests():
    """The real storage log once it exists; until then the FileLog above."""
    try:
        from groupcoord.storage import open_partition_log  # noqa: F401
    except ImportError:
        return file_log_factory
    return None                                         # None: the actor's default (storage)
