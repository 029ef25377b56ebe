"""What every benchmark's results file says about its run, and how it is written."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime


def stamp() -> dict:
    """The run's date (UTC, ISO-8601) and machine (architecture, cores, Python)."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
    }


def write_results(path: str, fields: dict) -> None:
    """Write ``stamp()`` and ``fields`` to ``path`` as indented JSON, and say so."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(stamp() | fields, f, indent=2)
    print(f"wrote {path}")
