"""What security costs on groupcoord's Kafka listener, as ratios to PLAINTEXT in the same run.

One partition served in this process (tests/actors/kafka_inproc.py), four listeners: PLAINTEXT,
SASL_PLAINTEXT with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN (checked against the stored SCRAM
credential: a PBKDF2 derivation per login), SASL_SSL with SCRAM-SHA-512 (TLS 1.3, P-256 key).
The same librdkafka client measures, for each:

* logins/s: a new client connects, authenticates and fetches one committed offset, then
  closes (so connection setup, TLS and SASL are all in the figure);
* commits/s: one connected client commits one offset synchronously, back to back, with
  group ACLs on (one rule per principal) on the SASL listeners.

Run: ``.venv/bin/python bench/security.py [--quick]``; writes bench/results/security.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.run_info import write_results  # noqa: E402
from groupcoord.actors.security import ListenerSecurity, UsersFile  # noqa: E402
from groupcoord.wire import AclFile, AclRule  # noqa: E402
from tests.actors.kafka_inproc import WirePartition  # noqa: E402 — the tests' harness
from tests.actors.tls import self_signed_cert  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "security.json")
TARGETS = ("PLAINTEXT", "SASL_PLAINTEXT/SCRAM-SHA-512", "SASL_PLAINTEXT/PLAIN", "SASL_SSL")


def _security(target: str, users: str, cert: str, key: str) -> ListenerSecurity:
    if target == "PLAINTEXT":
        return ListenerSecurity()
    acls = AclFile(acls=(AclRule("User:bench", "bench-", ("Read",), pattern="prefixed"),))
    if target == "SASL_SSL":
        return ListenerSecurity(
            "SASL_SSL", ("SCRAM-SHA-512",), users, ssl_certfile=cert, ssl_keyfile=key, acls=acls
        )
    return ListenerSecurity("SASL_PLAINTEXT", (target.split("/")[1],), users, acls=acls)


def _client(target: str, address: str, cert: str) -> dict:
    config = {"bootstrap.servers": address, "group.id": "bench-group"}
    if target == "PLAINTEXT":
        return config
    protocol, _, mechanism = target.partition("/")
    return config | {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism or "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": "bench-password",
        "ssl.ca.location": cert,
    }


def _rate(seconds: float, work) -> float:
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        work()
        done += 1
    return done / (time.perf_counter() - started)


def _measure(target: str, address: str, cert: str, seconds: float) -> dict:
    config = _client(target, address, cert)
    if not target.endswith("SSL"):
        config.pop("ssl.ca.location", None)
    partition = [TopicPartition("events", 0)]

    def login() -> None:
        consumer = Consumer(config)
        consumer.committed(partition, timeout=10)
        consumer.close()

    consumer = Consumer(config)
    offset = iter(range(10**9))

    def commit() -> None:
        consumer.commit(offsets=[TopicPartition("events", 0, next(offset))], asynchronous=False)

    try:
        commit()  # connected and authenticated before timing
        return {
            "target": target,
            "logins_per_s": round(_rate(seconds, login), 1),
            "commits_per_s": round(_rate(seconds, commit), 1),
        }
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per figure instead of 5")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 5.0
    rows = []
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        cert, key = self_signed_cert(root)
        users = UsersFile(str(root / "users.json"))
        users.add("bench", "bench-password")
        for target in TARGETS:
            security = _security(target, users.path, cert, key)
            log_dir = str(root / target.replace("/", "-"))
            served = WirePartition(log_dir, {"events": 1}, security=security)
            address = served.start()
            try:
                rows.append(_measure(target, address, cert, seconds))
                print(rows[-1], flush=True)
            finally:
                served.stop()
    base = rows[0]
    print(f"\n{'target':<30} {'logins/s':>9} {'x plain':>8} {'commits/s':>10} {'x plain':>8}")
    for r in rows:
        r["logins_vs_plaintext"] = round(r["logins_per_s"] / base["logins_per_s"], 2)
        r["commits_vs_plaintext"] = round(r["commits_per_s"] / base["commits_per_s"], 2)
        print(
            f"{r['target']:<30} {r['logins_per_s']:>9.1f} {r['logins_vs_plaintext']:>8.2f} "
            f"{r['commits_per_s']:>10.1f} {r['commits_vs_plaintext']:>8.2f}"
        )
    write_results(RESULTS, {"quick": args.quick, "seconds_per_figure": seconds, "rows": rows})


if __name__ == "__main__":
    main()
