"""``ccurv check --formal``: builds the Coq development and checks every pinned statement."""

from __future__ import annotations

import json
import shutil

import pytest

from coupled_curvature.cli import main
from coupled_curvature.proofs import formal

needs_coq = pytest.mark.skipif(shutil.which("coqc") is None, reason="coqc is not installed")


@needs_coq
def test_formal_checks_the_pins(tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["check", "--symbolic", "--only", "T4,T12", "--formal", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())["formal"]
    assert data["checked"] and data["theorems"]["T4"]["ok"] and data["theorems"]["T12"]["ok"]
    assert data["theorems"]["T4"]["names"] == formal.formal_theorems()["T4"]
    assert "T4       proved  formal" in text


@needs_coq
def test_a_tampered_pin_fails(tmp_path, capsys, monkeypatch):
    """Negative control: a weakened statement no longer matches what Coq prints, and check fails."""
    real = formal.statement_pins

    def tampered(d=None):
        pins = real(d)
        name, stmt = pins["T12"][0]
        pins["T12"][0] = (name, stmt.replace("s != 0", "True"))
        return pins

    monkeypatch.setattr(formal, "statement_pins", tampered)
    assert main(["check", "--symbolic", "--only", "T12", "--formal"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_without_formal_the_pins_are_listed_not_checked(tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["check", "--symbolic", "--only", "T4", "--json", str(out)]) == 0
    data = json.loads(out.read_text())["formal"]
    assert data == {"checked": False, "theorems": {"T4": formal.formal_theorems()["T4"]}}
    assert "not checked in this run" in capsys.readouterr().out


def test_without_coq_formal_is_a_clear_error_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(formal, "coq_available", lambda: False)
    assert main(["check", "--only", "T4", "--formal"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccurv: error: --formal needs Coq") and "apt-get install coq" in err
    assert "Traceback" not in err
