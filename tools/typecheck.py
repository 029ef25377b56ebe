"""Type-check groupcoord's public API with mypy (part of ``make test``).

The source folders are installed under the namespace ``groupcoord`` through setuptools'
package-dir mapping (``coordinator/`` is ``groupcoord.coordinator``), which mypy cannot follow
through an editable install. So this builds ``build/typecheck/groupcoord/<layer>`` as symbolic
links to the folders and runs mypy there on ``tests/typecheck/``: programs that use the public
API the way the README shows. Imported modules are analysed but their bodies are not reported
(``follow_imports = "silent"`` in pyproject's ``[tool.mypy]``), so what fails is a use of the
public API that its annotations do not allow — an annotation that lies, or a README example
that no longer fits the API. Exit code: mypy's.
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ("coordinator", "storage", "actors", "spark_export", "wire")
TREE = os.path.join(ROOT, "build", "typecheck")


def build_tree() -> str:
    package = os.path.join(TREE, "groupcoord")
    os.makedirs(package, exist_ok=True)
    for layer in LAYERS:
        link, target = os.path.join(package, layer), os.path.join(ROOT, layer)
        if os.path.islink(link) and os.readlink(link) != target:
            os.remove(link)
        if os.path.isdir(target) and not os.path.lexists(link):
            os.symlink(target, link)
    return TREE


def main() -> int:
    tree = build_tree()
    usage = os.path.join(ROOT, "tests", "typecheck")
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        os.path.join(ROOT, "pyproject.toml"),
        usage,
    ]
    env = {**os.environ, "MYPYPATH": tree}
    return subprocess.run(command, cwd=tree, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
