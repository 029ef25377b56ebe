"""Metadata answers naming every partition: the direct encoder against kio's, in one run.

A client asking Metadata for every topic (a pattern subscription, an admin client listing
topics) gets every partition of the catalog named, up to ``catalog.MAX_CATALOG_PARTITIONS``;
the listener's event loop writes that answer before it serves anything else. This bench times
``wire.fast_metadata.metadata_response`` (what the listeners answer with) against the answer
built as kio's entities and written by kio's writer (``tests/wire/kio_metadata.py``, how they
answered before), for catalogs of 1,000 / 20,000 / 200,000 partitions in topics of 100, at a
non-flexible and a flexible version. Both produce the same bytes (checked here, and by
tests/wire/test_fast_metadata.py). CPU seconds of this thread, the least of ``--trials``;
ratio = kio ÷ direct (how many times quicker the direct encoder is).

Run: ``.venv/bin/python bench/metadata.py [--trials N]``; writes bench/results/metadata.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.run_info import write_results  # noqa: E402 — ROOT on the path
from groupcoord.actors.catalog import MAX_CATALOG_PARTITIONS  # noqa: E402
from groupcoord.wire import ApiKey, Connection, Node, apis, metadata_response  # noqa: E402
from groupcoord.wire.connection import encode_body  # noqa: E402
from tests.kafka.rawwire import make  # noqa: E402
from tests.wire.frames import request_frame  # noqa: E402
from tests.wire.kio_metadata import kio_metadata_response  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "metadata.json")
PARTITIONS_PER_TOPIC = 100
VERSIONS = (8, 12)  # the newest non-flexible, the newest


def request_for_every_topic(version: int):
    values = {
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        "topics": None,
    }
    body = make(apis.request_class(ApiKey.METADATA, version), values)
    (request,) = Connection().receive_data(request_frame(body))
    return request


def least_cpu_s(build, trials: int) -> tuple[float, bytes]:
    best, body = float("inf"), b""
    for _ in range(trials):
        started = time.thread_time()
        body = build()
        best = min(best, time.thread_time() - started)
    return best, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="runs per cell (default 3)")
    args = parser.parse_args()
    rows = []
    print(
        f"{'partitions':>10} {'version':>7} {'direct ms':>10} {'kio ms':>10} {'kio ÷ direct':>13}"
    )
    for total in (1_000, 20_000, MAX_CATALOG_PARTITIONS):
        topics = [f"topic-{n:05d}" for n in range(total // PARTITIONS_PER_TOPIC)]
        view = dict(
            brokers=[Node(0, "localhost", 9092)],
            leader_id=0,
            partitions=dict.fromkeys(topics, PARTITIONS_PER_TOPIC),
            cluster_id="groupcoord-1",
            topic_ids={name: uuid.uuid4() for name in topics},
        )
        for version in VERSIONS:
            request = request_for_every_topic(version)
            direct_s, direct = least_cpu_s(
                lambda r=request, v=view: metadata_response(r, **v).body, args.trials
            )
            kio_s, expected = least_cpu_s(
                lambda r=request, v=view: encode_body(kio_metadata_response(r, **v)), args.trials
            )
            if direct != expected:
                raise SystemExit(f"the answers differ at {total} partitions, v{version}")
            row = {
                "partitions": total,
                "version": version,
                "bytes": len(direct),
                "direct_ms": round(direct_s * 1000, 2),
                "kio_ms": round(kio_s * 1000, 2),
                "kio_over_direct": round(kio_s / direct_s, 1),
            }
            rows.append(row)
            print(
                f"{total:>10,} {version:>7} {row['direct_ms']:>10.2f} {row['kio_ms']:>10.2f} "
                f"{row['kio_over_direct']:>12.1f}×",
                flush=True,
            )
    write_results(RESULTS, {"bench": "metadata", "trials": args.trials, "rows": rows})


if __name__ == "__main__":
    main()
