"""The librdkafka members of bench/wire.py's groups, spread over a few client processes.

Why processes: with every member in the benchmark's own process, that process's GIL capped
both targets alike (~7,600 commits/s at 16 and 64 members on 2026-11-26, the Python process
at ~0.95 cores, the Kafka JVM and groupcoord's partition short of saturation), so the commit
rows measured the client, not the coordinators. Each process runs a slice of the members, one
polling thread per member, as the single process did.

The processes share one small memory-mapped file with the parent (``Members``):

======== ============================ =================================================
offset   what                         written by
======== ============================ =================================================
0        go, committing, stop (bytes) the parent
8        ready (a byte per process)   each process, once its consumers exist
``c``    commits (int64 per member)   the member's thread
``v``    version (int64 per member)   the member's thread: odd while it rewrites its row
``o``    owned (a byte per member and partition)  the member's thread
======== ============================ =================================================

Sessions: ``Members`` starts one launcher process, which starts the member processes and
waits for them; with ``own_session`` (bench/wire.py's default) the launcher, and so every
member process, runs in a session of its own. Linux's autogroup scheduling (on by default)
shares the CPUs fairly between sessions first and between threads within a session second, so
the clients then compete with the server as another application would (a service started on
its own, or from another terminal), and a server is not favoured for having more threads than
another. In the benchmark's own session (``own_session=False``, ``--one-session``), the ~200
client threads and the server's threads share the CPUs thread by thread.

Run as ``python -m bench.wire_members`` by ``Members`` only.
"""

from __future__ import annotations

import argparse
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.proc_cpu import CpuSample, cpu_seconds, descendants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT_PROCESSES = 4  # at most; a member's process holds its GIL only between librdkafka calls
START_TIMEOUT_S = 60.0  # for the processes to create their consumers
STOP_TIMEOUT_S = 60.0  # for them to leave the group and exit
GO, COMMITTING, STOP = 0, 1, 2
READY_AT = 8
POLL_S = 0.05  # a member's poll while not committing
OWNED_READ_TRIES = 1_000  # a member rewrites its row only when its assignment changes


class _Layout:
    """Byte offsets of the shared file for ``members`` members, ``partitions`` partitions."""

    def __init__(self, members: int, partitions: int) -> None:
        self.members, self.partitions = members, partitions
        self.commits = READY_AT + 64  # up to 64 processes' ready bytes, 8-aligned after
        self.versions = self.commits + 8 * members
        self.owned = self.versions + 8 * members
        self.size = self.owned + members * partitions


def _slices(count: int) -> list[range]:
    processes = min(count, CLIENT_PROCESSES)
    bounds = [count * k // processes for k in range(processes + 1)]
    return [range(bounds[k], bounds[k + 1]) for k in range(processes)]


class Members:
    """``count`` librdkafka consumers of one group over a topic of ``partitions`` partitions,
    in up to ``CLIENT_PROCESSES`` processes (run on ``cpus`` only, if given; in a session of
    their own with ``own_session``: see the module docstring); they subscribe together once all
    exist."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        count: int,
        partitions: int,
        cpus: set[int] | None = None,
        own_session: bool = True,
    ) -> None:
        self.layout = _Layout(count, partitions)
        fd, self.path = tempfile.mkstemp(prefix="groupcoord-members-")
        os.ftruncate(fd, self.layout.size)
        self.shared = mmap.mmap(fd, self.layout.size)
        os.close(fd)
        # The launcher leads a process group of its own either way, so close() can kill it
        # and every member process at once.
        self.launcher = subprocess.Popen(
            [sys.executable, "-m", "bench.wire_members", self.path, bootstrap, group, topic]
            + [str(n) for n in (count, partitions)]
            + ([] if cpus is None else ["--cpus", ",".join(map(str, sorted(cpus)))]),
            cwd=ROOT,
            start_new_session=own_session,
            process_group=None if own_session else 0,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while any(self.shared[READY_AT + k] == 0 for k in range(len(_slices(count)))):
                self._check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError("the member processes never created their consumers")
                time.sleep(0.01)
        except BaseException:
            self.close()
            raise
        self.started = time.perf_counter()
        self.shared[GO] = 1

    @property
    def pids(self) -> list[int]:
        """The launcher's and the member processes'."""
        return descendants(self.launcher.pid)

    def _check_alive(self) -> None:
        if self.launcher.poll() is not None:
            raise RuntimeError(f"the member processes exited with {self.launcher.returncode}")

    def owned(self) -> list[list[int]] | None:
        """Each member's partitions, read while no member rewrites its row; None when some row
        was being rewritten at every try (a member's thread can be descheduled mid-rewrite
        for longer than the tries take, on a loaded machine)."""
        lay = self.layout
        for _ in range(OWNED_READ_TRIES):
            before = bytes(self.shared[lay.versions : lay.owned])
            rows = bytes(self.shared[lay.owned : lay.size])
            after = bytes(self.shared[lay.versions : lay.owned])
            versions = memoryview(before).cast("q")
            if before == after and all(v % 2 == 0 for v in versions):
                break
        else:
            return None
        p = lay.partitions
        return [[k for k in range(p) if rows[m * p + k]] for m in range(lay.members)]

    def wait_stable(self, timeout_s: float) -> float:
        """Seconds from subscribing until every partition has exactly one owner and as many
        members own partitions as can (the first member alone owning everything is not the
        end; with more members than partitions, some own none)."""
        deadline = time.monotonic() + timeout_s
        owners_wanted = min(self.layout.members, self.layout.partitions)
        while time.monotonic() < deadline:
            self._check_alive()
            rows = self.owned()
            if rows is None:  # mid-rewrite: look again
                time.sleep(0.01)
                continue
            owned = [p for partitions in rows for p in partitions]
            owners = sum(1 for partitions in rows if partitions)
            if owners == owners_wanted and len(owned) == self.layout.partitions == len(set(owned)):
                return time.perf_counter() - self.started
            time.sleep(0.01)
        raise TimeoutError("the group never covered every partition")

    def idle_cpu_cores(self, seconds: float) -> float:
        """CPU the member processes use per second of wall time while the group is stable
        and nobody commits."""
        pids = self.pids  # a /proc scan: once, so both readings cover the same processes
        cpu, wall = cpu_seconds(pids), time.perf_counter()
        time.sleep(seconds)
        return (cpu_seconds(pids) - cpu) / (time.perf_counter() - wall)

    def commit_rate(self, seconds: float) -> tuple[float, dict]:
        """Commits/s over ``seconds`` of every member committing, and the CPU of the
        benchmark's processes meanwhile (bench/proc_cpu.py)."""
        before = self._commits()
        self.shared[COMMITTING] = 1
        started = time.perf_counter()
        cpu = CpuSample()
        time.sleep(seconds)
        done = self._commits() - before
        rate = done / (time.perf_counter() - started)
        self.shared[COMMITTING] = 0
        self._check_alive()
        return rate, cpu.finish()

    def _commits(self) -> int:
        lay = self.layout
        return sum(memoryview(self.shared)[lay.commits : lay.versions].cast("q"))

    def close(self) -> None:
        self.shared[STOP] = 1
        try:
            self.launcher.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.launcher.pid, signal.SIGKILL)
            self.launcher.wait()
        self.shared.close()
        os.unlink(self.path)


def _member(consumer: Consumer, index: int, shared: mmap.mmap, lay: _Layout) -> None:
    """One member's thread: poll; publish its partitions when they change; commit them all,
    synchronously, back to back while the parent says so."""
    commits = memoryview(shared)[lay.commits : lay.versions].cast("q")
    versions = memoryview(shared)[lay.versions : lay.owned].cast("q")
    row = lay.owned + index * lay.partitions
    published: list[int] = []
    offset = 0
    while not shared[STOP]:
        committing = shared[COMMITTING]
        consumer.poll(0 if committing else POLL_S)
        owned = consumer.assignment()
        partitions = sorted(tp.partition for tp in owned)
        if partitions != published:
            versions[index] += 1
            flags = bytearray(lay.partitions)
            for p in partitions:
                flags[p] = 1
            shared[row : row + lay.partitions] = bytes(flags)
            versions[index] += 1
            published = partitions
        if not owned or not committing:
            continue
        offset += 1
        try:
            consumer.commit(
                offsets=[TopicPartition(tp.topic, tp.partition, offset) for tp in owned],
                asynchronous=False,
            )
            commits[index] += 1
        except KafkaException:
            pass  # a rebalance; not counted


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 30_000,
            "heartbeat.interval.ms": 3_000,
            "partition.assignment.strategy": "range",
        }
    )


def launch(argv: list[str], count: int) -> int:
    """The launcher: start a member process per slice of the members (``argv`` and the slice)
    and wait for them all; when one fails, end the others and return its exit status."""
    processes = {
        subprocess.Popen(
            [sys.executable, "-m", "bench.wire_members", *argv]
            + ["--slice", f"{slot},{members.start},{members.stop}"],
            cwd=ROOT,
        ).pid
        for slot, members in enumerate(_slices(count))
    }
    while processes:
        pid, status = os.wait()
        processes.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            for other in processes:
                os.kill(other, signal.SIGKILL)
            return code if code > 0 else 1
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description="the members of bench/wire.py's groups")
    for name in ("path", "bootstrap", "group", "topic"):
        parser.add_argument(name)
    for name in ("count", "partitions"):
        parser.add_argument(name, type=int)
    parser.add_argument("--cpus", help="comma-separated CPUs to run on")
    parser.add_argument("--slice", help="slot,first,end: run these members (else launch all)")
    args = parser.parse_args()
    if args.slice is None:
        sys.exit(launch(sys.argv[1:], args.count))
    slot, first, end = (int(n) for n in args.slice.split(","))
    if args.cpus:  # set here, not in a preexec_fn: the parent has threads (Ray's)
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    lay = _Layout(args.count, args.partitions)
    with open(args.path, "r+b") as f:
        shared = mmap.mmap(f.fileno(), lay.size)
    indices = range(first, end)
    consumers = [_consumer(args.bootstrap, args.group) for _ in indices]
    shared[READY_AT + slot] = 1
    while not shared[GO]:
        if shared[STOP]:
            return
        time.sleep(0.001)
    for c in consumers:
        c.subscribe([args.topic])
    threads = [
        threading.Thread(target=_member, args=(c, i, shared, lay))
        for c, i in zip(consumers, indices, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in consumers:
        c.close()


if __name__ == "__main__":
    main()
