"""Answers that grow with the catalog or the groups: the direct encoders against kio's, in one run.

A client asking Metadata for every topic (a pattern subscription, an admin client listing
topics) gets every partition of the catalog named, up to ``catalog.MAX_CATALOG_PARTITIONS``;
the listener's event loop writes that answer before it serves anything else. This bench times
``wire.fast_metadata.metadata_response`` (what the listeners answer with) against the answer
built as kio's entities and written by kio's writer (``tests/wire/kio_metadata.py``, how they
answered before), for catalogs of 1,000 / 20,000 / 200,000 partitions in topics of 100, at a
non-flexible and a flexible version. Both produce the same bytes (checked here, and by
tests/wire/test_fast_metadata.py).

ListGroups names every group of a shard (up to ``max_groups``, 1,000,000), and the bootstrap's
every shard's: ``wire.fast_responses`` (what the listeners answer with) against
``response_from_core`` written by kio's writer, for 10,000 / 100,000 / 1,000,000 groups, at
the oldest, the first flexible and the newest version.

CPU seconds of this thread, the least of ``--trials``; ratio = kio ÷ direct (how many times
quicker the direct encoder is).

Run: ``.venv/bin/python bench/large_answers.py [--trials N]``; writes
bench/results/large_answers.json.
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
from groupcoord.coordinator import Errors  # noqa: E402
from groupcoord.coordinator import messages as core  # noqa: E402
from groupcoord.wire import (  # noqa: E402
    ApiKey,
    Connection,
    Node,
    apis,
    fast_response,
    metadata_response,
    response_from_core,
)
from groupcoord.wire.connection import encode_body  # noqa: E402
from tests.kafka.rawwire import make  # noqa: E402
from tests.wire.frames import request_frame  # noqa: E402
from tests.wire.kio_metadata import kio_metadata_response  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "large_answers.json")
PARTITIONS_PER_TOPIC = 100
VERSIONS = (8, 12)  # the newest non-flexible, the newest
LIST_GROUPS_VERSIONS = (0, 3, 5)


def wire_request(key: ApiKey, version: int, values: dict):
    body = make(apis.request_class(key, version), values)
    (request,) = Connection().receive_data(request_frame(body))
    return request


def request_for_every_topic(version: int):
    values = {
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        "topics": None,
    }
    return wire_request(ApiKey.METADATA, version, values)


def least_cpu_s(build, trials: int) -> tuple[float, bytes]:
    best, body = float("inf"), b""
    for _ in range(trials):
        started = time.thread_time()
        body = build()
        best = min(best, time.thread_time() - started)
    return best, body


def compared(what: str, size: int, version: int, direct_fn, kio_fn, trials: int) -> dict:
    """One row: the direct encoder's and kio's CPU for the same answer, which must agree."""
    direct_s, direct = least_cpu_s(direct_fn, trials)
    kio_s, expected = least_cpu_s(kio_fn, trials)
    if direct != expected:
        raise SystemExit(f"the {what} answers differ at {size:,}, v{version}")
    row = {
        "answer": what,
        "size": size,
        "version": version,
        "bytes": len(direct),
        "direct_ms": round(direct_s * 1000, 2),
        "kio_ms": round(kio_s * 1000, 2),
        "kio_over_direct": round(kio_s / direct_s, 1),
    }
    print(
        f"{what:>10} {size:>10,} {version:>7} {row['direct_ms']:>10.2f} "
        f"{row['kio_ms']:>10.2f} {row['kio_over_direct']:>12.1f}×",
        flush=True,
    )
    return row


def metadata_rows(trials: int) -> list[dict]:
    rows = []
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
            rows.append(
                compared(
                    "Metadata",
                    total,
                    version,
                    lambda r=request, v=view: metadata_response(r, **v).body,
                    lambda r=request, v=view: encode_body(kio_metadata_response(r, **v)),
                    trials,
                )
            )
    return rows


def list_groups_rows(trials: int) -> list[dict]:
    rows = []
    for total in (10_000, 100_000, 1_000_000):
        states = ("Stable", "Empty", "PreparingRebalance")
        listed = core.ListGroupsResponse(
            Errors.NONE,
            [core.ListedGroup(f"group-{n:07d}", "consumer", states[n % 3]) for n in range(total)],
        )
        for version in LIST_GROUPS_VERSIONS:
            values = {"states_filter": [], "types_filter": []}
            request = wire_request(ApiKey.LIST_GROUPS, version, values)
            rows.append(
                compared(
                    "ListGroups",
                    total,
                    version,
                    lambda r=request, a=listed: fast_response(r, a).body,
                    lambda r=request, a=listed: encode_body(response_from_core(r, a)),
                    trials,
                )
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="runs per cell (default 3)")
    args = parser.parse_args()
    header = ("answer", "size", "version", "direct ms", "kio ms", "kio ÷ direct")
    print("{:>10} {:>10} {:>7} {:>10} {:>10} {:>13}".format(*header))
    rows = metadata_rows(args.trials) + list_groups_rows(args.trials)
    write_results(RESULTS, {"bench": "large_answers", "trials": args.trials, "rows": rows})


if __name__ == "__main__":
    main()
