"""``ccurv experiment invariance``: a reduced --quick end to end, the files, the schema, the cache on rerun."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from coupled_curvature.cli import main
from coupled_curvature.numeric.studies import invariance_experiment as E

SCHEMA = {"dataset", "arch", "seed", "params", "blocks", "train_acc", "test_acc", "max_rel_change_D",
          "max_rel_change_Dplus", "neuron_control_median", "rq_change"}


@pytest.fixture
def tiny_quick(monkeypatch):
    original = E.quick_config

    def tiny(seed: int = 0):
        nets = (E.NetSpec("wine", "mlp", (5, 5), seed), E.NetSpec("wine", "mlp-bn", (4,), seed),
                E.NetSpec("digits", "cnn", (2,), seed))
        return replace(original(seed), nets=nets, epochs=2, measure_samples=50, neuron_trials=2,
                       lanczos_iter=12, max_dense=200)
    monkeypatch.setattr(E, "quick_config", tiny)


def test_quick_end_to_end_and_rerun_uses_cache(tmp_path, capsys, tiny_quick):
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["experiment", "invariance", "--quick", "--out", str(out), "--cache", str(cache)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "status" in captured.out and "[3/3]" in captured.err  # table on stdout, progress on stderr
    for name in ("invariance.json", "invariance.md", "invariance.html", "invariance.png"):
        assert (out / name).stat().st_size > 0
    data = json.loads((out / "invariance.json").read_text())
    assert len(data["rows"]) == 3 and all(SCHEMA <= set(r) for r in data["rows"])
    status = {r["arch"]: r["status"] for r in data["rows"]}
    assert status == {"mlp": "invariant", "mlp-bn": "degenerate (T10)", "cnn": "invariant"}
    assert "| status |" in (out / "invariance.md").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert len(list(cache.iterdir())) == 6  # 3 models and 3 measured rows

    assert main(argv) == 0  # rerun: models and rows from the cache, same table
    again = json.loads((out / "invariance.json").read_text())
    assert all(r["cached"] for r in again["rows"]) and capsys.readouterr().err.count("(cached,") == 3
    assert E.strip_timing(again["rows"]) == E.strip_timing(data["rows"])
    assert main([*argv, "--remeasure"]) == 0  # rows measured again, models still cached
    assert "(cached," not in capsys.readouterr().err
    assert E.strip_timing(json.loads((out / "invariance.json").read_text())["rows"]) == E.strip_timing(data["rows"])


def test_refuses_foreign_folder(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("x")
    assert main(["experiment", "invariance", "--quick", "--out", str(tmp_path), "--cache", str(tmp_path / "c")]) == 2
    assert "ccurv: error:" in capsys.readouterr().err


def test_certify_adds_the_certified_t3_column(tmp_path, capsys, tiny_quick, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = tmp_path / "out"
    argv = ["experiment", "invariance", "--quick", "--certify", "--out", str(out), "--cache", str(tmp_path / "c")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "cert" in printed and max(len(line) for line in printed.splitlines()) <= 100
    rows = {r["arch"]: r for r in json.loads((out / "invariance.json").read_text())["rows"]}
    for arch in ("mlp", "cnn"):  # both halves of T3, certified: D's change ball ∋ 0 and RQ's ∌ 0
        r = rows[arch]
        assert r["cert_D_zero"] is True and r["cert_RQ_moves"] is True and r["cert_D_width"] < 1e-60, r
        assert r["cert_note"] is None and r["cert_prec"] == 256 and r["cert_c"] == "37/10"
    assert rows["mlp-bn"]["cert_D_zero"] is None and "batch statistics" in rows["mlp-bn"]["cert_note"]
    md = (out / "invariance.md").read_text()
    assert "| certified |" in md and "∋0 ≤" in md and "Certified (--certify" in md


def test_certified_cell_says_failed_when_a_half_fails():
    from coupled_curvature.reporting.invariance_page import certified_cell

    assert certified_cell({"cert_D_zero": False, "cert_RQ_moves": True, "cert_D_width": 1.0}) == "FAILED"
    assert certified_cell({"cert_D_zero": True, "cert_RQ_moves": False, "cert_D_width": 1e-70}) == "FAILED"
    assert certified_cell({"cert_D_zero": None}) == "–"
