"""The run settings are declared once (coupled_curvature.base.run_settings): RunOptions, the entry points' signatures
and the command line's flags and help all read that declaration, and a new setting touches at most 3 files."""

from __future__ import annotations

import dataclasses
import inspect
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import coupled_curvature
from coupled_curvature.cli import main
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.options import RunOptions, run_options
from coupled_curvature.numeric.core.profile import spectral_profile
from coupled_curvature.numeric.studies.cutoff import cutoff_sensitivity
from coupled_curvature.base.run_settings import DEFAULTS, SETTINGS


def test_every_default_is_the_declared_one():
    fields = {f.name: f.default for f in dataclasses.fields(RunOptions)}
    for s in SETTINGS:
        if s.name in fields:  # device and output are held as their checked forms
            assert fields[s.name] == s.default, s.name
        for fn in (diagnose, spectral_profile, cutoff_sensitivity):
            params = inspect.signature(fn).parameters
            if s.name in params:
                assert params[s.name].default == s.default, (fn.__name__, s.name)
    assert run_options().method == DEFAULTS["method"] == "gram"  # one default for method everywhere
    assert inspect.signature(spectral_profile).parameters["method"].default == "gram"


def test_the_command_line_shows_each_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for s in SETTINGS:
        if s.flag is None:
            continue
        assert s.flag in text, s.flag
        if s.kind not in ("negated", "tristate"):
            shown = str(s.default // 2**20) if s.kind == "mib" else "the model's" if s.name == "device" else str(s.default)
            assert f"(default: {shown})" in text, s.name


def test_a_bad_value_on_the_command_line_stops_before_training(capsys, tmp_path):
    assert main(["diagnose", "--dataset", "wine", "--arch", "mlp:4x1", "--pinv-rtol", "2"]) == 2
    assert "pinv_rtol must be a number in [0, 1)" in capsys.readouterr().err


def test_an_unknown_setting_is_refused_with_the_valid_names():
    with pytest.raises(InvalidInputError, match="pinv_rtl is not a run setting; valid: blocks, inverse"):
        run_options(pinv_rtl=1e-8)


_SETTING = '''
    Setting("dummy", 7, "a dummy setting added by the test", "--dummy", "int"),
'''
_FIELD = '''    dummy: int = DEFAULTS["dummy"]  # type: ignore[assignment]
'''
_PROBE = textwrap.dedent('''
    import contextlib, inspect, io, sys
    import coupled_curvature
    assert coupled_curvature.__file__.startswith(sys.argv[1]), coupled_curvature.__file__
    from coupled_curvature.cli import main
    from coupled_curvature.base.errors import InvalidInputError
    from coupled_curvature.numeric.core.diagnostics import diagnose
    from coupled_curvature.numeric.core.options import run_options
    from coupled_curvature.numeric.studies.launch import LaunchOptions
    assert run_options(dummy=3).dummy == 3 and run_options().dummy == 7
    try:
        run_options(dummy="x")
        raise SystemExit("a bad dummy value was accepted")
    except InvalidInputError:
        pass
    assert inspect.signature(diagnose).parameters["dummy"].default == 7
    assert LaunchOptions(run={"dummy": 3}).run == {"dummy": 3}
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["diagnose", "--help"])
    text = " ".join(out.getvalue().split())
    assert "--dummy" in text and "a dummy setting added by the test (default: 7)" in text, text
    print("ok")
''')


def test_a_new_setting_touches_at_most_three_files(tmp_path):
    """Add a setting to a copy of the package: the declaration and RunOptions' field (2 files); run_options
    checks it, diagnose's signature and LaunchOptions take it, and ccurv diagnose --help shows it with its default."""
    package = Path(coupled_curvature.__file__).parent
    copy = tmp_path / "coupled_curvature"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.vo", "*.glob", "*.vok", "*.vos"))
    edits = {
        copy / "base/run_settings.py": ("\n)\n\n#: setting name -> default", f"{_SETTING})\n\n#: setting name -> default"),
        copy / "numeric/core/options.py": ("    gauge: str | None = DEFAULTS[\"gauge\"]  # type: ignore[assignment]\n",
                                           "    gauge: str | None = DEFAULTS[\"gauge\"]  # type: ignore[assignment]\n"
                                           + _FIELD),
    }
    touched = set()
    for path, (old, new) in edits.items():
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, path  # the anchor the edit needs is there, once
        path.write_text(text.replace(old, new), encoding="utf-8")
        touched.add(path)
    assert len(touched) <= 3
    run = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
    # control: the declaration alone, without RunOptions' field, is refused (the probe then fails)
    options = copy / "numeric/core/options.py"
    options.write_text(options.read_text(encoding="utf-8").replace(_FIELD, ""), encoding="utf-8")
    bad = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert bad.returncode != 0
