"""symbolic/ never imports torch and numeric/ never imports sympy, checked in fresh interpreters."""

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


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


@pytest.mark.parametrize("package, forbidden", [("coupled_curvature.numeric", "sympy"), ("coupled_curvature.symbolic", "torch")])
def test_no_static_import_of_the_forbidden_library(package, forbidden):
    folder = Path(importlib.import_module(package).__path__[0])  # the checkout's or the installed copy
    offenders = [
        f"{p.name}:{i}"
        for p in folder.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if line.strip().startswith((f"import {forbidden}", f"from {forbidden}"))
    ]
    assert offenders == []


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
