"""Analytics on hand-built groups (judged as Burrow would), the report, and the CLI."""

from __future__ import annotations

import os

import pytest

from groupcoord.spark_export import analytics, burrow
from groupcoord.spark_export.burrow import CommitPoint, Status, evaluate_window

T0 = 1_700_000_000_000
MIN = 60_000
NOW = T0 + 9 * MIN + 30_000

COMMIT_COLUMNS = ("cluster string, log_partition int, log_offset bigint, group_id string, "
                  "topic string, partition int, committed_offset bigint, leader_epoch int, "
                  "metadata string, commit_timestamp_ms bigint, expire_timestamp_ms bigint, "
                  "is_tombstone boolean")


def _scenario():
    """(commits, log_end): one topic partition per behaviour, commits once a minute."""
    commits, ends = [], []

    def partition(group, topic, minutes, offset_at, end_at):
        for i in minutes:
            commits.append((group, topic, 0, offset_at(i), T0 + i * MIN))
        for i in range(10):
            ends.append((topic, 0, T0 + i * MIN - 1, end_at(i)))
        ends.append((topic, 0, NOW, end_at(9.5)))

    every = range(10)
    partition("healthy", "h", every, lambda i: 100 * i, lambda i: int(100 * i))
    partition("lagging", "slow", every, lambda i: 50 * i, lambda i: int(100 * i + 100))
    partition("lagging", "fine", every, lambda i: 100 * i, lambda i: int(100 * i))
    partition("stalled", "s", every, lambda i: 500, lambda i: int(1000 + 100 * i))
    partition("rewinding", "r", every, lambda i: 10 * i if i != 5 else 3,
              lambda i: int(1000 + 100 * i))
    partition("stopped", "x", range(4), lambda i: 100 * i, lambda i: int(1000 + 100 * i))
    rows = [("c", 0, n, g, t, p, o, 0, "", ts, None, False)
            for n, (g, t, p, o, ts) in enumerate(commits)]
    return rows, ends


@pytest.fixture(scope="module")
def frames(spark):
    rows, ends = _scenario()
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    log_end = spark.createDataFrame(ends, "topic string, partition int, timestamp_ms bigint, "
                                          "log_end_offset bigint")
    return commits, log_end


def _window(offsets, lags, step_ms=MIN):
    return [CommitPoint(o, T0 + i * step_ms, lag) for i, (o, lag) in enumerate(zip(offsets, lags))]


def test_burrow_rules_in_their_order():
    now = T0 + 10 * MIN
    advancing = [0, 10, 20, 30]
    assert evaluate_window(_window(advancing, [5, 0, 5, 5]), 5,
                           T0 + 4 * MIN) == Status.OK                                   # rule 1
    assert evaluate_window(_window(advancing, [5, 5, 5, 5]), 0, now) == Status.OK      # lag 0 now
    assert evaluate_window(_window([0, 10, 5, 30], [5, 6, 7, 8]), 8,
                           T0 + 4 * MIN) == Status.REWIND
    assert evaluate_window(_window(advancing, [9, 8, 7, 6]), 6,
                           T0 + 3 * MIN + 3 * MIN + 1) == Status.STOP
    assert evaluate_window(_window(advancing, [9, 8, 7, 6]), 6, T0 + 6 * MIN) == Status.OK
    assert evaluate_window(_window([7, 7, 7, 7], [1, 2, 3, 4]), 4, now - 7 * MIN) == Status.STALL
    assert evaluate_window(_window(advancing, [5, 5, 6, 6]), 6, T0 + 4 * MIN) == Status.WARN
    assert evaluate_window(_window(advancing, [5, 6, 5, 6]), 6, T0 + 4 * MIN) == Status.OK
    assert evaluate_window([], 10, now) == Status.OK


def test_stop_is_checked_first_even_after_zero_lag_commits():
    """Burrow checks STOP before rule 1: a consumer that caught up and then died keeps a
    window of zero-lag commits forever, yet it is stopped once the topic moves on."""
    caught_up = _window([0, 10, 20, 30], [5, 0, 0, 0])
    later = T0 + 100 * MIN
    assert evaluate_window(caught_up, 50, later) == Status.STOP
    assert evaluate_window(caught_up, 0, later) == Status.OK           # nothing new to consume
    # A recent log end at its last offset: it was caught up moments ago, not stopped (yet).
    assert evaluate_window(caught_up, 50, later, recent_log_ends=[30, 80]) == Status.OK
    assert evaluate_window(caught_up, 50, later, recent_log_ends=[40, 80]) == Status.STOP
    # STOP outranks REWIND, STALL and WARN.
    assert evaluate_window(_window([0, 10, 5, 30], [5, 6, 7, 8]), 8, later) == Status.STOP
    assert evaluate_window(_window([7, 7, 7, 7], [1, 2, 3, 4]), 4, later) == Status.STOP


def test_group_takes_its_worst_partition_capped_at_err():
    def part(topic, status, lag):
        return burrow.PartitionStatus("g", topic, 0, status, lag, 1.0)
    group = burrow.group_status("g", [part("a", "OK", 3), part("b", "STALL", 7),
                                      part("c", "WARN", 1)])
    assert (group.status, group.total_lag, group.max_lag.topic) == ("ERR", 11, "b")
    assert burrow.group_status("g", [part("a", "OK", 0), part("b", "WARN", 2)]).status == "WARN"
    assert burrow.group_status("g", []).status == "NOTFOUND"
    with pytest.raises(ValueError, match="window"):
        burrow.partition_status("g", "t", 0, [], 0, NOW, window=0)


def test_burrow_status_of_hand_built_groups(frames):
    commits, log_end = frames
    groups = {g.group_id: g for g in analytics.burrow_status(commits, log_end, NOW, window=10)}
    parts = {(p.group_id, p.topic): p.status for g in groups.values() for p in g.partitions}
    assert parts == {("healthy", "h"): "OK", ("lagging", "slow"): "WARN",
                     ("lagging", "fine"): "OK", ("stalled", "s"): "STALL",
                     ("rewinding", "r"): "REWIND", ("stopped", "x"): "STOP"}
    assert {g: s.status for g, s in groups.items()} == {
        "healthy": "OK", "lagging": "WARN", "stalled": "ERR", "rewinding": "ERR",
        "stopped": "ERR"}
    lagging = groups["lagging"]
    # Current lags as of NOW: slow = 1050 - 450, fine = 950 - 900.
    assert (lagging.total_lag, lagging.max_lag.topic, lagging.max_lag.current_lag) == \
        (650, "slow", 600)
    assert groups["stopped"].partitions[0].complete == pytest.approx(0.4)


def test_commits_in_the_same_millisecond_keep_their_log_order(spark, frames):
    """Two commits of a partition in one millisecond are ordered by log offset, so a
    consumer moving forward is not judged to rewind."""
    _, log_end = frames
    rows = [("c", 0, 1000 + n, "fast", "slow", 0, 10 * n, 0, "", T0 + (n // 2) * MIN, None,
             False) for n in range(10)]
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    [group] = analytics.burrow_status(commits, log_end, T0 + 5 * MIN, window=10)
    assert [p.status for p in group.partitions] == ["OK"]
    assert (group.partitions[0].start.offset, group.partitions[0].end.offset) == (0, 90)


def test_progress_activity_and_describe_as_of(spark, frames):
    commits, log_end = frames
    progress = {(r["group_id"], r["topic"]): r
                for r in analytics.partition_progress(commits, NOW).collect()}
    assert progress[("rewinding", "r")]["rewinds"] == 1
    assert progress[("stalled", "s")]["stalled_commits"] == 9
    assert progress[("stopped", "x")]["silence_ms"] == NOW - (T0 + 3 * MIN)
    assert progress[("healthy", "h")]["offsets_per_s"] == pytest.approx(100 / 60)
    assert progress[("healthy", "h")]["mean_commit_interval_ms"] == MIN

    activity = analytics.commit_activity(commits, bucket_ms=5 * MIN).collect()
    stopped = [(r["commits"], r["offsets_advanced"]) for r in activity if r["group_id"] == "stopped"]
    assert sum(c for c, _ in stopped) == 4 and sum(a for _, a in stopped) == 300

    as_of = T0 + 5 * MIN
    rows = {(r["group_id"], r["topic"]): r for r in analytics.describe(
        analytics.latest_offsets(commits, as_of), log_end, as_of)}
    assert (rows[("lagging", "slow")]["current_offset"],
            rows[("lagging", "slow")]["log_end_offset"], rows[("lagging", "slow")]["lag"]) == \
        (250, 600, 350)
    assert rows[("stopped", "x")]["current_offset"] == 300
    # Unknown log ends give an unknown lag, never a made-up zero.
    assert all(r["lag"] is None for r in analytics.describe(
        analytics.latest_offsets(commits, as_of)))
    early = spark.createDataFrame([("c", 0, 999, "healthy", "h", 0, 5, 0, "", T0 - MIN, None,
                                    False)], COMMIT_COLUMNS)
    assert analytics.commit_lags(early, log_end).collect()[0]["lag"] is None
    with pytest.raises(ValueError, match="bucket_ms"):
        analytics.commit_activity(commits, bucket_ms=0)


def test_report_and_cli_on_an_exported_lake(spark, coordinator_run, tmp_path, capsys):
    from groupcoord.spark_export import cli
    from groupcoord.spark_export.report import export_and_report
    run = coordinator_run
    run.play(rounds=12)
    logs, lake_dir = os.path.dirname(run.dir), str(tmp_path / "lake")
    log_end = tmp_path / "log_end.csv"
    end_ms = run.h.now
    log_end.write_text("topic,partition,timestamp_ms,log_end_offset\n" + "".join(
        f"orders,{p},{ts},{1000 + ts // 1000 % 1000}\n" for p in range(4)
        for ts in range(end_ms - 4 * 3_600_000, end_ms + 1, 300_000)))
    plots = tmp_path / "plots"
    text = export_and_report(logs, lake_dir, spark=spark, log_end_path=str(log_end),
                             plot_dir=str(plots))
    for section in ("exported cluster 'default'", "committed offsets (now)",
                    "consumer status (Burrow rules", "partition progress", "commit activity",
                    "groups (latest generation)", "CURRENT-OFFSET"):
        assert section in text
    for name in ("lag.png", "commit_rate.png"):
        with open(plots / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    run.play(rounds=2)
    assert cli.export_main(["--logs", logs, "--lake", lake_dir, "--quiet", "--compact",
                            "--vacuum-retention-hours", "0"]) == 2     # Delta guards retention
    out = capsys.readouterr()
    assert "retention" in out.err.lower()
    assert cli.export_main(["--logs", logs, "--lake", lake_dir, "--quiet"]) == 0
    assert "offset_commits +0" in capsys.readouterr().out      # the failed run had committed
    assert cli.report_main(["--lake", lake_dir, "--max-rows", "3", "--now-ms", str(end_ms)]) == 0
    assert "GROUP" in capsys.readouterr().out
    assert cli.report_main(["--lake", lake_dir, "--schemas"]) == 0
    assert "offset_commits  (partitioned by commit_date)" in capsys.readouterr().out
    assert cli.export_main(["--logs", str(tmp_path / "nope"), "--lake", lake_dir]) == 2
    assert "does not exist" in capsys.readouterr().err
