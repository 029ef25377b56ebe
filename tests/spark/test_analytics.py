"""Analytics on hand-built groups (judged as Burrow would), the report, and the CLI."""

from __future__ import annotations

import math
import os
import re

import pytest

from groupcoord.coordinator import burrow
from groupcoord.coordinator.burrow import CommitPoint, Status, evaluate_window
from groupcoord.spark_export import analytics, cli, report
from groupcoord.spark_export.report import export_and_report
from groupcoord.spark_export.timefmt import duration_text, iso_utc, parse_time_ms

T0 = 1_700_000_000_000
MIN = 60_000
NOW = T0 + 9 * MIN + 30_000

COMMIT_COLUMNS = (
    "cluster string, log_partition int, log_offset bigint, group_id string, "
    "topic string, partition int, committed_offset bigint, leader_epoch int, "
    "metadata string, commit_timestamp_ms bigint, expire_timestamp_ms bigint, "
    "is_tombstone boolean"
)


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
    # Rewound at minute 5 and never back at 40 (a recovered rewind is forgiven).
    partition(
        "rewinding", "r", every, lambda i: 10 * i if i < 5 else i - 2, lambda i: int(1000 + 100 * i)
    )
    partition("stopped", "x", range(4), lambda i: 100 * i, lambda i: int(1000 + 100 * i))
    rows = [
        ("c", 0, n, g, t, p, o, 0, "", ts, None, False)
        for n, (g, t, p, o, ts) in enumerate(commits)
    ]
    return rows, ends


@pytest.fixture(scope="module")
def frames(spark):
    rows, ends = _scenario()
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    log_end = spark.createDataFrame(
        ends, "topic string, partition int, timestamp_ms bigint, log_end_offset bigint"
    )
    return commits, log_end


def _window(offsets, lags, step_ms=MIN):
    return [
        CommitPoint(o, T0 + i * step_ms, lag)
        for i, (o, lag) in enumerate(zip(offsets, lags, strict=True))
    ]


def test_burrow_rules_in_their_order():
    now = T0 + 10 * MIN
    advancing = [0, 10, 20, 30]
    assert evaluate_window(_window(advancing, [5, 0, 5, 5]), 5, T0 + 4 * MIN) == Status.OK  # rule 1
    assert evaluate_window(_window(advancing, [5, 5, 5, 5]), 0, now) == Status.OK  # lag 0 now
    assert evaluate_window(_window([0, 10, 5, 8], [5, 6, 7, 8]), 8, T0 + 4 * MIN) == Status.REWIND
    # A rewind outranks rule 1; one the consumer recovered from (back at 10) is forgiven.
    assert evaluate_window(_window([0, 10, 5, 8], [0, 6, 7, 8]), 8, T0 + 4 * MIN) == Status.REWIND
    assert evaluate_window(_window([0, 10, 5, 30], [5, 6, 7, 8]), 8, T0 + 4 * MIN) == Status.WARN
    assert (
        evaluate_window(_window(advancing, [9, 8, 7, 6]), 6, T0 + 3 * MIN + 3 * MIN + 1)
        == Status.STOP
    )
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
    assert evaluate_window(caught_up, 0, later) == Status.OK  # nothing new to consume
    # A recent log end at its last offset: it was caught up moments ago, not stopped (yet).
    assert evaluate_window(caught_up, 50, later, recent_log_ends=[30, 80]) == Status.OK
    assert evaluate_window(caught_up, 50, later, recent_log_ends=[40, 80]) == Status.STOP
    # STOP outranks REWIND, STALL and WARN.
    assert evaluate_window(_window([0, 10, 5, 30], [5, 6, 7, 8]), 8, later) == Status.STOP
    assert evaluate_window(_window([7, 7, 7, 7], [1, 2, 3, 4]), 4, later) == Status.STOP


def test_group_takes_its_worst_partition_capped_at_err():
    def part(topic, status, lag):
        return burrow.PartitionStatus("g", topic, 0, status, lag, 1.0)

    group = burrow.group_status(
        "g", [part("a", "OK", 3), part("b", "STALL", 7), part("c", "WARN", 1)]
    )
    assert (group.status, group.total_lag, group.max_lag.topic) == ("ERR", 11, "b")
    assert burrow.group_status("g", [part("a", "OK", 0), part("b", "WARN", 2)]).status == "WARN"
    assert burrow.group_status("g", []).status == "NOTFOUND"
    with pytest.raises(ValueError, match="window"):
        burrow.partition_status("g", "t", 0, [], 0, NOW, window=0)


def test_burrow_status_of_hand_built_groups(frames):
    commits, log_end = frames
    groups = {g.group_id: g for g in analytics.burrow_status(commits, log_end, NOW, window=10)}
    parts = {(p.group_id, p.topic): p.status for g in groups.values() for p in g.partitions}
    assert parts == {
        ("healthy", "h"): "OK",
        ("lagging", "slow"): "WARN",
        ("lagging", "fine"): "OK",
        ("stalled", "s"): "STALL",
        ("rewinding", "r"): "REWIND",
        ("stopped", "x"): "STOP",
    }
    assert {g: s.status for g, s in groups.items()} == {
        "healthy": "OK",
        "lagging": "WARN",
        "stalled": "ERR",
        "rewinding": "ERR",
        "stopped": "ERR",
    }
    lagging = groups["lagging"]
    # Current lags as of NOW: slow = 1050 - 450, fine = 950 - 900.
    assert (lagging.total_lag, lagging.max_lag.topic, lagging.max_lag.current_lag) == (
        650,
        "slow",
        600,
    )
    assert groups["stopped"].partitions[0].complete == pytest.approx(0.4)


def test_commits_in_the_same_millisecond_keep_their_log_order(spark, frames):
    """Two commits of a partition in one millisecond are ordered by log offset, so a
    consumer moving forward is not judged to rewind (each commit its own slot), and a slot
    that min-distance collapses keeps the later commit's offset."""
    _, log_end = frames
    rows = [
        ("c", 0, 1000 + n, "fast", "slow", 0, 10 * n, 0, "", T0 + (n // 2) * MIN, None, False)
        for n in range(10)
    ]
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    [group] = analytics.burrow_status(commits, log_end, T0 + 5 * MIN, window=10, min_distance_ms=0)
    assert [p.status for p in group.partitions] == ["OK"]
    assert (group.partitions[0].start.offset, group.partitions[0].end.offset) == (0, 90)
    [group] = analytics.burrow_status(commits, log_end, T0 + 5 * MIN, window=10)
    assert (group.partitions[0].start.offset, group.partitions[0].end.offset) == (10, 90)


def test_progress_activity_and_describe_as_of(spark, frames):
    commits, log_end = frames
    progress = {
        (r["group_id"], r["topic"]): r for r in analytics.partition_progress(commits, NOW).collect()
    }
    assert progress[("rewinding", "r")]["rewinds"] == 1
    assert progress[("stalled", "s")]["stalled_commits"] == 9
    assert progress[("stopped", "x")]["silence_ms"] == NOW - (T0 + 3 * MIN)
    assert progress[("healthy", "h")]["offsets_per_s"] == pytest.approx(100 / 60)
    assert progress[("healthy", "h")]["mean_commit_interval_ms"] == MIN

    activity = analytics.commit_activity(commits, bucket_ms=5 * MIN).collect()
    stopped = [
        (r["commits"], r["offsets_advanced"]) for r in activity if r["group_id"] == "stopped"
    ]
    assert sum(c for c, _ in stopped) == 4 and sum(a for _, a in stopped) == 300

    as_of = T0 + 5 * MIN
    rows = {
        (r["group_id"], r["topic"]): r
        for r in analytics.describe(analytics.latest_offsets(commits, as_of), log_end, as_of)
    }
    assert (
        rows[("lagging", "slow")]["current_offset"],
        rows[("lagging", "slow")]["log_end_offset"],
        rows[("lagging", "slow")]["lag"],
    ) == (250, 600, 350)
    assert rows[("stopped", "x")]["current_offset"] == 300
    # Unknown log ends give an unknown lag, never a made-up zero.
    assert all(
        r["lag"] is None for r in analytics.describe(analytics.latest_offsets(commits, as_of))
    )
    early = spark.createDataFrame(
        [("c", 0, 999, "healthy", "h", 0, 5, 0, "", T0 - MIN, None, False)], COMMIT_COLUMNS
    )
    assert analytics.commit_lags(early, log_end).collect()[0]["lag"] is None
    with pytest.raises(ValueError, match="bucket_ms"):
        analytics.commit_activity(commits, bucket_ms=0)


def test_report_and_cli_on_an_exported_lake(spark, coordinator_run, tmp_path, capsys):
    run = coordinator_run
    run.play(rounds=12)
    logs, lake_dir = os.path.dirname(run.dir), str(tmp_path / "lake")
    log_end = tmp_path / "log_end.csv"
    end_ms = run.h.now
    log_end.write_text(
        "topic,partition,timestamp_ms,log_end_offset\n"
        + "".join(
            f"orders,{p},{ts},{1000 + ts // 1000 % 1000}\n"
            for p in range(4)
            for ts in range(end_ms - 4 * 3_600_000, end_ms + 1, 300_000)
        )
    )
    plots = tmp_path / "plots"
    text = export_and_report(
        logs, lake_dir, spark=spark, log_end_path=str(log_end), plot_dir=str(plots)
    )
    for section in (
        "exported cluster 'default'",
        "committed offsets (now)",
        "consumer status (Burrow rules",
        "partition progress",
        "commit activity",
        "groups (latest generation)",
        "CURRENT-OFFSET",
    ):
        assert section in text
    for name in ("lag.png", "commit_rate.png"):
        with open(plots / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # Times read as ISO-8601 UTC, never as epoch milliseconds.
    assert not re.search(r"[A-Z]-MS\b", text) and not re.search(r"\b1[67]\d{11}\b", text)
    assert iso_utc(end_ms - 300_000) in text  # the last commit's time
    # The commit activity shows its newest rows and says how many earlier ones it left out.
    activity = text.split("commit activity per 5m00s (newest last)\n", 1)[1].split("\n\n")[0]
    assert re.match(
        r"BUCKET-START .*\n[- ]+\n\.\.\. \d+ earlier row\(s\) not shown "
        r"\(--max-rows 10\)\n",
        activity,
    )
    assert iso_utc((end_ms - 300_000) // 300_000 * 300_000) in activity.splitlines()[-1]
    run.play(rounds=2)
    assert (
        cli.export_main(
            [
                "--logs",
                logs,
                "--lake",
                lake_dir,
                "--quiet",
                "--compact",
                "--vacuum-retention-hours",
                "0",
            ]
        )
        == 2
    )  # Delta guards retention
    out = capsys.readouterr()
    assert "retention" in out.err.lower()
    assert cli.export_main(["--logs", logs, "--lake", lake_dir, "--quiet"]) == 0
    assert "offset_commits +0" in capsys.readouterr().out  # the failed run had committed
    assert cli.report_main(["--lake", lake_dir, "--max-rows", "3", "--now-ms", str(end_ms)]) == 0
    assert "GROUP" in capsys.readouterr().out
    as_of = end_ms - 3_600_000
    assert (
        cli.report_main(
            [
                "--lake",
                lake_dir,
                "--as-of",
                iso_utc(as_of),
                "--now",
                iso_utc(end_ms).replace("Z", "+00:00"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"committed offsets (as of {iso_utc(as_of)})" in out
    assert f"report time {iso_utc(end_ms)}" in out
    assert cli.report_main(["--lake", lake_dir, "--as-of", "yesterday"]) == 2
    assert "not an ISO-8601 time: 'yesterday'" in capsys.readouterr().err
    assert cli.report_main(["--lake", lake_dir, "--schemas"]) == 0
    assert "offset_commits  (partitioned by commit_date)" in capsys.readouterr().out
    assert cli.export_main(["--logs", str(tmp_path / "nope"), "--lake", lake_dir]) == 2
    assert "does not exist" in capsys.readouterr().err


# -- lag over time: the log-end timeline ----------------------------------------------------------


def _bucket(ms, width=MIN):
    return ms // width * width


def test_lag_series_of_a_stopped_consumer_grows(frames):
    """The "stopped" group committed for four minutes, then nothing while the log end moved
    on: at every later log-end sample its lag is end minus its last offset (300), growing."""
    commits, log_end = frames
    rows = [
        r
        for r in analytics.lag_series(commits, log_end, bucket_ms=MIN).collect()
        if r["group_id"] == "stopped"
    ]
    # Samples at T0 + i min - 1 ms carry end 1000 + 100 i; the last commit at or before the
    # sample is minute i - 1's (offset 100 (i - 1), at most 300). NOW's sample (end 1950)
    # is the last one of the last bucket.
    want = [
        (_bucket(T0 + i * MIN - 1), 1000 + 100 * i - 100 * min(i - 1, 3)) for i in range(1, 9)
    ] + [(_bucket(NOW), 1950 - 300)]
    assert [(r["bucket_start_ms"], r["total_lag"]) for r in rows] == want
    assert all(r["partitions"] == 1 for r in rows)


def test_a_partition_without_commits_stays_in_the_lag_series(spark):
    """Partition 1 of the group was committed once and never again: it keeps a lag at every
    log-end sample (so the group's total counts it), while partition 0 keeps up."""
    rows = [
        ("c", 0, n, "half", "t", 0, 100 * n, 0, "", T0 + n * MIN, None, False) for n in range(6)
    ]
    rows.append(("c", 0, 99, "half", "t", 1, 0, 0, "", T0, None, False))
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    ends = [
        ("t", p, T0 + i * MIN + 30_000, end)
        for i in range(6)
        for p, end in ((0, 100 * i + 100), (1, 50 * i + 50))
    ]
    log_end = spark.createDataFrame(
        ends, "topic string, partition int, timestamp_ms bigint, log_end_offset bigint"
    )
    timeline = {
        (r["partition"], r["timestamp_ms"]): (r["committed_offset"], r["lag"])
        for r in analytics.lag_timeline(commits, log_end).collect()
    }
    assert timeline == {
        (p, T0 + i * MIN + 30_000): (100 * i if p == 0 else 0, 100 if p == 0 else 50 * i + 50)
        for i in range(6)
        for p in (0, 1)
    }
    series = [
        (r["bucket_start_ms"], r["total_lag"], r["partitions"])
        for r in analytics.lag_series(commits, log_end, bucket_ms=MIN).collect()
    ]
    assert series == [(_bucket(T0 + i * MIN + 30_000), 100 + 50 * i + 50, 2) for i in range(6)]


def test_a_commit_in_the_same_millisecond_as_a_sample_counts_for_it(spark):
    commits = spark.createDataFrame(
        [("c", 0, 1, "g", "t", 0, 40, 0, "", T0, None, False)], COMMIT_COLUMNS
    )
    log_end = spark.createDataFrame(
        [("t", 0, T0 - 1, 30), ("t", 0, T0, 50)],
        "topic string, partition int, timestamp_ms bigint, log_end_offset bigint",
    )
    # The sample before the first commit has no committed offset: no lag, not a made-up one.
    assert [
        (r["timestamp_ms"], r["lag"]) for r in analytics.lag_timeline(commits, log_end).collect()
    ] == [(T0, 10)]


# -- Burrow's min-distance ------------------------------------------------------------------------


def _fast_committer(spark, pause_ms):
    """Commits every 200 ms for 10 s (lag alternating 300 and 303, never caught up), then
    ``pause_ms`` of silence while the log end moves on."""
    commits = spark.createDataFrame(
        [("c", 0, k, "fast", "f", 0, 10 * k, 0, "", T0 + 200 * k, None, False) for k in range(50)],
        COMMIT_COLUMNS,
    )
    ends = [("f", 0, T0 + 200 * k - 1, 10 * k + 300 + 3 * (k % 2)) for k in range(50)]
    now = T0 + 200 * 49 + pause_ms
    ends.append(("f", 0, now, 900))
    log_end = spark.createDataFrame(
        ends, "topic string, partition int, timestamp_ms bigint, log_end_offset bigint"
    )
    return commits, log_end, now


def test_burrow_min_distance_keeps_a_short_pause_of_a_fast_committer_ok(spark):
    """A 2.5 s pause between 200 ms commits: with Burrow's shipped configuration (15 slots,
    min-distance 1 s) the window spans 9 s, so the consumer is OK; judging every commit
    (min-distance 0, 10 slots: a 1.8 s window) would call it stopped."""
    commits, log_end, now = _fast_committer(spark, pause_ms=2_500)
    [group] = analytics.burrow_status(commits, log_end, now)
    [part] = group.partitions
    assert part.status == "OK"
    # One slot per second; each keeps its first commit's time and its last commit's offset.
    assert (part.start, part.end) == (CommitPoint(40, T0, 300), CommitPoint(490, T0 + 9_000, 303))
    assert part.complete == pytest.approx(10 / 15)
    [every] = analytics.burrow_status(commits, log_end, now, window=10, min_distance_ms=0)
    assert every.partitions[0].status == "STOP"
    # A real stop is still one: silence longer than the 9 s the slots span.
    commits, log_end, later = _fast_committer(spark, pause_ms=9_500)
    assert analytics.burrow_status(commits, log_end, later)[0].partitions[0].status == "STOP"
    with pytest.raises(ValueError, match="min_distance_ms"):
        analytics.burrow_status(commits, log_end, now, min_distance_ms=-1)


def _burrow_ring(commits, window, min_distance_ms):
    """Burrow's storage, replayed commit by commit: a commit closer than min-distance to the
    newest slot's time overwrites that slot's offset and lag, keeping its time."""
    ring = []
    for ts, offset, lag in commits:
        if ring and ts - ring[-1][0] < min_distance_ms:
            ring[-1] = (ring[-1][0], offset, lag)
        else:
            ring.append((ts, offset, lag))
    return ring[-window:]


def test_burrow_slots_match_a_replay_of_burrows_ring(spark):
    """Bursts, pauses and commits in one millisecond, against the ring replayed in Python
    (the Spark version reads only the newest runs of commits: this checks that is enough)."""
    gaps = [
        0,
        300,
        300,
        2_000,
        100,
        100,
        100,
        100,
        100,
        100,
        100,
        100,
        100,
        100,
        5_000,
        0,
        999,
        1,
        1_000,
        400,
        700,
        3_000,
        50,
        50,
        50,
        50,
        1_500,
        200,
        200,
        900,
        100,
    ]
    times, t = [], T0
    for gap in gaps:
        t += gap
        times.append(t)
    commits = spark.createDataFrame(
        [("c", 0, n, "g", "t", 0, 7 * n, 0, "", ts, None, False) for n, ts in enumerate(times)],
        COMMIT_COLUMNS,
    )
    log_end = spark.createDataFrame(
        [("t", 0, T0 - 1, 1_000)],
        "topic string, partition int, timestamp_ms bigint, log_end_offset bigint",
    )
    replayed = [(ts, 7 * n, 1_000 - 7 * n) for n, ts in enumerate(times)]
    for window, min_distance_ms in ((3, 1_000), (5, 1_000), (4, 250), (15, 1_000), (6, 0)):
        [row] = analytics.burrow_slots(
            commits, log_end, times[-1], window, min_distance_ms
        ).collect()
        got = [(s["timestamp_ms"], s["offset"], s["lag"]) for s in row["slots"]]
        assert got == _burrow_ring(replayed, window, min_distance_ms), (window, min_distance_ms)


# -- the report's presentation --------------------------------------------------------------------


def test_times_and_durations_read_as_iso_8601_and_units():
    assert iso_utc(1_795_441_500_000) == "2026-11-23T13:45:00Z"
    assert iso_utc(1_795_441_500_250) == "2026-11-23T13:45:00.250Z"
    for text in (
        "2026-11-23T13:45:00Z",
        "2026-11-23T14:45:00+01:00",
        "2026-11-23 13:45",
        "1795441500000",
    ):
        assert parse_time_ms(text) == 1_795_441_500_000, text
    for bad in ("23/11/2026", "²"):  # "²".isdigit(), but int() refuses it
        with pytest.raises(ValueError, match="ISO-8601"):
            parse_time_ms(bad)
    assert [
        duration_text(ms)
        for ms in (850, 2_500, 200_000, 4 * 3_600_000 + 300_000, 2 * 86_400_000 + 3 * 3_600_000)
    ] == ["850ms", "2.5s", "3m20s", "4h05m", "2d03h"]


@pytest.mark.parametrize(
    ("main", "argv", "message"),
    [
        (cli.export_main, ["--bogus"], "the following arguments are required: --logs, --lake"),
        (cli.export_main, ["--logs", "l", "--lake", "k", "--bogus"], "unrecognized arguments"),
        (cli.report_main, ["--lake", "k", "--as-of", "yesterday"], "not an ISO-8601 time"),
        (cli.report_main, ["--lake", "k", "--window", "x"], "not an integer: 'x'"),
        # Before: accepted, then refused (or ignored) only after Spark had started.
        (cli.report_main, ["--lake", "k", "--window", "0"], "--window: must be >= 1, got 0"),
        (cli.report_main, ["--lake", "k", "--max-rows", "-1"], "--max-rows: must be >= 1"),
        (cli.report_main, ["--lake", "k", "--bucket-ms", "0"], "--bucket-ms: must be >= 1"),
        (cli.report_main, ["--lake", "k", "--min-distance-ms", "-5"], "must be >= 0, got -5"),
        (cli.export_main, ["--logs", "l", "--lake", "k", "--max-segments-per-round", "0"], ">= 1"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(capsys, main, argv, message):
    assert main(argv) == 2
    out = capsys.readouterr()
    prog = "groupcoord export" if main is cli.export_main else "groupcoord report"
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"{prog}: ") and message in out.err
    assert out.err.rstrip().endswith(f"(see {prog} --help)")


def test_a_plots_path_that_is_a_file_fails_before_spark(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep")
    # An empty lake directory: the plots path is checked first, as every other path.
    assert cli.report_main(["--lake", str(tmp_path), "--plots", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err == f"groupcoord report: plots directory '{a_file}' is not a directory\n"
    assert a_file.read_text() == "keep"


def test_every_report_column_is_explained_in_help_and_readme(capsys):
    with pytest.raises(SystemExit):
        cli.report_main(["--help"])
    help_text = capsys.readouterr().out
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as f:
        readme = f.read()
    headers = {
        h
        for table in (
            report.DESCRIBE_HEADERS,
            report.STATUS_HEADERS,
            report.NOT_OK_HEADERS,
            report.PROGRESS_HEADERS,
            report.ACTIVITY_HEADERS,
            report.GENERATION_HEADERS,
        )
        for h in table
    }
    for header in sorted(headers) + ["STOP", "STALL", "REWIND", "WARN", "ERR"]:
        assert re.search(rf"(^|[\s,`]){re.escape(header)}([\s,`]|$)", help_text), header
        assert re.search(rf"(^|[\s,`]){re.escape(header)}([\s,`]|$)", readme), header


def test_a_cut_table_says_how_many_rows_it_left_out():
    rows = [[n, f"r{n}"] for n in range(7)]
    assert report.table_text(["N", "NAME"], rows, 3).splitlines()[2:] == [
        "0  r0  ",
        "1  r1  ",
        "2  r2  ",
        "... 4 more row(s) not shown (--max-rows 3)",
    ]
    assert report.table_text(["N", "NAME"], rows, 3, keep="last").splitlines()[2:] == [
        "... 4 earlier row(s) not shown (--max-rows 3)",
        "4  r4  ",
        "5  r5  ",
        "6  r6  ",
    ]
    assert report.table_text(["N"], [], 3).splitlines()[2:] == ["(none)"]


def _activity(group, bucket, commits):
    return {"group_id": group, "bucket_start_ms": bucket, "commits": commits}


def test_commit_rate_plot_draws_the_busiest_groups_and_drops_to_zero_when_they_stop():
    """25 groups: the busiest sorts last by name and stops half way. It is drawn, first, and
    its line falls to 0 in the buckets without commits; the legend says 20 of 25."""
    bucket = 5 * MIN
    t0 = T0 // bucket * bucket
    rows = [
        _activity(f"g{n:02d}", t0 + b * bucket, 1 + n % 3) for n in range(24) for b in range(10)
    ]
    rows += [_activity("zz-busiest", t0 + b * bucket, 50) for b in range(5)]
    series = report.commit_rate_series(rows, bucket)
    assert series.times_ms == [t0 + b * bucket for b in range(10)]
    assert len(series.lines) == 20 and next(iter(series.lines)) == "zz-busiest"
    assert series.lines["zz-busiest"] == [10.0] * 5 + [0.0] * 5  # 50 per 5 min, then 0
    # Then by commits (ties by name), in legend order: 8 groups of 30, 8 of 20, 3 of 10.
    totals = sorted((-10 * (1 + n % 3), f"g{n:02d}") for n in range(24))
    assert list(series.lines)[1:] == [g for _, g in totals[:19]]
    assert series.legend_title() == "top 20 of 25 groups by commits"

    fig = report.plot_figure(series, "commit rate per group", "commits / minute")
    try:
        [ax] = fig.axes
        drawn = ax.get_lines()
        assert [line.get_label() for line in drawn] == list(series.lines)
        assert [list(line.get_ydata()) for line in drawn] == list(series.lines.values())
        styles = {(tuple(line.get_color()), line.get_linestyle()) for line in drawn}
        assert len(styles) == len(drawn)  # no two lines alike
        assert ax.get_legend().get_title().get_text() == "top 20 of 25 groups by commits"
    finally:
        report.plt.close(fig)
    few = report.commit_rate_series(rows[:20], bucket)
    assert few.legend_title() == "all 2 groups"


def test_lag_plot_draws_the_most_lagging_groups_with_gaps_before_their_first_sample():
    rows = [
        {"group_id": f"g{n:02d}", "bucket_start_ms": b, "total_lag": n * 10 + b}
        for n in range(22)
        for b in range(n % 2, 4)
    ]
    series = report.lag_plot_series(rows)
    assert series.times_ms == [0, 1, 2, 3]
    assert list(series.lines)[:2] == ["g21", "g20"] and "g00" not in series.lines
    assert series.legend_title() == "top 20 of 22 groups by peak lag"
    assert math.isnan(series.lines["g21"][0]) and series.lines["g21"][1:] == [211, 212, 213]


def test_offsets_at_int64s_ends_do_not_break_the_analytics(spark):
    # Kafka stores any int64 a client commits. Differences of such offsets pass int64, which
    # Spark's ANSI arithmetic (the default since Spark 4) refuses for the whole query.
    low, high = -(2**63), 2**63 - 1
    offsets = [low, high, 5, high]
    rows = [
        ("c", 0, n, "extreme", "t", 0, o, 0, "", T0 + n * MIN, None, False)
        for n, o in enumerate(offsets)
    ]
    commits = spark.createDataFrame(rows, COMMIT_COLUMNS)
    ends = [("t", 0, T0 + n * MIN, e) for n, e in enumerate((10, high, 10, 20))]
    log_end = spark.createDataFrame(
        ends, "topic string, partition int, timestamp_ms bigint, log_end_offset bigint"
    )
    now = T0 + 10 * MIN
    (activity,) = analytics.commit_activity(commits, bucket_ms=60 * MIN).collect()
    assert activity["commits"] == 4
    (progress,) = analytics.partition_progress(commits, now).collect()
    assert (progress["rewinds"], progress["first_offset"], progress["last_offset"]) == (
        1,
        low,
        high,
    )
    lags = [
        r["lag"] for r in analytics.commit_lags(commits, log_end).orderBy("log_offset").collect()
    ]
    assert lags == [high, 0, 5, 0]
    timeline = analytics.lag_timeline(commits, log_end).orderBy("timestamp_ms").collect()
    assert [r["lag"] for r in timeline] == [high, 0, 5, 0]
    (series,) = analytics.lag_series(commits, log_end, bucket_ms=60 * MIN).collect()
    assert series["total_lag"] == 0
    (status,) = analytics.burrow_status(commits, log_end, now)
    assert (status.group_id, status.total_lag) == ("extreme", 0)
