"""Core tests are Ray-free: importing ray here, or anything that does, fails the session."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _forbid_ray():
    yield
    assert "ray" not in sys.modules, "core tests must not import ray"
