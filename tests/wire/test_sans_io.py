"""The wire layer is sans-IO (DESIGN.md): no module in wire/ imports a socket, event loop, clock,
OS or thread module, and importing it adds none beyond what kio itself loads. (kio's writers
import asyncio for a type alias only, and kio imports hypothesis when it is installed, to register
strategies, so the run-time probe takes kio's own imports as its baseline.)"""

import ast
import pathlib
import pkgutil
import subprocess
import sys

import groupcoord.wire as wire

FORBIDDEN = (
    "ray",
    "asyncio",
    "time",
    "os",
    "random",
    "threading",
    "socket",
    "subprocess",
    "selectors",
)
KIO_BASELINE = (
    "kio.index",
    "kio.serial",
    "kio.serial.readers",
    "kio.schema.errors",
    "kio.static.primitive",
)


def test_no_wire_module_imports_an_io_module():
    offenders = []
    for path in sorted(pathlib.Path(wire.__path__[0]).rglob("*.py")):
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


def test_importing_the_wire_layer_adds_no_io_module_beyond_kio():
    modules = ["groupcoord.wire"] + [
        f"groupcoord.wire.{m.name}" for m in pkgutil.iter_modules(wire.__path__)
    ]
    probe = (
        "import sys\n"
        f"for name in {KIO_BASELINE!r}: __import__(name)\n"
        "before = set(sys.modules)\n"
        f"for name in {modules!r}: __import__(name)\n"
        "from groupcoord.wire import apis\n"
        "for key, (low, high) in apis.SUPPORTED_VERSIONS.items():\n"
        "    for version in range(low, high + 1):\n"
        "        apis.request_class(key, version), apis.response_class(key, version)\n"
        f"print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {FORBIDDEN!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", f"the wire layer imports {out}"
