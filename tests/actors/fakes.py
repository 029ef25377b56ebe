"""A test double for the partition log, for the runtime's tests without Ray.

``MemoryLog`` keeps records in a list shared per directory (so a "restarted" runtime in the same
process reloads what was durable), with switches to hold appends back, fail them, or fail opens.
"""

from __future__ import annotations

import threading


class MemoryLog:
    append_may_block = True  # its appends wait on ``gate``: a slow fsync, when a test holds it

    def __init__(self, store: list, epoch: int = 1) -> None:
        self.store = store
        self.epoch = epoch
        self.gate = threading.Event()
        self.gate.set()
        self.load_gate = threading.Event()
        self.load_gate.set()
        self.fail_appends: BaseException | None = None
        self.fail_load: BaseException | None = None
        self.appends: list[int] = []  # batch sizes, one per append (= one fsync)
        self.append_threads: list[threading.Thread] = []  # the thread of each append
        self.snapshots = 0
        self.closed = False

    def load_into(self, shard, progress=None):
        self.load_gate.wait(10)
        if self.fail_load is not None:
            raise self.fail_load
        for record in self.store:
            shard.replay(record)
        return {"records": len(self.store)}

    def append(self, records) -> int:
        self.gate.wait(10)
        if self.fail_appends is not None:
            raise self.fail_appends
        self.store.extend(records)
        self.appends.append(len(records))
        self.append_threads.append(threading.current_thread())
        return len(self.store)

    def maybe_snapshot(self, shard) -> None:
        self.snapshots += 1

    def close(self) -> None:
        self.closed = True
