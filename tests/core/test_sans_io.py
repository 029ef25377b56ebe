"""The core is sans-IO (DESIGN.md principle 1): importing all of it pulls in no Ray, no event loop,
no clock and no OS module, checked in a fresh interpreter so other tests cannot mask it."""

import ast
import pathlib
import pkgutil
import subprocess
import sys

import groupcoord.coordinator as coordinator

FORBIDDEN = ("ray", "asyncio", "time", "os", "random", "threading", "socket", "subprocess")


def test_importing_the_core_loads_no_io_modules():
    modules = ["groupcoord.coordinator"] + [
        f"groupcoord.coordinator.{m.name}"
        for m in pkgutil.walk_packages(coordinator.__path__)
        if not m.name.startswith("_")
    ]
    modules += [
        "groupcoord.coordinator.assignors." + m.name
        for m in pkgutil.iter_modules([p + "/assignors" for p in coordinator.__path__])
    ]
    probe = (
        "import sys\n"
        f"before = set(sys.modules)\n"
        f"for name in {modules!r}: __import__(name)\n"
        "import groupcoord.coordinator.shard\n"
        f"print(sorted(set(sys.modules) & set({FORBIDDEN!r}) - before))\n"
    )
    # The interpreter imports os (and maybe time) at start-up, so this probe sees only what the
    # core adds transitively (ray, asyncio, ...); the source scan below catches direct imports.
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", f"the core imports {out}"


def test_no_core_module_imports_an_io_module():
    root = pathlib.Path(coordinator.__path__[0])
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
