"""Rules of the package's layout, checked on its source as imported (the checkout or the wheel): a module
holds one concept, named by its docstring's first line, and one over 400 lines is listed in :data:`LONG` with
the reason it is still one concept; no module imports another module's private (underscored) name; test files
have unique names, so plain ``pytest`` and ``python -m pytest`` both collect them (rootdir import mode)."""

import ast
import importlib
from pathlib import Path

import pytest

PACKAGES = ("coupled_curvature", "coupled_curvature.numeric", "coupled_curvature.symbolic", "coupled_curvature.proofs")
MAX_LINES = 400
#: modules over MAX_LINES lines, each with the reason it stays one module (path relative to the package folder)
LONG: dict[str, str] = {
    "numeric/core/hvp.py": "one engine: the per-batch retained graph that gives g, H_bb w and every dense block "
                           "(per-sample factors, per-head route, assembled from products) and the Krylov products on it",
    "numeric/symmetries/homogeneous.py": "T2's homogeneous maps (layer and neuron rescaling, unit permutation) and "
                                         "function_gap, each public with its Args/Returns/Raises sections",
}


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


def _relative(f: Path) -> str:
    parts = f.parts
    return "/".join(parts[len(parts) - parts[::-1].index("coupled_curvature"):])


def long_modules(files: list[Path], limit: int = MAX_LINES) -> dict[str, int]:
    """``{path relative to the package: line count}`` of the modules over ``limit`` lines."""
    return {_relative(f): n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > limit}


def test_a_long_module_is_listed_with_its_reason():
    long = long_modules(_modules())
    unlisted = sorted(set(long) - set(LONG))
    assert not unlisted, f"modules over {MAX_LINES} lines with no reason in LONG: {unlisted}; split them by concept"
    stale = sorted(set(LONG) - set(long))
    assert not stale, f"LONG lists modules that are no longer over {MAX_LINES} lines: {stale}"
    assert all(len(why.split()) >= 5 for why in LONG.values())


def test_the_length_check_can_fail():
    files = _modules()
    engine = next(f for f in files if f.name == "engine.py")
    assert "numeric/core/engine.py" in long_modules(files, limit=10)
    assert _relative(engine) == "numeric/core/engine.py"


def test_every_module_names_its_concept():
    bare = [_relative(f) for f in _modules() if not (ast.get_docstring(ast.parse(f.read_text(encoding="utf-8")))
                                                     or "").strip()]
    assert not bare, f"modules without a docstring naming what they hold: {bare}"


def test_test_files_have_unique_names():
    """Test folders have no __init__.py, so two test files of one name stop collection ('import file mismatch')."""
    names: dict[str, list[str]] = {}
    for f in Path(__file__).parent.rglob("test_*.py"):
        names.setdefault(f.name, []).append(str(f.relative_to(Path(__file__).parent)))
    twice = {n: ps for n, ps in names.items() if len(ps) > 1}
    assert not twice, f"test files with the same name (rename one): {twice}"


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
