"""What a partition's thread would spend per commit if other processes did its wire work.

On 16 cores (bench/results/wire-16cpu.json) the partition's one thread was a whole core busy at
57 µs a commit while Kafka spread the same group over 3 to 4 cores. Kafka's broker splits the
work: network threads read, frame and write the clients' requests, and the coordinator gets
them decoded. This bench times the partition's share of that split, were its listener's
per-connection work (sockets, framing, Kafka's encoding, TLS and SASL) moved to processes of
their own: per batch, the partition's thread reads a batch of core requests from a socket pair
(msgspec's msgpack, length-prefixed), decodes it, runs each request through the shard, appends
the batch's records to the log (fsync ``never``), encodes the replies and writes them back.
Only that thread's work is timed; the other end of the socket pair stands for the network
processes and is not. Not in it either: the partition's metrics, live lag and the runtime's
accounting (together 15 % of its thread's time in today's path, by a profile in
bench/wire-findings.md).

The workload: one group of ``--members`` Stable members; a batch holds one single-partition
commit from each, as when every member commits back to back. The baseline, in the same run:
the same commits through ``Shard.handle`` alone (the core's own cost, as bench/core.py's
``shard commits`` row).

Run: ``.venv/bin/python bench/wire_split.py [--members 64] [--batches 3000]``; prints a table
and writes bench/results/wire_split.json.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time

import msgspec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.core import stable_shard  # noqa: E402 — needs ROOT on the path
from bench.run_info import write_results  # noqa: E402
from groupcoord.coordinator import (  # noqa: E402
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    Shard,
)
from groupcoord.storage import LogConfig, PartitionLog, open_partition_log  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "wire_split.json")
DISTINCT_BATCHES = 50  # batches encoded up front and cycled (offsets differ between them)
_ENCODER = msgspec.msgpack.Encoder()
_BATCH = msgspec.msgpack.Decoder(list[OffsetCommitRequest])
_REPLIES = msgspec.msgpack.Decoder(list[OffsetCommitResponse])


def commit_batches(members: list[tuple[str, str, int]], count: int) -> list[bytes]:
    """``count`` encoded batches, each one commit (of partition i, offset k) from member i."""
    return [
        _ENCODER.encode(
            [
                OffsetCommitRequest(
                    group, generation, member, [OffsetCommitRequestPartition("t", i, k)]
                )
                for i, (group, member, generation) in enumerate(members)
            ]
        )
        for k in range(count)
    ]


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(len(payload).to_bytes(4, "big") + payload)


def _receive(sock: socket.socket) -> bytes:
    size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
    return sock.recv(size, socket.MSG_WAITALL)


def split_turns(
    shard: Shard, log: PartitionLog, batches: list[bytes], rounds: int, now_ms: int
) -> tuple[float, list[OffsetCommitResponse]]:
    """Play ``rounds`` batches (cycling ``batches``) through the partition's side of the split;
    returns the seconds its thread spent and the last batch's replies, as the network side
    decodes them."""
    network, partition = socket.socketpair()
    spent_s = 0.0
    replies_out = b""
    try:
        for n in range(rounds):
            _send(network, batches[n % len(batches)])
            started = time.perf_counter()
            records, replies = [], []
            for request_id, request in enumerate(_BATCH.decode(_receive(partition))):
                step = shard.handle(now_ms, request_id, request)
                records.extend(step.records)
                replies.extend(response for _, response in step.replies)
            log.append(records)
            _send(partition, _ENCODER.encode(replies))
            spent_s += time.perf_counter() - started
            replies_out = _receive(network)
    finally:
        network.close()
        partition.close()
    return spent_s, _REPLIES.decode(replies_out)


def shard_alone(shard: Shard, batches: list[bytes], rounds: int, now_ms: int) -> float:
    """Seconds ``Shard.handle`` alone takes for the same commits."""
    decoded = [_BATCH.decode(b) for b in batches]
    handle = shard.handle
    started = time.perf_counter()
    for n in range(rounds):
        for request_id, request in enumerate(decoded[n % len(decoded)]):
            handle(now_ms, request_id, request)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=64, help="members, commits per batch")
    parser.add_argument("--batches", type=int, default=3000, help="batches timed")
    args = parser.parse_args()
    if not 1 <= args.members <= 1000 or not 1 <= args.batches <= 1_000_000:
        parser.error("--members must be in [1, 1000] and --batches in [1, 1000000]")
    shard, members, now_ms = stable_shard(1, args.members)
    batches = commit_batches(members, DISTINCT_BATCHES)
    commits = args.members * args.batches
    with (
        tempfile.TemporaryDirectory() as work,
        open_partition_log(work, LogConfig(fsync_policy="never")) as log,
    ):
        split_s, replies = split_turns(shard, log, batches, args.batches, now_ms)
    if any(p.error is not Errors.NONE for r in replies for p in r.partitions):
        raise SystemExit(f"benchmark commits failed: {replies[:3]}")
    alone_s = shard_alone(shard, batches, args.batches, now_ms)
    rows = [
        {"what": "Shard.handle alone (baseline)", "us_per_commit": 1e6 * alone_s / commits},
        {"what": "partition's side of the split", "us_per_commit": 1e6 * split_s / commits},
    ]
    print(f"{'what':32} {'us/commit':>10} {'commits/s':>12} {'x baseline':>11}")
    for row in rows:
        row["commits_per_s"] = 1e6 / row["us_per_commit"]
        row["x_baseline"] = row["us_per_commit"] / rows[0]["us_per_commit"]
        print(
            f"{row['what']:32} {row['us_per_commit']:10.2f} {row['commits_per_s']:12,.0f} "
            f"{row['x_baseline']:10.2f}x"
        )
    write_results(RESULTS, {"members": args.members, "batches": args.batches, "rows": rows})


if __name__ == "__main__":
    main()
