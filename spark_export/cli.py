"""``groupcoord export`` and ``groupcoord report`` (dispatched here by actors/cli.py), and
``python -m groupcoord.spark_export export|report`` for spark-submit.

Both return a process exit code: 0 on success, 2 on bad input (a ValueError, with its message),
1 on a failure (a damaged log, a lake conflict, a Spark worker failure); either way the error is
one line on stderr. Paths are checked before Spark starts, so a typo costs no JVM start-up.

Spark's own output (the JVM's start-up warnings, an executor's error with the Python worker's
traceback and the JVM stack) goes to a log file, not the terminal: the JVM and its Python
workers inherit file descriptor 2, so ``spark_log`` points it at the file while Python's own
``sys.stderr`` keeps the terminal. A failure's line names that file; a success deletes it.
``--verbose`` leaves Spark's output on the terminal instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from typing import NoReturn

from pyspark.sql import SparkSession

from groupcoord.coordinator import burrow

from . import lake
from .exporter import ExportConfig, check_log_ids, export
from .report import COLUMNS_HELP, build_report
from .schema import schema_text
from .session import get_session
from .source import partition_dirs
from .timefmt import parse_time_ms


class _UsageError(ValueError):
    """The command line is wrong; the message says how, in one line."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the command, not the whole usage text
    (``--help`` still prints it)."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | None:
    """The parsed arguments, or None once a usage error has been printed as one line."""
    try:
        return parser.parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return None


def _at_least(minimum: int):
    """An argparse ``type``: an int no smaller than ``minimum``, checked before Spark starts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _export_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="groupcoord export",
        description="Export committed offsets from the partition "
        "logs into Delta tables, exactly once.",
    )
    parser.add_argument("--logs", required=True, help="log directory (holds partition-<n>/)")
    parser.add_argument("--lake", required=True, help="lake directory (Delta tables)")
    parser.add_argument(
        "--cluster",
        default="default",
        help="cluster name in every row; the lake exports one set of logs per name "
        "(other logs, or logs wiped and started again, need another name)",
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default local[2]; spark-submit sets its own)"
    )
    parser.add_argument(
        "--max-segments-per-round",
        type=_at_least(1),
        default=64,
        help="log segments read per Spark round (default: %(default)s)",
    )
    parser.add_argument(
        "--compact", action="store_true", help="afterwards, compact small files of closed days"
    )
    parser.add_argument(
        "--vacuum-retention-hours",
        type=_at_least(0),
        default=None,
        help="afterwards, vacuum files unreferenced for this many hours",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's own log on stderr (default: kept in a file that a failure names)",
    )
    return parser


def _report_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="groupcoord report",
        description="Analytics over the exported lake. Times are "
        "ISO-8601 in UTC (2026-11-23T13:45:00Z); a time without a zone is taken as UTC.",
        epilog=COLUMNS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lake", required=True, help="lake directory (Delta tables)")
    parser.add_argument(
        "--cluster",
        default=None,
        help="the cluster to report on (the name it was exported as); needed when the lake "
        "holds more than one",
    )
    parser.add_argument(
        "--log-end",
        default=None,
        help="Parquet or CSV of (topic, partition, timestamp_ms, log_end_offset)"
        " for lag and Burrow status",
    )
    parser.add_argument(
        "--now", type=_time_arg, default=None, help="evaluation time, ISO-8601 (default: now)"
    )
    parser.add_argument(
        "--as-of",
        type=_time_arg,
        default=None,
        help="show committed offsets as of this time, ISO-8601",
    )
    # The epoch-millisecond spellings of earlier versions, kept for scripts.
    parser.add_argument("--now-ms", type=int, dest="now", help=argparse.SUPPRESS)
    parser.add_argument("--as-of-ms", type=int, dest="as_of", help=argparse.SUPPRESS)
    parser.add_argument(
        "--bucket-ms",
        type=_at_least(1),
        default=None,
        help="activity and lag bucket width in ms (default: from the time span of the commits)",
    )
    parser.add_argument(
        "--window",
        type=_at_least(1),
        default=burrow.DEFAULT_WINDOW,
        help="Burrow window: slots per partition (default "
        f"{burrow.DEFAULT_WINDOW}, Burrow's shipped 'intervals')",
    )
    parser.add_argument(
        "--min-distance-ms",
        type=_at_least(0),
        default=burrow.DEFAULT_MIN_DISTANCE_MS,
        help="Burrow min-distance: commits closer than this share one window "
        f"slot (default {burrow.DEFAULT_MIN_DISTANCE_MS}, as shipped)",
    )
    parser.add_argument(
        "--max-rows", type=_at_least(1), default=20, help="rows per section (default: %(default)s)"
    )
    parser.add_argument("--plots", default=None, help="write PNG plots into this folder")
    parser.add_argument("--master", default=None, help="Spark master (default local[2])")
    parser.add_argument("--schemas", action="store_true", help="print the table schemas only")
    parser.add_argument("--verbose", action="store_true", help="show Spark's own log on stderr")
    return parser


def _time_arg(text: str) -> int:
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_dir(path: str, what: str, writable: bool = False) -> None:
    """A ValueError unless ``path`` is a directory this process can read (and write)."""
    if not os.path.exists(path):
        raise ValueError(f"{what} {path!r} does not exist")
    if not os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK | (os.W_OK if writable else 0)):
        raise ValueError(f"{what} {path!r} is not {'writable' if writable else 'readable'}")


def check_creatable_dir(path: str, what: str) -> None:
    """``check_dir(writable)`` for an existing ``path``; else its nearest existing ancestor
    must be a writable directory, so the export can create it."""
    if os.path.exists(path):
        check_dir(path, what, writable=True)
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(
            f"{what} {path!r} cannot be created: {parent!r} is not a writable directory"
        )


@contextlib.contextmanager
def spark_log(verbose: bool):
    """Sends what Spark prints (through file descriptor 2) to a temporary file while it runs;
    yields that file's path, or None when ``verbose`` or when the JVM is not this process's
    to start: a session is already running (its JVM keeps the descriptor it started with), or
    spark-submit started it."""
    if (
        verbose
        or SparkSession.getActiveSession() is not None
        or "PYSPARK_GATEWAY_PORT" in os.environ
    ):
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="groupcoord-spark-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    # Python's own stderr keeps the terminal when it writes through descriptor 2.
    try:
        own = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a test's capture object: leave it
        own = False
    previous = sys.stderr
    if own:
        sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield path
    finally:
        if own:
            sys.stderr.close()
            sys.stderr = previous
        os.dup2(saved, 2)
        os.close(saved)


def _run(command: str, log_path: str | None, work) -> int:
    """``work()``'s exit code, or one line on stderr for an error: 2 for bad input, 1 for a
    failure (naming Spark's log, which is kept then; otherwise it is deleted)."""
    code, line = 0, None
    try:
        work()
    except ValueError as exc:
        code, line = 2, f"groupcoord {command}: {exc}"
    except Exception as exc:  # a damaged log, a lake conflict, a Spark worker failure
        code, line = 1, f"groupcoord {command}: failed: {one_line(exc)}"
        if log_path:
            line += f" (Spark's log: {log_path})"
    if line:
        print(line, file=sys.stderr, flush=True)
    if log_path and code != 1:
        os.remove(log_path)
    return code


def export_main(argv: list[str] | None = None) -> int:
    args = _parse(_export_parser(), argv)
    if args is None:
        return 2
    try:
        check_dir(args.logs, "log directory")
        check_creatable_dir(args.lake, "lake directory")
        config = ExportConfig(
            cluster=args.cluster, max_segments_per_round=args.max_segments_per_round
        )
    except ValueError as exc:
        print(f"groupcoord export: {exc}", file=sys.stderr)
        return 2
    # Logs the lake did not export are refused before Spark starts, too (export() checks again).
    code = _run(
        "export", None, lambda: check_log_ids(partition_dirs(args.logs), args.lake, config.cluster)
    )
    if code:
        return code

    def work() -> None:
        spark = get_session(args.master)
        say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
        result = export(spark, args.logs, args.lake, config, progress=say)
        print(result.summary(), flush=True)
        if args.compact:
            print(f"compacted (files removed): {lake.compact(args.lake)}")
        if args.vacuum_retention_hours is not None:
            print(
                f"vacuumed (files deleted): {lake.vacuum(args.lake, args.vacuum_retention_hours)}"
            )

    with spark_log(args.verbose) as log_path:
        return _run("export", log_path, work)


def report_main(argv: list[str] | None = None) -> int:
    args = _parse(_report_parser(), argv)
    if args is None:
        return 2
    if args.schemas:
        print(schema_text())
        return 0
    try:
        check_dir(args.lake, "lake directory")
        if args.plots:
            check_creatable_dir(args.plots, "plots directory")
        lake.check_tables(args.lake)
        if args.log_end and not os.path.exists(args.log_end):
            raise ValueError(f"log-end file {args.log_end!r} does not exist")
    except ValueError as exc:
        print(f"groupcoord report: {exc}", file=sys.stderr)
        return 2

    def work() -> None:
        print(
            build_report(
                get_session(args.master),
                args.lake,
                log_end_path=args.log_end,
                now_ms=args.now,
                as_of_ms=args.as_of,
                bucket_ms=args.bucket_ms,
                window=args.window,
                min_distance_ms=args.min_distance_ms,
                max_rows=args.max_rows,
                plot_dir=args.plots,
                cluster=args.cluster,
            ),
            flush=True,
        )

    with spark_log(args.verbose) as log_path:
        return _run("report", log_path, work)


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
