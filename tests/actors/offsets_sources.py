"""``python:`` offsets sources for the CLI tests (``python:tests.actors.offsets_sources:ends``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Log-end offsets this source knows: only partition 0 of each topic.
ENDS = {("t", 0): 40, ("cli-t", 0): 40}


def ends(pairs: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
    return {tp: ENDS[tp] for tp in pairs if tp in ENDS}


def negative(pairs: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
    return {tp: -1 for tp in pairs}


NOT_CALLABLE = 3
