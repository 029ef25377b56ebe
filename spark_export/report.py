"""The analytics report: readable tables from the lake, plus PNG plots (matplotlib, Agg).

``build_report`` reads the tables through the Delta log, computes the analytics in Spark and
renders at most ``max_rows`` rows per section; a table that is cut says how many rows it left
out. Instants are ISO-8601 UTC, durations in units (``timefmt``); ``COLUMNS_HELP`` explains
every column (``groupcoord report --help`` prints it). ``export_and_report`` is what
``groupcoord demo`` calls: one export, then the report, as a string.

The plots are drawn from ``PlotSeries`` built here from the analytics' rows: commit rate per
group with every bucket of the report's span present (a bucket without commits is 0, so a group
that stopped drops to 0), and total lag per group on the log-end timeline. At most
``MAX_PLOT_GROUPS`` groups are drawn, the busiest (most commits) or the most lagging (highest
peak lag), and the legend says "top N of M" when some are left out; each line has its own
colour and dash pair.
"""

from __future__ import annotations

import datetime
import math
import os
import time

import matplotlib
import msgspec
from pyspark.sql import functions as F

from groupcoord.coordinator import burrow

from . import analytics, lake
from .exporter import ExportConfig, export
from .schema import GROUP_GENERATIONS, OFFSET_COMMITS, OFFSETS_LATEST, TABLES
from .session import get_session
from .timefmt import duration_text, iso_utc

matplotlib.use("Agg")  # files only; no display is ever needed
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)

MAX_PLOT_GROUPS = 20  # lines per plot; more would be unreadable
# Ten colours a reader tells apart, each with up to four dash patterns: 40 distinct lines.
PLOT_COLOURS = tuple(matplotlib.colormaps["tab10"].colors)
PLOT_DASHES = ("-", "--", ":", "-.")

DESCRIBE_HEADERS = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "LAST-COMMIT",
]
STATUS_HEADERS = ["GROUP", "STATUS", "TOTAL-LAG", "MAX-LAG", "MAX-LAG-PARTITION", "COMPLETE"]
NOT_OK_HEADERS = ["GROUP", "TOPIC", "PARTITION", "STATUS", "LAG"]
PROGRESS_HEADERS = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "COMMITS",
    "OFFSET",
    "OFFSETS/S",
    "MEAN-INTERVAL",
    "REWINDS",
    "STALLED",
    "LAST-COMMIT",
    "SILENCE",
]
ACTIVITY_HEADERS = ["BUCKET-START", "GROUP", "COMMITS", "PARTITIONS", "OFFSETS-ADVANCED"]
GENERATION_HEADERS = ["GROUP", "GENERATION", "PROTOCOL", "LEADER", "MEMBERS"]

COLUMNS_HELP = """\
Times are ISO-8601 UTC (2026-11-23T13:45:00Z); durations read 850ms, 2.5s, 3m20s, 4h05m, 2d03h.
A table cut at --max-rows says how many rows it left out.

columns:
  GROUP, TOPIC, PARTITION  the consumer group and the topic partition it commits for
  CURRENT-OFFSET     the group's committed offset: the next message it will read
  LOG-END-OFFSET     the partition's log end at that time (from --log-end; empty without it)
  LAG                LOG-END-OFFSET minus the committed offset, never below 0
  LAST-COMMIT        time of the newest commit
  STATUS             Burrow's verdict over the partition's window (see below); for a group,
                     its worst partition, with STOP, STALL and REWIND shown as ERR
  TOTAL-LAG          the sum of the group's partitions' current lags
  MAX-LAG            the largest partition lag of the group; MAX-LAG-PARTITION names it
  COMPLETE           fraction of the group's partitions whose window is full (every slot holds
                     a commit); below 1 the verdict rests on a short history
  COMMITS            commits counted
  OFFSET             the newest committed offset
  OFFSETS/S          offsets advanced per second from the first commit to the newest
  MEAN-INTERVAL      mean time between two commits
  REWINDS            commits that moved the offset backwards
  STALLED            commits that left the offset where it was (no progress)
  SILENCE            time from the newest commit to the report time (--now)
  BUCKET-START       start of a time bucket (--bucket-ms wide)
  PARTITIONS         partitions committed in the bucket
  OFFSETS-ADVANCED   the sum of the offsets' advances in the bucket
  GENERATION, PROTOCOL, LEADER, MEMBERS  the group's newest generation: its assignor, its
                     leader's member id, its member count

Burrow's window per partition: --window slots (Burrow's "intervals"); commits closer together
than --min-distance-ms share a slot. Statuses, checked in this order:
  OK      no lag now
  STOP    no commit for longer than the window spans, and no recent log end at the last
          committed offset: the consumer stopped
  OK      lag was zero at some commit in the window
  REWIND  the committed offset went backwards in the window
  STALL   the committed offset never changed across the window, with lag
  WARN    the offset moves but the lag never shrank across the window
  OK      otherwise
"""


def table_text(headers: list[str], rows: list[list], max_rows: int, keep: str = "first") -> str:
    """A fixed-width text table of at most ``max_rows`` rows, the first ones or (``keep``
    "last") the last ones; a line says how many rows were left out, and where."""
    left_out = max(len(rows) - max_rows, 0)
    kept = rows[left_out:] if keep == "last" else rows[:max_rows]
    shown = [
        ["" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v)) for v in r]
        for r in kept
    ]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(headers)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in shown]
    if not rows:
        body = ["(none)"]
    note = (
        f"... {left_out} {'earlier' if keep == 'last' else 'more'} row(s) not shown "
        f"(--max-rows {max_rows})"
    )
    if left_out and keep == "last":
        lines += [note] + body
    else:
        lines += body + ([note] if left_out else [])
    return "\n".join(lines)


def lake_clusters(spark, lake_dir: str) -> list[str]:
    """The clusters that have rows in the lake, sorted."""
    found: set[str] = set()
    for name in TABLES:
        rows = lake.read_spark(spark, lake_dir, name).select("cluster").distinct().collect()
        found.update(r["cluster"] for r in rows)
    return sorted(found)


def choose_cluster(spark, lake_dir: str, cluster: str | None) -> str | None:
    """The one cluster a report is about: ``cluster``, or the lake's only one (None: the lake
    has no rows). A ValueError when the lake has rows but none of ``cluster``, or when
    ``cluster`` is None and the lake holds several: their groups, topics and logs are
    unrelated, and one report of them all would mix them (one progress series, two "latest"
    offsets of one group partition)."""
    present = lake_clusters(spark, lake_dir)
    held = ", ".join(map(repr, present)) or "none"
    if cluster is None:
        if len(present) > 1:
            raise ValueError(
                f"lake {lake_dir!r} holds {len(present)} clusters ({held}): choose one "
                "with --cluster"
            )
        return present[0] if present else None
    if present and cluster not in present:  # a lake without rows has nothing to mix up
        raise ValueError(f"lake {lake_dir!r} has no rows of cluster {cluster!r} (it holds: {held})")
    return cluster


def build_report(
    spark,
    lake_dir: str,
    log_end_path: str | None = None,
    now_ms: int | None = None,
    as_of_ms: int | None = None,
    bucket_ms: int | None = None,
    window: int = burrow.DEFAULT_WINDOW,
    min_distance_ms: int = burrow.DEFAULT_MIN_DISTANCE_MS,
    max_rows: int = 20,
    plot_dir: str | None = None,
    cluster: str | None = None,
) -> str:
    """The report on one cluster of the lake (``choose_cluster``) as text (``bucket_ms`` None:
    chosen from the time span of the commits)."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    cluster = choose_cluster(spark, lake_dir, cluster)

    def read(name: str):
        frame = lake.read_spark(spark, lake_dir, name)
        return frame if cluster is None else frame.filter(F.col("cluster") == cluster)

    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    commits = read(OFFSET_COMMITS).cache()
    if bucket_ms is None:
        bucket_ms = auto_bucket_ms(commits)
    log_end = analytics.load_log_end(spark, log_end_path) if log_end_path else None
    out = [
        f"lake {lake_dir}"
        + ("" if cluster is None else f", cluster {cluster!r}")
        + ": "
        + ", ".join(f"{name} {read(name).count()} rows" for name in TABLES),
        f"report time {iso_utc(now_ms)}",
    ]

    latest = (
        read(OFFSETS_LATEST) if as_of_ms is None else analytics.latest_offsets(commits, as_of_ms)
    )
    rows = analytics.describe(latest, log_end, as_of_ms)
    when = "now" if as_of_ms is None else f"as of {iso_utc(as_of_ms)}"
    out += [
        "",
        f"committed offsets ({when})",
        table_text(
            DESCRIBE_HEADERS,
            [
                [
                    r["group_id"],
                    r["topic"],
                    r["partition"],
                    r["current_offset"],
                    r["log_end_offset"],
                    r["lag"],
                    iso_utc(r["commit_timestamp_ms"]),
                ]
                for r in rows
            ],
            max_rows,
        ),
    ]

    if log_end is not None:
        groups = analytics.burrow_status(commits, log_end, now_ms, window, min_distance_ms)
        out += [
            "",
            f"consumer status (Burrow rules: window {window} slots, min distance "
            f"{duration_text(min_distance_ms)}, at {iso_utc(now_ms)})",
            table_text(
                STATUS_HEADERS,
                [
                    [
                        g.group_id,
                        g.status,
                        g.total_lag,
                        g.max_lag.current_lag if g.max_lag else None,
                        f"{g.max_lag.topic}-{g.max_lag.partition}" if g.max_lag else None,
                        g.complete,
                    ]
                    for g in groups
                ],
                max_rows,
            ),
        ]
        bad = [p for g in groups for p in g.partitions if p.status != "OK"]
        if bad:
            out += [
                "",
                "partitions not OK",
                table_text(
                    NOT_OK_HEADERS,
                    [[p.group_id, p.topic, p.partition, p.status, p.current_lag] for p in bad],
                    max_rows,
                ),
            ]

    progress = analytics.partition_progress(commits, now_ms).collect()
    out += [
        "",
        f"partition progress (silence up to {iso_utc(now_ms)})",
        table_text(
            PROGRESS_HEADERS,
            [
                [
                    r["group_id"],
                    r["topic"],
                    r["partition"],
                    r["commits"],
                    r["last_offset"],
                    r["offsets_per_s"],
                    duration_text(r["mean_commit_interval_ms"]),
                    r["rewinds"],
                    r["stalled_commits"],
                    iso_utc(r["last_commit_ms"]),
                    duration_text(r["silence_ms"]),
                ]
                for r in progress
            ],
            max_rows,
        ),
    ]

    activity = analytics.commit_activity(commits, bucket_ms).collect()
    newest_last = sorted(activity, key=lambda r: (r["bucket_start_ms"], r["group_id"]))
    out += [
        "",
        f"commit activity per {duration_text(bucket_ms)} (newest last)",
        table_text(
            ACTIVITY_HEADERS,
            [
                [
                    iso_utc(r["bucket_start_ms"]),
                    r["group_id"],
                    r["commits"],
                    r["partitions"],
                    r["offsets_advanced"],
                ]
                for r in newest_last
            ],
            max_rows,
            keep="last",
        ),
    ]

    generations = (
        read(GROUP_GENERATIONS)
        .filter(~F.col("is_tombstone"))
        .groupBy("group_id")
        .agg(
            F.max_by(
                F.struct("generation", "protocol", "leader", "member_count"), "log_offset"
            ).alias("g")
        )
        .orderBy("group_id")
        .collect()
    )
    out += [
        "",
        "groups (latest generation)",
        table_text(
            GENERATION_HEADERS,
            [
                [
                    r["group_id"],
                    r["g"]["generation"],
                    r["g"]["protocol"],
                    r["g"]["leader"],
                    r["g"]["member_count"],
                ]
                for r in generations
            ],
            max_rows,
        ),
    ]

    if plot_dir:
        paths = [
            save_plot(
                commit_rate_series(activity, bucket_ms),
                "commit rate per group",
                "commits / minute",
                os.path.join(plot_dir, "commit_rate.png"),
            )
        ]
        if log_end is not None:
            lags = analytics.lag_series(commits, log_end, bucket_ms).collect()
            paths.append(
                save_plot(
                    lag_plot_series(lags),
                    "total lag per group",
                    "lag (messages)",
                    os.path.join(plot_dir, "lag.png"),
                )
            )
        out += ["", "plots: " + ", ".join(paths)]
    commits.unpersist()
    return "\n".join(out)


# Bucket widths a reader recognises, from a second to a day.
NICE_BUCKETS_MS = (
    1_000,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    900_000,
    3_600_000,
    21_600_000,
    86_400_000,
)
TARGET_BUCKETS = 40  # points per line in the plots, roughly


def auto_bucket_ms(commits) -> int:
    """The smallest nice width that splits the commits' time span into <= TARGET_BUCKETS."""
    span = (
        commits.agg(
            (F.max("commit_timestamp_ms") - F.min("commit_timestamp_ms")).alias("span")
        ).first()["span"]
        or 0
    )
    for width_ms in NICE_BUCKETS_MS:
        if span / width_ms <= TARGET_BUCKETS:
            return width_ms
    return NICE_BUCKETS_MS[-1]


# -- plots ----------------------------------------------------------------------------------------


class PlotSeries(msgspec.Struct):
    """What one plot draws: a value per time for each drawn group (NaN: no value there)."""

    times_ms: list[int]
    lines: dict[str, list[float]]  # in legend order: the highest-ranked group first
    groups_total: int  # groups that had data, drawn or not
    ranked_by: str  # what chose the drawn groups

    def legend_title(self) -> str:
        if len(self.lines) < self.groups_total:
            return f"top {len(self.lines)} of {self.groups_total} groups by {self.ranked_by}"
        return f"all {self.groups_total} groups"


def _top(score: dict[str, float], limit: int) -> list[str]:
    return sorted(score, key=lambda g: (-score[g], g))[:limit]


def commit_rate_series(
    activity_rows, bucket_ms: int, max_groups: int = MAX_PLOT_GROUPS
) -> PlotSeries:
    """Commits per minute per group in every bucket from the first to the last one with
    commits (0 where a group made none); the ``max_groups`` groups with the most commits."""
    per_minute = 60_000.0 / bucket_ms
    counts: dict[str, dict[int, int]] = {}
    for r in activity_rows:
        counts.setdefault(r["group_id"], {})[r["bucket_start_ms"]] = r["commits"]
    if not counts:
        return PlotSeries([], {}, 0, "commits")
    starts = [b for per in counts.values() for b in per]
    times = list(range(min(starts), max(starts) + 1, bucket_ms))
    chosen = _top({g: sum(per.values()) for g, per in counts.items()}, max_groups)
    return PlotSeries(
        times,
        {g: [counts[g].get(t, 0) * per_minute for t in times] for g in chosen},
        len(counts),
        "commits",
    )


def lag_plot_series(lag_rows, max_groups: int = MAX_PLOT_GROUPS) -> PlotSeries:
    """Total lag per group and bucket (NaN before a group's first sample); the
    ``max_groups`` groups with the highest peak lag."""
    lags: dict[str, dict[int, int]] = {}
    for r in lag_rows:
        lags.setdefault(r["group_id"], {})[r["bucket_start_ms"]] = r["total_lag"]
    times = sorted({b for per in lags.values() for b in per})
    chosen = _top({g: max(per.values()) for g, per in lags.items()}, max_groups)
    return PlotSeries(
        times,
        {g: [float(lags[g].get(t, math.nan)) for t in times] for g in chosen},
        len(lags),
        "peak lag",
    )


def line_styles(count: int) -> list[tuple[tuple, str]]:
    """``count`` distinct (colour, dash) pairs: every colour solid first, then dashed, ..."""
    if count > len(PLOT_COLOURS) * len(PLOT_DASHES):
        raise ValueError(f"at most {len(PLOT_COLOURS) * len(PLOT_DASHES)} distinct lines")
    return [
        (PLOT_COLOURS[i % len(PLOT_COLOURS)], PLOT_DASHES[i // len(PLOT_COLOURS)])
        for i in range(count)
    ]


def plot_figure(series: PlotSeries, title: str, ylabel: str):
    """The matplotlib figure of ``series`` (the caller closes it)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    when = [datetime.datetime.fromtimestamp(t / 1000, datetime.UTC) for t in series.times_ms]
    for (group, ys), (colour, dash) in zip(
        series.lines.items(), line_styles(len(series.lines)), strict=True
    ):
        ax.plot(when, ys, marker=".", color=colour, linestyle=dash, label=group)
    fig.autofmt_xdate()
    ax.set_title(title)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(ylabel)
    if series.lines:
        ax.legend(
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            fontsize="small",
            title=series.legend_title(),
            title_fontsize="small",
        )
    fig.tight_layout()
    return fig


def save_plot(series: PlotSeries, title: str, ylabel: str, path: str) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig = plot_figure(series, title, ylabel)
    try:
        fig.savefig(path, dpi=80)
    finally:
        plt.close(fig)
    return path


def export_and_report(
    log_dir: str,
    lake_dir: str,
    spark=None,
    cluster: str = "default",
    log_end_path: str | None = None,
    plot_dir: str | None = None,
    progress=None,
    max_rows: int = 10,
) -> str:
    """Export ``log_dir`` into ``lake_dir`` and return the export summary plus a short report."""
    spark = spark or get_session()
    result = export(spark, log_dir, lake_dir, ExportConfig(cluster=cluster), progress=progress)
    return (
        result.summary()
        + "\n\n"
        + build_report(
            spark,
            lake_dir,
            log_end_path=log_end_path,
            plot_dir=plot_dir,
            max_rows=max_rows,
            cluster=cluster,
        )
    )
