"""bench/scale.py merges a run's rows into the results file by key (partial runs, e.g. one
node-loss row, must not drop the rows of earlier runs)."""

from __future__ import annotations

from bench.scale import KEYS, merge_rows


def test_a_run_replaces_its_own_keys_and_keeps_the_others_sorted():
    key = KEYS["throughput"]
    old = [
        {"nodes": 1, "partitions": 1, "run": "a", "commits_per_s": 10},
        {"nodes": 1, "partitions": 16, "run": "a", "commits_per_s": 11},
        {"nodes": 3, "partitions": 1, "run": "a", "commits_per_s": 12},
    ]
    new = [
        {"nodes": 1, "partitions": 2, "run": "b", "commits_per_s": 20},
        {"nodes": 1, "partitions": 1, "run": "b", "commits_per_s": 21},
    ]
    merged = merge_rows(old, new, key)
    assert [(r["nodes"], r["partitions"], r["run"]) for r in merged] == [
        (1, 1, "b"),
        (1, 2, "b"),
        (1, 16, "a"),
        (3, 1, "a"),
    ]
    assert merged[0]["commits_per_s"] == 21


def test_node_loss_rows_are_keyed_by_health_check_and_data():
    key = KEYS["node_loss"]
    old = [{"health_check": "tuned", "groups": 1000, "offsets": 100_000, "run": "a"}]
    new = [{"health_check": "tuned", "groups": 10_000, "offsets": 1_000_000, "run": "b"}]
    assert [r["run"] for r in merge_rows(old, new, key)] == ["a", "b"]
    again = [{"health_check": "tuned", "groups": 1000, "offsets": 100_000, "run": "c"}]
    assert [r["run"] for r in merge_rows(old + new, again, key)] == ["c", "b"]
