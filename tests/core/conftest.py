"""Core tests never start Ray (Ray Serve's rule for unit tests): ``ray.init`` is forbidden here.

The whole suite runs in one process, so Ray may already be imported by the actor tests; what the
core must never do is *use* it. That the core does not even import it is checked separately, in a
fresh interpreter (test_sans_io.py).
"""

import sys

import pytest


def _forbidden(*args, **kwargs):
    raise AssertionError("core tests must not start Ray")


@pytest.fixture(autouse=True)
def _forbid_ray_init(monkeypatch):
    ray = sys.modules.get("ray")
    if ray is not None:
        monkeypatch.setattr(ray, "init", _forbidden)
    yield
