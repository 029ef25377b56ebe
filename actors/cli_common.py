"""What every ``groupcoord`` command shares: one-line usage errors and reaching the deployment.

Exit codes of ``groups``: 0 done; 1 the operation failed (an unknown group, a refused reset
or delete, an offsets source that cannot be reached, a partition that is not serving); 2 a
usage error (an unknown flag, a bad value or file) or no deployment reached (no Ray cluster,
several and no ``--address``, nothing in that namespace, an actor of it that does not answer).
Every command exits 1, with one line, when an actor of the deployment dies or fails under it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from .bootstrap import Deployment, connect

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(ValueError):
    """The command line is wrong; the message says how, in one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one ``UsageError`` line naming the command and what is wrong,
    instead of the whole usage text (``--help`` still prints it)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def add_common(parser: argparse.ArgumentParser, address_help: str, namespace: str) -> None:
    parser.add_argument("--namespace", default=namespace, help="the deployment's Ray namespace")
    parser.add_argument("--address", default=None, help=address_help)
    parser.add_argument("--json", action="store_true", help="one JSON document, no tables")


def connect_and_say(namespace: str, address: str | None) -> Deployment:
    """The deployment, saying on stderr where it looks first (connecting can wait) and then
    which cluster and namespace were reached."""
    where = address or os.environ.get("RAY_ADDRESS")
    print(
        f"groupcoord: connecting to Ray at {where} ..."
        if where
        else "groupcoord: looking for Ray on this host ...",
        file=sys.stderr,
        flush=True,
    )
    deployment = connect(namespace, address)
    print(
        f"groupcoord: Ray at {deployment.ray_address} ({deployment.ray_source}), namespace "
        f"{deployment.namespace!r}, deployment {deployment.cluster_id or '?'}",
        file=sys.stderr,
        flush=True,
    )
    return deployment
