"""``ccurv check``'s λ-identities section: printed with its trust labels, in the JSON, in the exit code;
skipped under --only (it is not a theorem)."""

import json

import pytest

from coupled_curvature.cli import main


@pytest.fixture
def one_theorem(monkeypatch):
    """check_all restricted to T12 (the theorems are tested elsewhere), so that the run without --only is fast."""
    from coupled_curvature import proofs

    real = proofs.check_all
    monkeypatch.setattr(proofs, "check_all", lambda **kw: real(**{**kw, "only": ["T12"]}))


def test_section_printed_in_json_and_within_100_columns(one_theorem, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = tmp_path / "c.json"
    assert main(["check", "--symbolic", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "λ identities: PASS" in text and "exact ok" in text and "slope (num)" in text
    assert "no finite rate" in text and "rate (num)" not in text  # --symbolic: no numeric half
    assert max(len(line) for line in text.splitlines()) <= 100
    data = json.loads(out.read_text())["lambda_identities"]
    assert data["ok"] and len(data["series"]) == 5 and data["non_analytic"]["rate"] is None
    third = [s for s in data["series"] if s["pole_order"] == 3]
    assert third and all(0 < s["error"] < 1e-2 and s["plain_error"] > 5 * s["error"] for s in third)


def test_numeric_half_alone(tmp_path, capsys):
    from coupled_curvature.commands.check_rate import gather, render

    r = gather(symbolic=False, numeric=True)
    assert r.ok and r.cases is None and all(b.within_bound for b in r.band)
    text = "\n".join(render(r, 100))
    assert "rate (num)" in text and "slope (num)" not in text and "exp(−1/x²)" not in text


def test_a_failing_identity_fails_the_check(one_theorem, capsys, monkeypatch):
    from coupled_curvature.commands import check_rate

    real = check_rate.gather

    def broken(**kw):
        r = real(**kw)
        r.band[0] = type(r.band[0])(**{**r.band[0].__dict__, "bound": 0.0, "rate": r.band[0].rate - 1.0})
        return r

    monkeypatch.setattr(check_rate, "gather", broken)
    assert main(["check", "--numeric", "--quick"]) == 1
    assert "λ identities: FAIL" in capsys.readouterr().out


def test_only_skips_the_section(capsys):
    assert main(["check", "--symbolic", "--only", "T12"]) == 0
    assert "λ identities" not in capsys.readouterr().out
