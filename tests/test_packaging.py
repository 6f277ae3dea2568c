"""The package as a user imports it: exactly three sub-packages, one copy of every class, a wheel
that holds every module.

CI runs the whole suite a second time from a copy of ``tests/`` outside the checkout, against
the wheel that ``pip install '.[test]'`` installed, with ``CCURV_TEST_INSTALLED=1``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import coupled_curvature
from coupled_curvature.base import errors

PACKAGE = Path(coupled_curvature.__file__).resolve().parent
TESTS_CHECKOUT = Path(__file__).resolve().parents[1]  # the checkout (or CI's copy) these tests run from
CHECKOUT = PACKAGE.parent.parent  # src/coupled_curvature -> the checkout's root (when not installed)
SUBPACKAGES = ("symbolic", "numeric", "proofs")


@pytest.mark.parametrize("name", ["coupled_curvature.coupled_curvature", "coupled_curvature.tests",
                                  "coupled_curvature.bench", "coupled_curvature.docs"])
def test_nothing_else_of_the_checkout_is_importable_as_a_subpackage(name):
    with pytest.raises(ImportError):
        importlib.import_module(name)


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_the_three_subpackages_resolve(sub):
    """...from inside coupled_curvature itself (src/coupled_curvature/<sub> in a checkout, or the install)."""
    mod = importlib.import_module(f"coupled_curvature.{sub}")
    path = Path(mod.__file__).resolve()
    assert path.name == "__init__.py"
    assert path.parent == PACKAGE / sub, (path, PACKAGE)


@pytest.mark.skipif(os.environ.get("CCURV_TEST_INSTALLED") == "1", reason="the checkout's run only")
def test_the_checkout_under_test_is_the_one_imported():
    """pytest puts this checkout's src/ first (pythonpath in pyproject.toml), ahead of any other install,
    an editable one of another checkout included."""
    assert PACKAGE == TESTS_CHECKOUT / "src" / "coupled_curvature", (
        f"coupled_curvature was imported from {PACKAGE}, not from this checkout's src/: run pytest from "
        f"{TESTS_CHECKOUT} (its pyproject.toml puts src/ on the path)")


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_no_second_copy_from_the_checkout_root(sub):
    """From the root, ``import numeric`` (or symbolic, proofs) finds nothing: every module has one name."""
    out = subprocess.run([sys.executable, "-c", f"import {sub}"], cwd=TESTS_CHECKOUT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert out.returncode != 0 and f"No module named '{sub}'" in out.stderr, out.stderr


def test_one_copy_of_every_error_class():
    from coupled_curvature.numeric.core import inputs  # noqa: F401  (raises the package's errors)
    from coupled_curvature.symbolic import exact

    assert exact.InvalidInputError is errors.InvalidInputError is coupled_curvature.InvalidInputError
    with pytest.raises(coupled_curvature.InvalidInputError):
        exact.exact_number("x")


@pytest.mark.parametrize("facade", ["coupled_curvature", "coupled_curvature.numeric"])
def test_every_public_name_resolves(facade):
    mod = importlib.import_module(facade)
    assert mod.__all__
    for name in mod.__all__:
        assert getattr(mod, name) is not None, name


def test_numeric_entry_point():
    from coupled_curvature.numeric import diagnose

    assert diagnose is coupled_curvature.diagnose


@pytest.mark.skipif(os.environ.get("CCURV_TEST_INSTALLED") != "1", reason="only in CI's installed-package run")
def test_the_installed_package_is_the_one_under_test():
    assert "site-packages" in str(PACKAGE), PACKAGE
    for sub in SUBPACKAGES:
        assert "site-packages" in importlib.import_module(f"coupled_curvature.{sub}").__file__


@pytest.mark.skipif(not (CHECKOUT / "pyproject.toml").is_file(), reason="needs the source checkout")
def test_the_wheel_holds_every_module(tmp_path):
    """Every .py below src/ and the Coq sources are in the wheel; nothing of tests/ or bench/."""
    config = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"": "src"} and config["packages"]["find"]["where"] == ["src"]
    tree = tmp_path / "tree"  # build from a copy: setuptools writes build/ beside the sources
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "src"):
        if (CHECKOUT / name).is_dir():
            shutil.copytree(CHECKOUT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(CHECKOUT / name, tree / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(tree)], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    src = CHECKOUT / "src"
    expected = {py.relative_to(src).as_posix() for py in src.rglob("*.py") if "__pycache__" not in py.parts}
    coq = PACKAGE / "proofs" / "coq"
    expected |= {f"coupled_curvature/proofs/coq/{p.relative_to(coq).as_posix()}" for p in
                 [*coq.glob("*.v"), coq / "_CoqProject", coq / "Makefile", *coq.glob("statements/*.txt")]}
    missing = sorted(expected - names)
    assert not missing, (f"missing from the wheel: {missing[:5]}; every package folder under src/ needs an "
                         "__init__.py ([tool.setuptools.packages.find]), data files a [tool.setuptools.package-data] entry")
    assert not any(n.startswith(("tests/", "bench/", "coupled_curvature/tests")) for n in names)
