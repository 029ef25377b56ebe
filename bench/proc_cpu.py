"""Per-process and per-thread CPU of this process and its descendants, from /proc (Linux).

``bench/wire.py`` samples it around each commit row to see where the wall time goes: the
librdkafka clients (this process), the partition's Ray worker, raylet and GCS, the Kafka JVM.
A process is labelled by its command line (``ray::PartitionActor``, ``raylet``, ``java``...);
CPU is utime + stime, in cores (CPU seconds per second of wall time).
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
        for hint in ("wire_members", "dashboard", "log_monitor", "monitor", "default_worker"):
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


def _threads(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[f"{name}/{tid}"] = _cpu_ticks(f"/proc/{pid}/task/{tid}/stat")
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
        """{"processes": {label: cores}, "threads": {label: {thread: cores}}}: the busiest
        ``top_threads`` threads of each process, those over 0.05 cores."""
        wall_s = time.perf_counter() - self.started
        processes: dict[str, float] = {}
        threads: dict[str, dict[str, float]] = {}
        for pid in self.pids:
            label = self.labels[pid]
            used = (_cpu_ticks(f"/proc/{pid}/stat") - self.before[pid]) / _TICKS_PER_S / wall_s
            processes[label] = round(processes.get(label, 0.0) + used, 3)
            now = _threads(pid)
            per = {
                name: (ticks - self.threads[pid].get(name, 0)) / _TICKS_PER_S / wall_s
                for name, ticks in now.items()
            }
            busiest = sorted(per.items(), key=lambda kv: -kv[1])[:top_threads]
            if busiest and busiest[0][1] >= 0.05:
                threads[f"{label}/{pid}"] = {n: round(c, 3) for n, c in busiest if c >= 0.05}
        return {
            "processes": dict(sorted(processes.items(), key=lambda kv: -kv[1])),
            "threads": threads,
        }
