"""The layers of SPEC §5 import one way.

The import-linter contracts in ``pyproject.toml`` (run here as CI runs them, ``lint-imports``) state
what may import what; the probes in fresh interpreters check what no static graph can see: that
importing and running numeric/ (symbolic/) loads no sympy (torch), dynamic imports included.
"""

import importlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
#: the contracts of pyproject.toml, each of which lint-imports must report
CONTRACTS = PYPROJECT.read_text(encoding="utf-8").split("\n[[tool.importlinter.contracts]]\n")[1:]


_PROBE = textwrap.dedent(
    """
    import builtins, importlib, os, pkgutil, sys
    sys.path[:0] = {extra!r}
    offenders = set()
    _import = builtins.__import__

    def watch(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.split(".")[0] == {forbidden!r}:
            caller = sys._getframe(1).f_code.co_filename
            if os.path.realpath(caller).startswith(FOLDER):
                offenders.add(os.path.basename(caller))
        return _import(name, globals, locals, fromlist, level)

    pkg = importlib.import_module({package!r})
    FOLDER = os.path.realpath(pkg.__path__[0])
    builtins.__import__ = watch
    for info in pkgutil.walk_packages(pkg.__path__, {package!r} + "."):
        importlib.import_module(info.name)
    loaded_by_import = sorted(m for m in sys.modules if m.split(".")[0] == {forbidden!r})
    {exercise}
    print("LOADED:" + ",".join(loaded_by_import))
    print("IMPORTERS:" + ",".join(sorted(offenders)))
    """
)


def forbidden_modules(package: str, forbidden: str, *, extra_path=(), exercise: str = "") -> tuple[list[str], list[str]]:
    """In a fresh interpreter, import every module of ``package``, then run ``exercise``.

    Returns the ``forbidden`` modules loaded by importing the package, and the package's
    own files that imported ``forbidden`` at any time (import time or while exercising).
    Third-party code may load ``forbidden`` on its own during the exercise (torch's
    autograd imports sympy for symbolic shapes); that is not the package importing it.
    """
    code = _PROBE.format(package=package, forbidden=forbidden, extra=[str(p) for p in extra_path], exercise=exercise)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    fields = dict(ln.split(":", 1) for ln in out.stdout.splitlines() if ln.startswith(("LOADED:", "IMPORTERS:")))
    return [m for m in fields["LOADED"].split(",") if m], [m for m in fields["IMPORTERS"].split(",") if m]


def test_numeric_never_imports_sympy():
    run = (
        "import torch; from coupled_curvature.numeric.core.diagnostics import diagnose\n"
        "net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))\n"
        "diagnose(net, torch.nn.CrossEntropyLoss(), (torch.randn(5, 2), torch.tensor([0, 1, 0, 1, 1])))"
    )
    assert forbidden_modules("coupled_curvature.numeric", "sympy", exercise=run) == ([], [])


def test_symbolic_never_imports_torch():
    run = "import sympy; from coupled_curvature.symbolic import witness; witness(sympy.Matrix([[1, 0], [0, 2]]))"
    assert forbidden_modules("coupled_curvature.symbolic", "torch", exercise=run) == ([], [])


def _link_tree(source: Path, target: Path) -> None:
    """``target`` mirrors ``source``: real folders, each file a link to the original."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            _link_tree(entry, target / entry.name)
        elif entry.suffix == ".py":
            (target / entry.name).symlink_to(entry)


def installed_layout(root: Path) -> Path:
    """The package under test (src/coupled_curvature, with symbolic/, numeric/ and proofs/ inside),
    linked under ``root``, so that a meta-test can plant a module without touching the sources."""
    _link_tree(Path(importlib.import_module("coupled_curvature").__path__[0]), root / "coupled_curvature")
    return root


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contracts, on the package laid out under ``root``."""
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe) if exe.exists() else shutil.which("lint-imports") or "lint-imports"]
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(root)}
    return subprocess.run([*command, "--no-cache", str(PYPROJECT)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_import_contracts_hold(tmp_path):
    out = lint_imports(installed_layout(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(CONTRACTS)} kept, 0 broken" in out.stdout


@pytest.mark.parametrize("where, code, contract", [
    ("symbolic/planted.py", "def f():\n    import torch\n    return torch\n", "symbolic never imports torch BROKEN"),
    ("numeric/planted.py", "import sympy\n", "numeric never imports sympy"),
    ("numeric/planted.py", "from coupled_curvature.reporting import figures\n", "numeric never imports sympy"),
    ("numeric/planted.py", "def f():\n    from coupled_curvature.theorems import get\n", "numeric never imports sympy"),
    ("cli.py", "from coupled_curvature.numeric.core import diagnostics\n", "the ccurv parser module"),
    ("reporting/planted.py", "from coupled_curvature.proofs.crosschecks import rescaling_sweep\n",
     "reporting renders the data it is given"),
    ("symbolic/planted.py", "from coupled_curvature.proofs import catalogue\n", "symbolic and numeric never import"),
    ("numeric/planted.py", "from coupled_curvature.commands import report\n", "symbolic and numeric never import"),
    ("commands/planted.py", "from coupled_curvature.integrations import lightning\n",
     "the framework callbacks (integrations, optional extras) are glue on top"),
    ("reporting/planted.py", "from coupled_curvature.commands import check\n", "layers: front door"),
    ("base/planted.py", "def f():\n    from coupled_curvature.numeric.core import diagnostics\n", "layers: front door"),
    ("base/errors.py", "def f():\n    from coupled_curvature.base import output\n", "inside base"),
    ("base/planted.py", "import torch\n", "the base imports neither torch nor sympy"),
])
def test_the_contracts_can_fail(tmp_path, where, code, contract):
    """Meta-test: a planted import fails lint-imports, naming the contract it breaks (and only
    contracts that forbid it: a planted import into numeric may break three, the layers contract included)."""
    root = installed_layout(tmp_path)
    planted = root / "coupled_curvature" / where
    text = planted.read_text() if planted.exists() else ""
    planted.unlink(missing_ok=True)
    planted.write_text(text + code)
    out = lint_imports(root)
    assert out.returncode == 1, out.stdout + out.stderr
    broken = [ln for ln in out.stdout.splitlines() if ln.endswith("BROKEN") or "BROKEN (" in ln]
    assert broken and any(ln.startswith(contract) for ln in broken), out.stdout
    kept = [ln for ln in out.stdout.splitlines() if ln.endswith("KEPT") or "KEPT (" in ln]
    assert len(kept) + len(broken) == len(CONTRACTS) and len(broken) <= 3, out.stdout


def test_the_check_can_fail(tmp_path):
    """Meta-test: planted violations, at import time and at call time, are caught."""
    pkg = tmp_path / "planted_numeric"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "clean.py").write_text("import math\n")
    (pkg / "leaky.py").write_text("def f():\n    return 1\nimport sympy  # the violation\n")
    loaded, importers = forbidden_modules("planted_numeric", "sympy", extra_path=[tmp_path])
    assert "sympy" in loaded and importers == ["leaky.py"]
    (pkg / "leaky.py").write_text("def f():\n    import sympy\n    return sympy.Integer(1)\n")
    exercise = "import planted_numeric.leaky as m; m.f()"
    loaded, importers = forbidden_modules("planted_numeric", "sympy", extra_path=[tmp_path], exercise=exercise)
    assert loaded == [] and importers == ["leaky.py"]
    (pkg / "leaky.py").unlink()
    assert forbidden_modules("planted_numeric", "sympy", extra_path=[tmp_path]) == ([], [])
