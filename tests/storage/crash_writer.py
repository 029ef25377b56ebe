"""Crash-test writer, run as ``python -m tests.storage.crash_writer DIR SEED``.

Opens (and so recovers) the log, loads it, then appends deterministic records (``record_at``)
forever, taking snapshots by threshold. It prints ``ACK <end offset>`` only after ``append``
returned, i.e. after the fsync: the parent kills it with SIGKILL at a random moment and then
checks that every acknowledged record is on disk.
"""

import random
import sys

from groupcoord.coordinator import Shard
from groupcoord.storage import LogConfig, open_partition_log

from .helpers import records_between

CONFIG = LogConfig(
    segment_bytes=32 * 1024,
    max_record_bytes=1024,
    max_batch_bytes=4096,
    snapshot_every_records=2_000,
    keep_snapshots=2,
)


def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    log = open_partition_log(path, CONFIG)
    log.load_into(Shard(0, 1))
    print(f"OPEN {log.end_offset}", flush=True)
    while True:
        start = log.end_offset
        end = log.append(records_between(start, start + rng.randint(1, 300)))
        print(f"ACK {end}", flush=True)
        log.maybe_snapshot(None)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
