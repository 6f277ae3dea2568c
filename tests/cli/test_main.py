"""The front door: the public API re-exports, `python -m coupled_curvature`, and exit codes."""

import subprocess
import sys

import pytest

import coupled_curvature


def test_public_api_resolves():
    for name in coupled_curvature.__all__:
        assert getattr(coupled_curvature, name) is not None, name
    from coupled_curvature.numeric.core.diagnostics import diagnose

    assert coupled_curvature.diagnose is diagnose
    with pytest.raises(AttributeError):
        coupled_curvature.not_a_thing  # noqa: B018


def _run(*args):
    return subprocess.run([sys.executable, "-m", "coupled_curvature", *args], capture_output=True, text=True, timeout=600)


def test_module_entry_point_and_usage_errors():
    ok = _run("--help")
    assert ok.returncode == 0 and "check" in ok.stdout
    bad = _run("no-such-command")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.slow
def test_numeric_check_passes_on_the_default_net():
    """The full numeric check: digits, 64x3 ReLU MLP, D⁺ on 4096-parameter blocks (minutes)."""
    out = _run("check", "--numeric")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "numeric check: PASS" in out.stdout and "epoch" in out.stderr
