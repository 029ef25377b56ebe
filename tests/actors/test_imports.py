"""Every module of ``groupcoord.actors`` imports first, on its own: a Ray worker imports just the
module of the actor class it runs (``http_actor``, ``partition_actor``), and a network process
just ``network_process``. The package's public API is imported lazily (``actors/__init__``), so
an import cycle through it shows only when a module is the first one imported."""

from __future__ import annotations

import json
import subprocess
import sys

# In a process of its own: forgetting modules would split this test session's classes in two.
EACH_FIRST = """
import importlib, json, pkgutil, sys
import groupcoord.actors
names = sorted(m.name for m in pkgutil.iter_modules(groupcoord.actors.__path__))
failed = {}
for name in names:
    for loaded in [n for n in sys.modules if n.split(".")[:2] == ["groupcoord", "actors"]]:
        del sys.modules[loaded]  # the package too: its attributes name the modules loaded
    try:
        importlib.import_module("groupcoord.actors." + name)
    except ImportError as exc:
        failed[name] = repr(exc)
print(json.dumps({"names": names, "failed": failed}))
"""


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout


def test_every_module_imports_first():
    result = json.loads(_run(EACH_FIRST))
    assert len(result["names"]) > 30  # the package's modules were found
    assert result["failed"] == {}


def test_a_network_process_imports_no_ray():
    code = "import sys, groupcoord.actors.network_process; print('ray' in sys.modules)"
    assert _run(code).strip() == "False"
