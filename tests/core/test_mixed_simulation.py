"""The seeded simulation with classic consumers beside consumer-protocol ones on the same group
ids (mixed_simulation.py): groups upgrade and downgrade while running, and no partition of a
consumer group ever has two owners; every consumer consumes only what the coordinator has it
hold; the log rebuilds the live state."""

import pytest

from groupcoord.coordinator import Errors

from .mixed_simulation import MixedSimulation


@pytest.mark.parametrize("seed", range(2))
def test_mixed_classic_and_consumer_runs_keep_every_invariant(seed):
    sim = MixedSimulation(seed)
    sim.run(1_000)
    # The runs reach both conversions and classic members served by consumer groups.
    assert sim.migrations["upgraded"] and sim.migrations["downgraded"]
    assert sim.synced_in_consumer_groups and sim.classic_answers.get("heartbeat NONE")
    assert sim.classic_answers.get("heartbeat REBALANCE_IN_PROGRESS")
    assert sim.reloads and sim.errors[Errors.COORDINATOR_LOAD_IN_PROGRESS]
