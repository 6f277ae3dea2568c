"""``ccurv check --precision``: the mpmath invariance error, and a failure when it does not fall."""

import json

import mpmath

from coupled_curvature.cli import main
from coupled_curvature.numeric.highprec import engine as highprec


def test_precision_check_passes_and_reports_errors(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["check", "--symbolic", "--only", "T12", "--precision", "24", "--json", str(out)]) == 0
    assert "precision check: PASS" in capsys.readouterr().out
    rows = json.loads(out.read_text())["precision"]["rows"]
    assert [r["dps"] for r in rows] == [15, 24]
    assert rows[1]["D"] < 1e-20 and rows[1]["D"] < rows[0]["D"] * 1e-6  # falls with precision


def test_precision_check_fails_when_the_error_does_not_fall(monkeypatch, capsys):
    monkeypatch.setattr(highprec, "invariance_error", lambda *a, **k: {"D": mpmath.mpf("1e-3"), "Dplus": mpmath.mpf("1e-3")})
    assert main(["check", "--symbolic", "--only", "T12", "--precision", "20"]) == 1
    assert "precision check: FAIL" in capsys.readouterr().out


def test_precision_below_15_is_refused(capsys):
    assert main(["check", "--symbolic", "--only", "T12", "--precision", "10"]) == 2
    assert "at least 15" in capsys.readouterr().err
