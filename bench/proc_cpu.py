"""Per-process and per-thread CPU of this process and its descendants, from /proc (Linux).

``bench/wire.py`` samples it around each commit row to see where the wall time goes: the
librdkafka clients (this process), the partition's Ray worker, raylet and GCS, the Kafka JVM.
A process is labelled by its command line (``ray::PartitionActor``, ``raylet``, ``java``...);
CPU is utime + stime, in cores (CPU seconds per second of wall time). A thread's ``waiting`` is
the time it was runnable but had no CPU (``/proc/<pid>/task/<tid>/schedstat``, its second
field), also in cores: on a machine whose cores the clients share, what a busy server thread
loses to them.
"""

from __future__ import annotations

import os
import time

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(path: str) -> list[str] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:  # gone meanwhile
        return None
    # comm (field 2) may hold spaces: split after its closing parenthesis.
    return text[text.rindex(")") + 2 :].split()


def _cpu_ticks(path: str) -> int:
    fields = _stat_fields(path)
    return 0 if fields is None else int(fields[11]) + int(fields[12])  # utime, stime


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` have used so far (those gone count 0)."""
    return sum(_cpu_ticks(f"/proc/{pid}/stat") for pid in pids) / _TICKS_PER_S


def _label(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "gone"
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::"):
        return first.split()[0]
    name = os.path.basename(first)
    if name.startswith("python"):
        joined = b" ".join(argv).decode(errors="replace")
        for hint in (
            "wire_members",
            "network_process",
            "dashboard",
            "log_monitor",
            "monitor",
            "default_worker",
        ):
            if hint in joined:
                return f"python:{hint}"
    return name or "?"


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(f"/proc/{entry}/stat")
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _wait_ns(path: str) -> int:
    """Nanoseconds the task has spent runnable on a run queue, not running (0 if unknown)."""
    try:
        with open(path) as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _threads(pid: int) -> dict[str, tuple[int, int]]:
    """{"name/tid": (CPU ticks, run-queue wait ns)} of the process's threads."""
    out: dict[str, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        task = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{task}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[f"{name}/{tid}"] = (_cpu_ticks(f"{task}/stat"), _wait_ns(f"{task}/schedstat"))
    return out


class CpuSample:
    """CPU of the processes under ``root`` between ``__init__`` and ``finish()``."""

    def __init__(self, root: int | None = None) -> None:
        self.pids = descendants(root or os.getpid())
        self.labels = {pid: _label(pid) for pid in self.pids}
        self.started = time.perf_counter()
        self.before = {pid: _cpu_ticks(f"/proc/{pid}/stat") for pid in self.pids}
        self.threads = {pid: _threads(pid) for pid in self.pids}

    def finish(self, top_threads: int = 4) -> dict:
        """{"processes": {label: cores}, "threads": {label: {thread: cores}}, "waiting":
        {label: {thread: cores}}}: the busiest ``top_threads`` threads of each process, those
        over 0.05 cores, with the time each waited for a CPU."""
        wall_s = time.perf_counter() - self.started
        processes: dict[str, float] = {}
        threads: dict[str, dict[str, float]] = {}
        waiting: dict[str, dict[str, float]] = {}
        for pid in self.pids:
            label = self.labels[pid]
            used = (_cpu_ticks(f"/proc/{pid}/stat") - self.before[pid]) / _TICKS_PER_S / wall_s
            processes[label] = round(processes.get(label, 0.0) + used, 3)
            before = self.threads[pid]
            per = {}
            for name, (ticks, wait_ns) in _threads(pid).items():
                ticks_then, wait_then = before.get(name, (0, 0))
                per[name] = (
                    (ticks - ticks_then) / _TICKS_PER_S / wall_s,
                    (wait_ns - wait_then) / 1e9 / wall_s,
                )
            busiest = sorted(per.items(), key=lambda kv: -kv[1][0])[:top_threads]
            busy = [(n, c, w) for n, (c, w) in busiest if c >= 0.05]
            if busy:
                threads[f"{label}/{pid}"] = {n: round(c, 3) for n, c, _ in busy}
                waiting[f"{label}/{pid}"] = {n: round(w, 3) for n, _, w in busy}
        return {
            "processes": dict(sorted(processes.items(), key=lambda kv: -kv[1])),
            "threads": threads,
            "waiting": waiting,
        }
