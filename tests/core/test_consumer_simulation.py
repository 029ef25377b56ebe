"""The seeded KIP-848 simulation (consumer_simulation.py): no partition ever has two owners,
live consumers never consume the same partition, and the log rebuilds the live state."""

import os

import pytest

from groupcoord.coordinator import Errors
from groupcoord.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey as ASSIGNMENT,
)
from groupcoord.coordinator.reconcile import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
)

from .consumer_simulation import ConsumerSimulation

# A soak: GROUPCOORD_CONSUMER_SIM_SEEDS=500 GROUPCOORD_CONSUMER_SIM_STEPS=3000 pytest <this file>
SEEDS = int(os.environ.get("GROUPCOORD_CONSUMER_SIM_SEEDS", "4"))
STEPS = int(os.environ.get("GROUPCOORD_CONSUMER_SIM_STEPS", "1200"))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_seeded_consumer_group_runs_keep_every_invariant(seed):
    sim = ConsumerSimulation(seed)
    sim.run(STEPS)
    # The runs reach the interesting paths, not just the happy one.
    assert sim.errors[Errors.NONE] > 500
    assert sim.errors[Errors.UNKNOWN_MEMBER_ID] and sim.lost_responses
    # Restarts whose catalog came late: requests waited (whether a timer also fenced a member
    # meanwhile depends on the seed: test_members_are_fenced_while_a_restart_waits_for_the_catalog).
    assert sim.errors[Errors.COORDINATOR_LOAD_IN_PROGRESS]
    assert sim.group_config_changes  # groups' own settings came and went meanwhile
    # Catalog changes taken as changes alone rebalanced groups (and matched the whole's).
    assert sim.catalog_changes and sim.catalog_change_records
    states = {r.value.state for r in sim.records if type(r.key) is ASSIGNMENT and r.value}
    assert states == {STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS}


def test_members_are_fenced_while_a_restart_waits_for_the_catalog():
    # A restarted shard answers COORDINATOR_LOAD_IN_PROGRESS until the runtime hands it the
    # catalog, and meanwhile its session timers still fence members. Most runs get there; not
    # every seed of a soak does (seed 34 of 100 at 3,000 steps did not), so one that does is
    # named here rather than asked of every seed.
    sim = ConsumerSimulation(0)
    sim.run(STEPS)
    assert sim.fenced_without_catalog


@pytest.mark.parametrize("seed", range(2))
def test_batched_assignments_keep_every_invariant(seed):
    # Targets recomputed at most once a second (Kafka 4.3's default interval): members reconcile
    # towards older targets meanwhile, and still no partition has two owners.
    sim = ConsumerSimulation(seed, assignment_interval_ms=1_000)
    sim.run(1_200)
    assert sim.errors[Errors.NONE] > 500
    states = {r.value.state for r in sim.records if type(r.key) is ASSIGNMENT and r.value}
    assert states == {STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS}


def test_a_seed_replays_a_run_exactly():
    a, b = ConsumerSimulation(11), ConsumerSimulation(11)
    a.run(400)
    b.run(400)
    assert a.records == b.records
