"""End-offset sources for the live lag tests: plain functions of the ``EndOffsetsFn`` type,
importable by Ray workers (the HTTP actor calls them)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence


def file_end_offsets(path: str, asked: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
    """The end offsets a test wrote to ``path`` as ``{"topic:partition": offset}``."""
    with open(path) as f:
        table = json.load(f)
    return {(t, p): table[f"{t}:{p}"] for t, p in asked if f"{t}:{p}" in table}


def write_end_offsets(path, offsets: Mapping[tuple[str, int], int]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump({f"{t}:{p}": o for (t, p), o in offsets.items()}, f)
    os.replace(tmp, path)  # atomic: the sampler never reads half a file


def failing_end_offsets(asked: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
    raise ConnectionError("broker unreachable")


def hanging_end_offsets(asked: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
    time.sleep(2.0)
    return {tp: 1 for tp in asked}
