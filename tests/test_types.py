"""The package type-checks: mypy with pyproject.toml's ``[tool.mypy]`` reports no error.

No module is exempt today. A module not yet clean would be listed in a ``[[tool.mypy.overrides]]`` entry
(``ignore_errors``): the debt. Such a list only shrinks: a listed module that has become clean fails here
until it is taken off, and an error in a module off the list fails the check. A tiny module with a type
error, checked with the same configuration, fails (the control that the check can fail at all); the same
module corrected passes.

The two package runs are slow (about a minute each without mypy's cache, seconds with it); CI runs ``mypy``
itself after ``lint-imports`` (.ci/run). The tests need the checkout's sources (src/), so the copy of the
tests run against the installed wheel skips them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
SRC = ROOT / "src" / "coupled_curvature"

pytestmark = pytest.mark.skipif(not SRC.is_dir(), reason="needs the checkout's src/ (not the installed copy)")

#: ``path:line: error: message  [code]`` as mypy prints it
_ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mypy *args`` from the repository root (where the configuration's paths start)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _config() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["mypy"]


def _debt() -> set[str]:
    """The modules the overrides exempt (``ignore_errors = true``)."""
    listed: set[str] = set()
    for override in _config().get("overrides", []):
        if override.get("ignore_errors"):
            mods = override["module"]
            listed.update([mods] if isinstance(mods, str) else mods)
    return listed


def _module(path: str) -> str:
    """``src/coupled_curvature/a/b.py`` -> ``coupled_curvature.a.b`` (``__init__`` -> the package)."""
    parts = list(Path(path).with_suffix("").parts)
    parts = parts[parts.index("coupled_curvature"):]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ini_without_overrides(path: Path) -> Path:
    """pyproject.toml's ``[tool.mypy]`` as a mypy.ini, the same settings without the overrides."""
    lines = ["[mypy]"]
    for key, value in _config().items():
        if key == "overrides":
            continue
        if isinstance(value, bool):
            value = str(value)
        elif isinstance(value, list):
            value = ", ".join(value)
        lines.append(f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_package_type_checks():
    """``mypy`` as CI runs it (the configuration names the package): no error."""
    run = _mypy("--config-file", str(PYPROJECT))
    assert run.returncode == 0 and "Success: no issues found" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow
def test_the_debt_list_holds_exactly_the_modules_with_errors(tmp_path):
    """Checked without the overrides, the modules with errors are exactly the listed ones."""
    run = _mypy("--config-file", str(_ini_without_overrides(tmp_path / "mypy.ini")))
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 2: mypy itself failed (bad config, crash)
    with_errors = {_module(m["path"]) for m in map(_ERROR.match, run.stdout.splitlines()) if m}
    listed = _debt()
    assert not with_errors - listed, f"type errors outside the debt list: {sorted(with_errors - listed)}\n{run.stdout}"
    assert not listed - with_errors, (f"clean now, take them off [[tool.mypy.overrides]] in pyproject.toml: "
                                      f"{sorted(listed - with_errors)}")


_BAD = """
def half(n: int) -> int:
    return n / 2
"""


@pytest.mark.parametrize("body, fails", [(_BAD, True), (_BAD.replace("n / 2", "n // 2"), False)],
                         ids=["type-error", "corrected"])
def test_the_configuration_catches_a_type_error(tmp_path, body, fails):
    """Negative control: a module returning a float where it declares int fails with [return-value]."""
    module = tmp_path / "halving.py"
    module.write_text(textwrap.dedent(body), encoding="utf-8")
    run = _mypy("--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path / "cache"), str(module))
    if fails:
        assert run.returncode == 1 and "halving.py:3: error:" in run.stdout and "[return-value]" in run.stdout, (
            run.stdout + run.stderr)
    else:
        assert run.returncode == 0, run.stdout + run.stderr
