"""The analytics report: readable tables from the lake, plus PNG plots (matplotlib, Agg).

``build_report`` reads the tables through the Delta log, computes the analytics in Spark and
renders at most ``max_rows`` rows per section. ``export_and_report`` is what ``groupcoord demo``
calls: one export, then the report, as a string.
"""

from __future__ import annotations

import datetime
import os
import time

from pyspark.sql import functions as F

from . import analytics, lake
from .exporter import ExportConfig, export
from .schema import GROUP_GENERATIONS, OFFSET_COMMITS, OFFSETS_LATEST, TABLES

MAX_PLOT_GROUPS = 12         # lines per plot; more would be unreadable


def table_text(headers: list[str], rows: list[list], max_rows: int) -> str:
    """A fixed-width text table; notes how many rows were left out."""
    shown = [["" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v)) for v in r]
             for r in rows[:max_rows]]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in shown]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more")
    return "\n".join(lines)


def build_report(spark, lake_dir: str, log_end_path: str | None = None,
                 now_ms: int | None = None, as_of_ms: int | None = None,
                 bucket_ms: int | None = None, window: int = 10, max_rows: int = 20,
                 plot_dir: str | None = None) -> str:
    """The report as text (``bucket_ms`` None: chosen from the time span of the commits)."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    commits = lake.read_spark(spark, lake_dir, OFFSET_COMMITS).cache()
    if bucket_ms is None:
        bucket_ms = auto_bucket_ms(commits)
    log_end = analytics.load_log_end(spark, log_end_path) if log_end_path else None
    out = [f"lake {lake_dir}: " + ", ".join(
        f"{name} {lake.read_spark(spark, lake_dir, name).count()} rows" for name in TABLES)]

    latest = (lake.read_spark(spark, lake_dir, OFFSETS_LATEST) if as_of_ms is None
              else analytics.latest_offsets(commits, as_of_ms))
    rows = analytics.describe(latest, log_end, as_of_ms)
    when = "now" if as_of_ms is None else f"as of {as_of_ms} ms"
    out += ["", f"committed offsets ({when})", table_text(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
        [[r["group_id"], r["topic"], r["partition"], r["current_offset"], r["log_end_offset"],
          r["lag"]] for r in rows], max_rows)]

    if log_end is not None:
        groups = analytics.burrow_status(commits, log_end, now_ms, window)
        out += ["", f"consumer status (Burrow rules, window {window})", table_text(
            ["GROUP", "STATUS", "TOTAL-LAG", "MAX-LAG", "MAX-LAG-PARTITION", "COMPLETE"],
            [[g.group_id, g.status, g.total_lag, g.max_lag.current_lag if g.max_lag else None,
              f"{g.max_lag.topic}-{g.max_lag.partition}" if g.max_lag else None, g.complete]
             for g in groups], max_rows)]
        bad = [p for g in groups for p in g.partitions if p.status != "OK"]
        if bad:
            out += ["", "partitions not OK", table_text(
                ["GROUP", "TOPIC", "PARTITION", "STATUS", "LAG"],
                [[p.group_id, p.topic, p.partition, p.status, p.current_lag] for p in bad],
                max_rows)]

    progress = analytics.partition_progress(commits, now_ms).collect()
    out += ["", "partition progress", table_text(
        ["GROUP", "TOPIC", "PART", "COMMITS", "OFFSET", "OFFSETS/S", "MEAN-INTERVAL-MS",
         "REWINDS", "STALLED", "SILENCE-MS"],
        [[r["group_id"], r["topic"], r["partition"], r["commits"], r["last_offset"],
          r["offsets_per_s"], r["mean_commit_interval_ms"], r["rewinds"], r["stalled_commits"],
          r["silence_ms"]] for r in progress], max_rows)]

    activity = analytics.commit_activity(commits, bucket_ms).collect()
    out += ["", f"commit activity per {bucket_ms} ms", table_text(
        ["GROUP", "BUCKET-START-MS", "COMMITS", "PARTITIONS", "OFFSETS-ADVANCED"],
        [[r["group_id"], r["bucket_start_ms"], r["commits"], r["partitions"],
          r["offsets_advanced"]] for r in activity[-max_rows:]], max_rows)]

    generations = (lake.read_spark(spark, lake_dir, GROUP_GENERATIONS)
                   .filter(~F.col("is_tombstone"))
                   .groupBy("group_id").agg(F.max_by(F.struct(
                       "generation", "protocol", "leader", "member_count"), "log_offset")
                       .alias("g")).orderBy("group_id").collect())
    out += ["", "groups (latest generation)", table_text(
        ["GROUP", "GENERATION", "PROTOCOL", "LEADER", "MEMBERS"],
        [[r["group_id"], r["g"]["generation"], r["g"]["protocol"], r["g"]["leader"],
          r["g"]["member_count"]] for r in generations], max_rows)]

    if plot_dir:
        paths = [plot_commit_rate(activity, bucket_ms, os.path.join(plot_dir, "commit_rate.png"))]
        if log_end is not None:
            series = analytics.lag_series(commits, log_end, bucket_ms).collect()
            paths.append(plot_lag(series, os.path.join(plot_dir, "lag.png")))
        out += ["", "plots: " + ", ".join(paths)]
    commits.unpersist()
    return "\n".join(out)


# Bucket widths a reader recognises, from a second to a day.
NICE_BUCKETS_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000,
                   21_600_000, 86_400_000)
TARGET_BUCKETS = 40          # points per line in the plots, roughly


def auto_bucket_ms(commits) -> int:
    """The smallest nice width that splits the commits' time span into <= TARGET_BUCKETS."""
    from pyspark.sql import functions as F
    span = commits.agg((F.max("commit_timestamp_ms") - F.min("commit_timestamp_ms"))
                       .alias("span")).first()["span"] or 0
    for width_ms in NICE_BUCKETS_MS:
        if span / width_ms <= TARGET_BUCKETS:
            return width_ms
    return NICE_BUCKETS_MS[-1]


def _plot(series: dict[str, tuple[list, list]], title: str, ylabel: str, path: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4))
    for group, (xs, ys) in sorted(series.items())[:MAX_PLOT_GROUPS]:
        when = [datetime.datetime.fromtimestamp(x / 1000, datetime.timezone.utc) for x in xs]
        ax.plot(when, ys, marker=".", label=group)
    fig.autofmt_xdate()
    ax.set_title(title)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(ylabel)
    if series:
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _by_group(rows, value) -> dict[str, tuple[list, list]]:
    series: dict[str, tuple[list, list]] = {}
    for r in rows:
        xs, ys = series.setdefault(r["group_id"], ([], []))
        xs.append(r["bucket_start_ms"])
        ys.append(value(r))
    return series


def plot_commit_rate(activity_rows, bucket_ms: int, path: str) -> str:
    per_min = 60_000.0 / bucket_ms
    return _plot(_by_group(activity_rows, lambda r: r["commits"] * per_min),
                 "commit rate per group", "commits / minute", path)


def plot_lag(lag_rows, path: str) -> str:
    return _plot(_by_group(lag_rows, lambda r: r["total_lag"]), "total lag per group",
                 "lag (messages)", path)


def export_and_report(log_dir: str, lake_dir: str, spark=None, cluster: str = "default",
                      log_end_path: str | None = None, plot_dir: str | None = None,
                      progress=None, max_rows: int = 10) -> str:
    """Export ``log_dir`` into ``lake_dir`` and return the export summary plus a short report."""
    from .session import get_session
    spark = spark or get_session()
    result = export(spark, log_dir, lake_dir, ExportConfig(cluster=cluster), progress=progress)
    return result.summary() + "\n\n" + build_report(
        spark, lake_dir, log_end_path=log_end_path, plot_dir=plot_dir, max_rows=max_rows)
