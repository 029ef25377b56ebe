"""Runs the seeded simulator (tests/core/simulation.py) over many seeds.

The seed is in every failure message; rerun one with
``pytest tests/core/test_simulation.py -k 'seed_17'`` or ``Simulation(17).run(2000)``.
"""

import os

import pytest

from .simulation import Simulation

SEEDS = int(os.environ.get("GROUPCOORD_SIM_SEEDS", "200"))
STEPS = int(os.environ.get("GROUPCOORD_SIM_STEPS", "2000"))


@pytest.mark.parametrize("seed", range(SEEDS), ids=lambda s: f"seed_{s}")
def test_simulation_keeps_invariants(seed):
    sim = Simulation(seed)
    sim.run(STEPS)
    assert sim.steps == STEPS


def test_same_seed_reproduces_the_same_run():
    a, b = Simulation(7), Simulation(7)
    a.run(500)
    b.run(500)
    assert a.records == b.records and a.replies == b.replies
