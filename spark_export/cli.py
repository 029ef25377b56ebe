"""``groupcoord export`` and ``groupcoord report`` (dispatched here by actors/cli.py), and
``python -m groupcoord.spark_export export|report`` for spark-submit.

Both return a process exit code: 0 on success, 2 on bad input (a ValueError, with its message).
"""

from __future__ import annotations

import argparse
import re
import sys


def _export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupcoord export",
                                     description="Export committed offsets from the partition "
                                                 "logs into Delta tables, exactly once.")
    parser.add_argument("--logs", required=True, help="log directory (holds partition-<n>/)")
    parser.add_argument("--lake", required=True, help="lake directory (Delta tables)")
    parser.add_argument("--cluster", default="default", help="cluster name in every row")
    parser.add_argument("--master", default=None,
                        help="Spark master (default local[2]; spark-submit sets its own)")
    parser.add_argument("--max-segments-per-round", type=int, default=64)
    parser.add_argument("--compact", action="store_true",
                        help="afterwards, compact small files of closed days")
    parser.add_argument("--vacuum-retention-hours", type=int, default=None,
                        help="afterwards, vacuum files unreferenced for this many hours")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def _report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupcoord report",
                                     description="Analytics over the exported lake.")
    parser.add_argument("--lake", required=True, help="lake directory (Delta tables)")
    parser.add_argument("--log-end", default=None,
                        help="Parquet or CSV of (topic, partition, timestamp_ms, log_end_offset)"
                             " for lag and Burrow status")
    parser.add_argument("--now-ms", type=int, default=None, help="evaluation time (default now)")
    parser.add_argument("--as-of-ms", type=int, default=None,
                        help="show committed offsets as of this time")
    parser.add_argument("--bucket-ms", type=int, default=None,
                        help="activity bucket (default: from the time span of the commits)")
    parser.add_argument("--window", type=int, default=10, help="Burrow window (commits)")
    parser.add_argument("--max-rows", type=int, default=20, help="rows per section")
    parser.add_argument("--plots", default=None, help="write PNG plots into this folder")
    parser.add_argument("--master", default=None, help="Spark master (default local[2])")
    parser.add_argument("--schemas", action="store_true", help="print the table schemas only")
    return parser


def export_main(argv: list[str] | None = None) -> int:
    args = _export_parser().parse_args(argv)
    from . import lake
    from .exporter import ExportConfig, export
    from .session import get_session
    try:
        config = ExportConfig(cluster=args.cluster,
                              max_segments_per_round=args.max_segments_per_round)
        spark = get_session(args.master)
        say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
        result = export(spark, args.logs, args.lake, config, progress=say)
        print(result.summary())
        if args.compact:
            print(f"compacted (files removed): {lake.compact(args.lake)}")
        if args.vacuum_retention_hours is not None:
            print(f"vacuumed (files deleted): "
                  f"{lake.vacuum(args.lake, args.vacuum_retention_hours)}")
    except ValueError as exc:
        print(f"groupcoord export: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:            # a damaged log, a lake conflict, a Spark worker failure
        print(f"groupcoord export: failed: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def report_main(argv: list[str] | None = None) -> int:
    args = _report_parser().parse_args(argv)
    from .report import build_report
    from .schema import schema_text
    from .session import get_session
    if args.schemas:
        print(schema_text())
        return 0
    try:
        print(build_report(get_session(args.master), args.lake, log_end_path=args.log_end,
                           now_ms=args.now_ms, as_of_ms=args.as_of_ms, bucket_ms=args.bucket_ms,
                           window=args.window, max_rows=args.max_rows, plot_dir=args.plots))
    except ValueError as exc:
        print(f"groupcoord report: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"groupcoord report: failed: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def one_line(exc: BaseException) -> str:
    """The gist of an error. A failure inside a Spark worker arrives wrapped, its message the
    worker's whole traceback: the line naming the original error is what a reader needs."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return (named or lines or [type(exc).__name__])[-1]


COMMANDS = {"export": export_main, "report": report_main}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m groupcoord.spark_export {export|report} ...", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])
