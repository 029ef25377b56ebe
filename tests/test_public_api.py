"""Every name a layer exports (its ``__all__``) is fully annotated, so ``tools/typecheck.py``
can check programs against it: each public function, and each public method of an exported
class, annotates every parameter and its return type."""

from __future__ import annotations

import importlib
import inspect

import pytest

LAYERS = ["groupcoord.coordinator", "groupcoord.storage", "groupcoord.actors", "groupcoord.wire"]


def _public_callables():
    for layer in LAYERS:
        module = importlib.import_module(layer)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                yield f"{layer}.{name}", value
            elif inspect.isclass(value) and value.__module__.startswith("groupcoord."):
                for attr, member in vars(value).items():
                    if inspect.isfunction(member) and (
                        not attr.startswith("_") or attr == "__init__"
                    ):
                        yield f"{layer}.{name}.{attr}", member


def _missing(function) -> list[str]:
    signature = inspect.signature(function)
    missing = [
        p.name
        for p in signature.parameters.values()
        if p.annotation is inspect.Parameter.empty and p.name not in ("self", "cls")
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_every_public_callable_is_annotated():
    unannotated = {name: _missing(f) for name, f in _public_callables() if _missing(f)}
    assert not unannotated, "\n".join(f"{name}: {', '.join(m)}" for name, m in unannotated.items())


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_exports_something(layer):
    assert importlib.import_module(layer).__all__
