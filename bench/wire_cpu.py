"""CPU per request of a partition's Kafka listener, in process: a steadier figure than rates.

Wall-clock rates on a shared machine swing with its load; the CPU the serving thread spends per
answered request barely does. This bench runs a real ``PartitionRuntime`` and ``KafkaListener``
(``tests.actors.kafka_inproc.WirePartition``: one event loop on its own thread, fsync policy
``never``, no Ray; asyncio's own loop, whose turns and socket calls cProfile can count, where
uvloop's, which Ray runs the partitions on, are C) and drives it from a client process over raw
Kafka wire (bench/wire_raw.py's framing), which connects, waits for a go, sends a fixed number
of requests back to back (one in flight per connection, a Kafka client's rule) and checks every
answer. Measured over exactly those requests:

* ``loop_us``: CPU of the event loop's thread per request (``time.thread_time`` on that thread);
* ``process_us``: CPU of the whole serving process per request (the loop plus the runtime's log
  and snapshot threads);
* ``floor_us``: the loop thread's CPU per request for a trivial server on the same kind of loop
  that answers every frame with a precomputed response (``FloorProtocol``): what reading,
  writing and waking up cost, with nothing parsed or decided. ``loop ÷ floor`` is the ratio
  reported;
* ``calls``, ``loop turns``, ``socket calls``: per request, from one more run under cProfile,
  the Python function calls, turns of the event loop and socket calls (send, recv, epoll's
  poll) on the loop thread: counts that, unlike CPU time, barely move with the machine's load.

Rows: Heartbeat from one member on 8 connections; OffsetCommit of 4 partitions from one member
on 1 and on 16 connections, of 64 partitions on 1 (what bench/wire.py's 1-member row sends:
one request at a time) and on 16, and of 1 partition on 64 (its 64-member row). Each CPU
figure is the least of ``--trials`` runs (other load on the machine only adds to it), each rate
the median.

Rejoins: a settled group of 10 and of 100 raw-wire members rejoining all at once, as in
bench/wire.py's rejoin rows (``rebalance_times``, from another process), ``REJOINS`` times:
the loop thread's and the process's CPU per rejoin, counted from when the group has settled,
and the median rejoin's wall time. A rejoin is bound by the partition's thread, so its CPU is
the steady figure behind those rows.

Run: ``.venv/bin/python bench/wire_cpu.py [--quick] [--profile]``; writes
bench/results/wire_cpu.json. ``--profile`` also prints each row's cProfile top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.run_info import write_results  # noqa: E402 — ROOT on the path
from bench.wire_raw import (  # noqa: E402
    VERSIONS,
    RawConnection,
    join_alone,
    rebalance_times,
)
from groupcoord.wire import apis  # noqa: E402
from groupcoord.wire.apis import ApiKey  # noqa: E402
from tests.actors.kafka_inproc import WirePartition  # noqa: E402 — the tests' in-process partition

RESULTS = os.path.join(ROOT, "bench", "results", "wire_cpu.json")
TOPIC = "bench"
PARTITIONS = 64
COMMIT_PARTITIONS = 4  # partitions per OffsetCommit
COMMIT_VERSION = VERSIONS[ApiKey.OFFSET_COMMIT]
CLIENT_TIMEOUT_S = 300
REJOIN_MEMBERS = (10, 100)
REJOINS = 40
_I32 = struct.Struct(">i")
# (label, api, connections, partitions per OffsetCommit)
ROWS = (
    ("heartbeats, 8 connections", ApiKey.HEARTBEAT, 8, 0),
    ("commits, 1 connection", ApiKey.OFFSET_COMMIT, 1, COMMIT_PARTITIONS),
    ("commits, 16 connections", ApiKey.OFFSET_COMMIT, 16, COMMIT_PARTITIONS),
    # bench/wire.py's 1-member row commits every partition of its topic in each request, one
    # request at a time, its 64-member row one partition from each of 64 connections.
    ("commits of 64, 1 connection", ApiKey.OFFSET_COMMIT, 1, 64),
    ("commits of 64, 16 connections", ApiKey.OFFSET_COMMIT, 16, 64),
    ("commits of 1, 64 connections", ApiKey.OFFSET_COMMIT, 64, 1),
)


# -- the client process ------------------------------------------------------------------------


def _request_values(
    api: ApiKey, group: str, member_id: str, generation: int, offset: int, partitions: int
):
    if api == ApiKey.HEARTBEAT:
        return dict(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None
        )
    cls = apis.request_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
    topic_cls = apis.nested_class(cls, "OffsetCommitRequestTopic")
    partition_cls = apis.nested_class(cls, "OffsetCommitRequestPartition")
    partitions = tuple(
        partition_cls(
            partition_index=p,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        for p in range(partitions)
    )
    return dict(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=(topic_cls(name=TOPIC, partitions=partitions),),
    )


def _errors(api: ApiKey, answer) -> list:
    if api == ApiKey.HEARTBEAT:
        return [answer.error_code]
    return [p.error_code for t in answer.topics for p in t.partitions]


async def _client(args) -> None:
    api = ApiKey(args.api)
    host, port = args.client.rsplit(":", 1)
    conns = [await RawConnection.open(host, int(port)) for _ in range(args.connections)]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    per_connection = args.requests // args.connections
    started = time.perf_counter()

    async def drive(conn: RawConnection, index: int) -> None:
        for n in range(per_connection):
            offset = index * per_connection + n
            values = _request_values(
                api, args.group, args.member_id, args.generation, offset, args.partitions
            )
            answer = await conn.call(api, **values)
            bad = [e for e in _errors(api, answer) if e != 0]
            if bad:
                raise RuntimeError(f"{api.name}: {bad[0]!r}")

    await asyncio.gather(*(drive(c, i) for i, c in enumerate(conns)))
    seconds = time.perf_counter() - started
    for c in conns:
        c.close()
    print(json.dumps({"requests": per_connection * len(conns), "seconds": seconds}), flush=True)


async def _rejoin_client(args) -> None:
    """Settle a group of ``args.rejoin`` members, say ready, wait for a go, rejoin
    ``args.requests`` times; prints the rejoins and the median rejoin's seconds."""

    async def ready() -> None:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    times = await rebalance_times(args.client, args.group, args.rejoin, args.requests, ready)
    print(json.dumps({"requests": len(times), "median_s": statistics.median(times)}), flush=True)


# -- the floor: a trivial server on a loop of its own thread ------------------------------------


def _canned_body(api: ApiKey, partitions: int) -> bytes:
    """Heartbeat v3's answer (throttle 0, error NONE) or an OffsetCommit v7 answer of
    ``partitions`` partitions, all NONE: what groupcoord's answers hold, byte for byte in
    size."""
    if api == ApiKey.HEARTBEAT:
        return struct.pack(">ih", 0, 0)
    name = TOPIC.encode()
    results = b"".join(struct.pack(">ih", p, 0) for p in range(partitions))
    return (
        struct.pack(">ii", 0, 1)
        + struct.pack(">h", len(name))
        + name
        + _I32.pack(partitions)
        + results
    )


class FloorProtocol(asyncio.Protocol):
    """Answers every whole frame with the canned body of its api and its correlation id."""

    def __init__(self, bodies: dict[int, bytes]) -> None:
        self.bodies = bodies
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out = []
        while len(self.buffer) >= 4:
            (size,) = _I32.unpack_from(self.buffer)
            if len(self.buffer) < 4 + size:
                break
            api_key = struct.unpack_from(">h", self.buffer, 4)[0]
            correlation = self.buffer[8:12]
            del self.buffer[: 4 + size]
            body = self.bodies[api_key]
            out.append(_I32.pack(4 + len(body)) + correlation + body)
        if out:
            self.transport.write(b"".join(out))


# -- the serving process -------------------------------------------------------------------------


def _on_loop(loop: asyncio.AbstractEventLoop, fn):
    async def call():
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), loop).result(30)


def _measure(loop, address: str, row: tuple, requests: int, member, profile):
    """(loop thread CPU s, process CPU s, requests, seconds) over one client run against
    ``address``."""
    _, api, connections, partitions = row
    group, member_id, generation = member
    loop_cpu, process_cpu, result = _run_client(
        loop,
        [
            *("--client", address, "--api", str(int(api)), "--connections", str(connections)),
            *("--requests", str(requests), "--group", group, "--member-id", member_id),
            *("--generation", str(generation), "--partitions", str(partitions)),
        ],
        profile,
    )
    return loop_cpu, process_cpu, result["requests"], result["seconds"]


def _run_client(loop, client_args: list[str], profile) -> tuple[float, float, dict]:
    """(loop thread CPU s, process CPU s, the client's result) from the client's go to its
    result."""
    client = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *client_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if client.stdout.readline().strip() != "ready":
            raise RuntimeError("client did not connect")
        if profile is not None:
            _on_loop(loop, profile.enable)
        loop_cpu = _on_loop(loop, time.thread_time)
        process_cpu = resource.getrusage(resource.RUSAGE_SELF)
        client.stdin.write("go\n")
        client.stdin.flush()
        line = client.stdout.readline()
        if not line:  # its traceback went to stderr
            raise RuntimeError(f"client failed (exit status {client.wait(CLIENT_TIMEOUT_S)})")
        result = json.loads(line)
        loop_cpu = _on_loop(loop, time.thread_time) - loop_cpu
        after = resource.getrusage(resource.RUSAGE_SELF)
        if profile is not None:
            _on_loop(loop, profile.disable)
    finally:
        client.wait(CLIENT_TIMEOUT_S)
    if client.returncode != 0:
        raise RuntimeError(f"client exited with {client.returncode}")
    process_cpu = (after.ru_utime + after.ru_stime) - (process_cpu.ru_utime + process_cpu.ru_stime)
    return loop_cpu, process_cpu, result


def rejoin_rows(partition: WirePartition, bootstrap: str, trials: int, rejoins: int) -> list[dict]:
    """For each size of ``REJOIN_MEMBERS``: the loop thread's and the process's CPU per rejoin
    (the least of ``trials`` runs of ``rejoins``) and the median rejoin's wall time (the median
    of the runs' medians), each run a new group."""
    print(f"{'rejoins':<30} {'loop/rejoin':>12} {'process/rejoin':>15} {'median rejoin':>13}")
    rows = []
    for members in REJOIN_MEMBERS:
        runs = []
        for _ in range(trials):
            group = f"rejoin-{members}-{time.monotonic_ns()}"
            loop_cpu, process_cpu, result = _run_client(
                partition.loop,
                [
                    *("--client", bootstrap, "--rejoin", str(members)),
                    *("--requests", str(rejoins), "--group", group),
                ],
                None,
            )
            done = result["requests"]
            runs.append((loop_cpu / done, process_cpu / done, result["median_s"]))
        rows.append(
            {
                "row": f"rejoins of {members} members",
                "rejoins": rejoins,
                "loop_ms": round(1e3 * min(r[0] for r in runs), 3),
                "process_ms": round(1e3 * min(r[1] for r in runs), 3),
                "median_rejoin_ms": round(1e3 * statistics.median(r[2] for r in runs), 3),
            }
        )
        row = rows[-1]
        print(
            f"{row['row']:<30} {row['loop_ms']:>9.2f} ms {row['process_ms']:>12.2f} ms "
            f"{row['median_rejoin_ms']:>10.2f} ms",
            flush=True,
        )
    return rows


def run(
    trials: int,
    heartbeats: int,
    commits: int,
    profile: bool,
    network_processes: int = 0,
    rejoins: int = REJOINS,
) -> tuple[list[dict], list[dict]]:
    """(``ROWS``' rows, ``rejoin_rows``) against one in-process partition."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        partition = WirePartition(
            os.path.join(tmp, "p0"), {TOPIC: PARTITIONS}, network_processes=network_processes
        )
        bootstrap = partition.start()
        floor_loop = asyncio.new_event_loop()
        floor_thread = _start_loop(floor_loop)
        floor_server = None
        try:
            group = f"cpu-{time.monotonic_ns()}"
            coordinator, member_id, generation = asyncio.run(join_alone(bootstrap, group))
            address = f"{coordinator[0]}:{coordinator[1]}"
            bodies: dict[int, bytes] = {}  # the floor's answer per api, set for each row
            floor_server = asyncio.run_coroutine_threadsafe(
                floor_loop.create_server(lambda: FloorProtocol(bodies), "127.0.0.1", 0), floor_loop
            ).result(30)
            floor = f"127.0.0.1:{floor_server.sockets[0].getsockname()[1]}"
            for row in ROWS:
                label, api, _, partitions = row
                bodies[int(api)] = _canned_body(api, partitions)
                requests = commits if partitions > 1 else heartbeats  # small ones: more
                member = (group, member_id, generation)
                gc, fl = [], []
                for _ in range(trials):
                    gc.append(_measure(partition.loop, address, row, requests, member, None))
                    fl.append(_measure(floor_loop, floor, row, requests, member, None))
                profiler = cProfile.Profile()  # one more run, for counts only
                _measure(partition.loop, address, row, requests, member, profiler)
                stats = pstats.Stats(profiler, stream=io.StringIO())
                rows.append(_row(label, gc, fl, _counts(stats, requests)))
                print(_format(rows[-1]), flush=True)
                if profile:
                    stats.stream = sys.stdout
                    stats.sort_stats("tottime").print_stats(30)
            rejoined = rejoin_rows(partition, bootstrap, trials, rejoins)
        finally:
            if floor_server is not None:
                floor_loop.call_soon_threadsafe(floor_server.close)
            floor_loop.call_soon_threadsafe(floor_loop.stop)
            partition.stop()
            floor_thread.join(30)
    return rows, rejoined


def _start_loop(loop: asyncio.AbstractEventLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return thread


def _counts(stats: pstats.Stats, requests: int) -> dict:
    """Per request: Python function calls, turns of the event loop, and socket calls (send,
    recv, epoll's poll) on the loop thread. Unlike CPU time, these do not depend on the load."""
    turns = sockets = 0
    for (_, _, name), (_, ncalls, *_) in stats.stats.items():  # type: ignore[attr-defined]
        if name == "_run_once":
            turns += ncalls
        elif name in (
            "<method 'send' of '_socket.socket' objects>",
            "<method 'recv' of '_socket.socket' objects>",
            "<method 'poll' of 'select.epoll' objects>",
        ):
            sockets += ncalls
    return {
        "calls": round(stats.total_calls / requests, 1),  # type: ignore[attr-defined]
        "loop_turns": round(turns / requests, 2),
        "socket_calls": round(sockets / requests, 2),
    }


def _row(label: str, gc: list, floor: list, counts: dict) -> dict:
    def us(samples, index):  # the least: load on the machine only ever adds to it
        return round(min(s[index] / s[2] * 1e6 for s in samples), 1)

    loop_us, floor_us = us(gc, 0), us(floor, 0)
    return {
        "row": label,
        "requests": gc[0][2],
        "loop_us": loop_us,
        "process_us": us(gc, 1),
        "floor_us": floor_us,
        "loop_over_floor": round(loop_us / floor_us, 2),
        "requests_per_s": round(statistics.median(s[2] / s[3] for s in gc)),
        "floor_requests_per_s": round(statistics.median(s[2] / s[3] for s in floor)),
        "calls_per_request": counts["calls"],
        "loop_turns_per_request": counts["loop_turns"],
        "socket_calls_per_request": counts["socket_calls"],
    }


def _format(row: dict) -> str:
    return (
        f"{row['row']:<30} {row['loop_us']:>9.1f} {row['process_us']:>11.1f} "
        f"{row['floor_us']:>9.1f} {row['loop_over_floor']:>12.2f}× "
        f"{row['calls_per_request']:>9.1f} {row['loop_turns_per_request']:>10.2f} "
        f"{row['socket_calls_per_request']:>12.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and one trial")
    parser.add_argument("--trials", type=int, default=5, help="runs per row (default 5)")
    parser.add_argument("--profile", action="store_true", help="print each row's cProfile top 30")
    parser.add_argument(
        "--network-processes",
        type=int,
        default=0,
        help="serve the partition's port from N network processes: the loop and process "
        "figures are then the partition's share alone (writes wire_cpu-net.json)",
    )
    # The client process's options (internal).
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--api", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--member-id", help=argparse.SUPPRESS)
    parser.add_argument("--generation", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--partitions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rejoin", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(_rejoin_client(args) if args.rejoin else _client(args))
        return
    if args.trials < 1:
        parser.error("--trials must be >= 1")
    trials = 1 if args.quick else args.trials
    heartbeats, commits = (2_000, 1_000) if args.quick else (6_000, 2_000)
    rejoins = 5 if args.quick else REJOINS
    load = os.getloadavg()[0]
    header = ("row", "loop µs/req", "process µs/req", "floor µs", "loop ÷ floor")
    counts = ("calls/req", "turns/req", "socket/req")
    print(
        f"{header[0]:<30} {header[1]:>9} {header[2]:>11} {header[3]:>9} {header[4]:>13} "
        f"{counts[0]:>9} {counts[1]:>10} {counts[2]:>12}"
    )
    rows, rejoined = run(trials, heartbeats, commits, args.profile, args.network_processes, rejoins)
    print(f"load average {load:.1f}")
    write_results(
        RESULTS.replace(".json", "-net.json") if args.network_processes else RESULTS,
        {
            "bench": "wire_cpu",
            "load_average_1m": round(load, 2),
            "trials": trials,
            "network_processes": args.network_processes,
            "rows": rows,
            "rejoins": rejoined,
        },
    )


if __name__ == "__main__":
    main()
