"""``ccurv check``: exit codes, subsets, JSON schema; the full default run is marked slow."""

import json
import time

import pytest

from coupled_curvature.cli import main


def test_symbolic_subset_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["check", "--symbolic", "--only", "T12,T4", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "T4" in text and "T12" in text and "proved" in text and "T6" not in text
    data = json.loads(out.read_text())
    assert set(data["theorems"]) == {"T4", "T12"}
    t4 = data["theorems"]["T4"]
    assert t4["status"] == "proved" and t4["numeric"] is None and t4["seconds"] >= 0
    assert set(t4["steps"]) == {"formal", "exact", "certificate", "rewrite", "numeric"} and t4["steps"]["certificate"] >= 5


def test_numeric_subset_is_evidence(tmp_path, capsys):
    out = tmp_path / "n.json"
    assert main(["check", "--numeric", "--quick", "--only", "T12,T1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())["theorems"]
    assert list(data) == ["T12"]  # T1 has no numeric cross-check
    assert data["T12"]["status"] == "evidence" and data["T12"]["numeric"]["agrees"] is True
    assert data["T12"]["steps"]["exact"] == 0 and data["T12"]["steps"]["numeric"] > 0


@pytest.mark.parametrize("argv", [["--only", "T15"], ["--only", "T4", "--json", "/nonexistent-dir/x.json"]])
def test_bad_input_exit_2(argv, capsys):
    assert main(["check", "--symbolic", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccurv: error:") and "Traceback" not in err


def test_failing_theorem_exit_1(monkeypatch, capsys):
    import copy

    import sympy as sp

    from coupled_curvature import proofs
    from coupled_curvature.symbolic.derivation import Step

    real = proofs.derivation

    def corrupted(tid):
        d = copy.deepcopy(real(tid))
        c = sp.Symbol("c", positive=True)
        d.steps.append(Step("c⁻² law with a wrong exponent", c**-2, c**-3, "exact", True))
        return d

    monkeypatch.setattr(proofs, "derivation", corrupted)
    assert main(["check", "--symbolic", "--only", "T12"]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "wrong exponent" in out


@pytest.mark.slow
def test_full_default_check_within_budget(tmp_path):
    t0 = time.perf_counter()
    assert main(["check", "--json", str(tmp_path / "all.json")]) == 0
    assert time.perf_counter() - t0 <= 180
    data = json.loads((tmp_path / "all.json").read_text())["theorems"]
    assert len(data) == 14 and all(v["status"] == "proved" for v in data.values())


def test_summary_counts_formal_steps_within_100_columns(capsys):
    """The table has a formal column (steps also stated in general by a pinned Coq theorem) that
    equals the registry's count, and no printed line is wider than 100 columns."""
    from coupled_curvature.formal_claims import FORMAL_STEPS

    assert main(["check", "--symbolic", "--only", "T12,T9"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(l for l in out if l.startswith("theorem "))
    assert head.split()[:4] == ["theorem", "status", "Coq", "formal"]
    for tid in ("T12", "T9"):
        row = next(l for l in out if l.startswith(f"{tid} "))
        assert row.split()[3] == str(len(FORMAL_STEPS[tid])), row
    assert max(map(len, out)) <= 100, max(out, key=len)


def test_verdict_table_comes_last(monkeypatch, capsys):
    """The detailed sections (here λ's identities, which are not a theorem) come first; the output ends
    with the theorems' table and the verdict; stage progress goes to stderr."""
    import coupled_curvature.proofs as proofs

    real = proofs.check_all
    monkeypatch.setattr(proofs, "check_all", lambda **k: real(**{**k, "only": ["T12"]}))
    assert main(["check", "--symbolic"]) == 0
    out, err = capsys.readouterr()
    lines = out.rstrip().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("ccurv check ("))
    assert any("Curvature rate λ" in line for line in lines[:head])  # the detail before the verdict
    assert not any("λ" in line for line in lines[head:])  # nothing after the verdict that is not a theorem
    assert lines[-1].startswith("all proved; total") and any(line.lstrip().startswith("T12") for line in lines[head:])
    assert "λ identities: symbolic cases" in err
