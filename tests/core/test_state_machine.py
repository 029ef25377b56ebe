"""The five-state machine (spec §3): every legal and every illegal move, and what drives them."""

import itertools

import pytest

from groupcoord.coordinator import GroupState, IllegalStateTransition
from groupcoord.coordinator.group import VALID_PREVIOUS_STATES, Group

S = GroupState
LEGAL = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
} | {(source, S.DEAD) for source in S}


def test_table_matches_the_spec():
    table = {
        (source, target) for target, sources in VALID_PREVIOUS_STATES.items() for source in sources
    }
    assert table == LEGAL


@pytest.mark.parametrize("source,target", list(itertools.product(S, S)), ids=lambda s: s.value)
def test_every_move(source, target):
    group = Group("g", now_ms=0, state=source)
    if (source, target) in LEGAL:
        group.transition_to(target, now_ms=42)
        assert group.state is target and group.state_timestamp_ms == 42
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target, now_ms=42)
        assert group.state is source and group.state_timestamp_ms == 0


def test_state_strings_are_kafkas():
    assert [s.value for s in S] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]
    assert S.STABLE == "Stable"
