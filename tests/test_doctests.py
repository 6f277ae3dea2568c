"""Every runnable example in every module's docstring (front door, symbolic, numeric, proofs)
runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import coupled_curvature


def _modules() -> list[str]:
    names = ["coupled_curvature"]  # symbolic, numeric and proofs are sub-packages of it (src/coupled_curvature)
    for info in pkgutil.walk_packages(coupled_curvature.__path__, "coupled_curvature."):
        names.append(info.name)
    return sorted(set(names) - {"coupled_curvature.__main__"})  # __main__ runs the CLI on import


MODULES = _modules()


def test_every_layer_is_collected():
    prefixes = {m.split(".")[1] if "." in m else "" for m in MODULES}
    assert {"symbolic", "numeric", "proofs", "commands", "reporting", "base", "cli"} <= prefixes


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
