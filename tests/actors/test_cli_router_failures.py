"""One-shot commands against a deployment whose router dies or is stuck under them: one line
on stderr and a non-zero exit, never Ray's traceback, never a command that waits forever.

The routers here are real Ray actors named as the deployment's router is, standing in for one
that crashed (its process exits inside the call) or whose event loop hangs.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import ray

from groupcoord.actors import bootstrap
from groupcoord.actors.cli import main
from groupcoord.actors.router import ROUTER_NAME

COMMANDS = [["status"], ["topics", "list"], ["groups", "--list"], ["configs", "g"]]


@ray.remote(num_cpus=0, max_restarts=0)
class DyingRouter:
    def describe(self):
        os._exit(1)


@ray.remote(num_cpus=0, max_restarts=0)
class StuckRouter:
    async def describe(self):
        await asyncio.Event().wait()


@ray.remote(num_cpus=0, max_restarts=0)
class TopicsStuckRouter:
    """Found and described as a deployment's router is, but stuck when asked for topics."""

    def describe(self):
        return {"num_partitions": 1, "log_dir": "/nowhere", "cluster_id": "stuck"}

    def kafka_address(self):
        return None

    async def topics(self):
        await asyncio.Event().wait()


def _one_line_error(capsys, argv: list[str], namespace: str) -> str:
    capsys.readouterr()
    assert main([*argv, "--namespace", namespace]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    *_, last = err.strip().splitlines()
    return last


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv))
def test_a_router_that_dies_under_a_command_is_one_line(ray_session, capsys, argv):
    # Before: RayActorError escaped main and printed Ray's multi-line traceback.
    namespace = "gc-dying-router"
    router = DyingRouter.options(name=ROUTER_NAME, namespace=namespace).remote()
    try:
        last = _one_line_error(capsys, argv, namespace)
        assert last.startswith("groupcoord: the deployment failed: ActorDiedError"), last
    finally:
        ray.kill(router)


def test_a_stuck_router_ends_the_command_at_its_bound(ray_session, capsys, monkeypatch):
    # Before: ray.get without a timeout held the command for as long as the router was stuck.
    monkeypatch.setattr(bootstrap, "ANSWER_TIMEOUT_S", 1.0)
    namespace = "gc-stuck-router"
    router = StuckRouter.options(name=ROUTER_NAME, namespace=namespace).remote()
    try:
        for argv in COMMANDS:
            last = _one_line_error(capsys, argv, namespace)
            assert last == "groupcoord: the router did not answer within 1 s", last
    finally:
        ray.kill(router)


def test_a_router_stuck_inside_a_groups_command_ends_it_at_its_bound(
    ray_session, capsys, monkeypatch
):
    monkeypatch.setattr(bootstrap, "ANSWER_TIMEOUT_S", 1.0)
    namespace = "gc-topics-stuck-router"
    router = TopicsStuckRouter.options(name=ROUTER_NAME, namespace=namespace).remote()
    try:
        for argv in (
            ["groups", "--delete-offsets", "--group", "g", "--topic", "t"],
            ["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"],
            ["topics", "list"],
        ):
            last = _one_line_error(capsys, argv, namespace)
            assert last == "groupcoord: the router did not answer within 1 s", last
    finally:
        ray.kill(router)
