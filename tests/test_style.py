"""Two rules of the package's layout, checked on its source as imported (the checkout or the wheel):
every module stays under 400 lines, and no module imports another module's private (underscored)
name."""

import ast
import importlib
from pathlib import Path

import pytest

PACKAGES = ("coupled_curvature", "coupled_curvature.numeric", "coupled_curvature.symbolic", "coupled_curvature.proofs")
MAX_LINES = 400


def _modules() -> list[Path]:
    files: set[Path] = set()
    for name in PACKAGES:
        for folder in importlib.import_module(name).__path__:
            files.update(Path(folder).rglob("*.py"))
    return sorted(files)


def private_imports(source: str) -> list[str]:
    """The underscored names that ``source`` imports from a ``coupled_curvature`` module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coupled_curvature"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_the_package_is_found():
    files = _modules()
    assert len(files) > 100
    assert any(f.name == "engine.py" for f in files)


def test_every_module_is_under_the_line_limit():
    long = {str(f): n for f in _modules() if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_module_imports_a_private_name_of_another():
    found = {str(f): bad for f in _modules() if (bad := private_imports(f.read_text(encoding="utf-8")))}
    assert not found, f"private names imported across modules: {found}"


@pytest.mark.parametrize("source, expected", [
    ("from coupled_curvature.numeric.x import _helper, public", ["coupled_curvature.numeric.x._helper"]),
    ("from coupled_curvature.commands._common import say as _say", []),  # a private module, a public name
    ("from coupled_curvature import __version__", []),
    ("from torch import _C", []),  # outside the package
])
def test_the_private_import_check_can_fail(source, expected):
    assert private_imports(source) == expected
