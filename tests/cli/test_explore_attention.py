"""``ccurv explore --arch gpt2-tiny|bert-tiny|encoder-layer|mha``: attention's symmetries (T13) against every
measure; D on per-head blocks keeps under c·R of one head and moves under a general A, the gauge-fixed D (T14)
keeps under both, and a broken map is caught."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from coupled_curvature import theorems as R
from coupled_curvature.cli import main
from coupled_curvature.numeric.models.tiny_transformers import tiny_transformer
from coupled_curvature.numeric.studies import explorer_attention as EA
from coupled_curvature.numeric.studies.explorer_attention_predictions import ATTENTION_PREDICTIONS, ATTENTION_SYMMETRIES

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers is not installed (the hf extra)")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Tiny models are built from configs; nothing here may reach the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_predictions_cite_registered_theorems():
    reasons = [reason for row in ATTENTION_PREDICTIONS.values() for _, reason in row.values()]
    cited = {t for reason in reasons for t in R.cited(reason)}
    assert {"T4", "T7", "T10", "T13", "T14"} <= cited <= set(R.THEOREMS)
    R.check_citations(reasons)
    assert all(set(row) == set(ATTENTION_SYMMETRIES) for row in ATTENTION_PREDICTIONS.values())


@pytest.mark.parametrize("argv, expect", [
    (["--arch", "mha", "--symmetries", "layer"], "applicable: all, qk_conformal"),
    (["--arch", "mha", "--dataset", "wine"], "token data"),
    (["--arch", "mha", "--measures", "D,lambda"], "token ids"),
])
def test_bad_input_exits_2(argv, expect, capsys):
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccurv: error:") and expect in err


def _cells(js) -> dict[tuple[str, str], dict]:
    return {(c["measure"], c["symmetry"]): c for c in json.loads(js.read_text())["cells"]}


def test_mha_run_agrees_with_t4_t13_t14(tmp_path, capsys):
    js = tmp_path / "m.json"  # --out's files are the generic explorer's (test_explore.py writes them)
    argv = ["explore", "--arch", "mha", "--quick", "--epochs", "5", "--measures", "D,rho,D[head],D[gauge]",
            "--json", str(js)]
    assert main(argv) == 0
    assert "Invariance matrix" in capsys.readouterr().out
    cells = _cells(js)
    assert len(cells) == 4 * len(ATTENTION_SYMMETRIES)
    assert all(c["agrees"] for c in cells.values()), [c for c in cells.values() if not c["agrees"]]
    assert cells["D[head]", "qk_conformal"]["deviation"] <= 1e-9  # c·R is conformal on head 0's blocks (T4)
    assert cells["D", "qk_conformal"]["deviation"] >= 1e-3  # but not on the fused in_proj_weight (T13)
    assert cells["D[head]", "qk_general"]["deviation"] >= 1e-3  # A ∉ CO(d): moves (T4)
    assert cells["D[gauge]", "qk_general"]["deviation"] <= 1e-9 and cells["D[gauge]", "vo"]["deviation"] <= 1e-9
    assert cells["D[head]", "head_perm"]["deviation"] <= 1e-9  # compared under the relabelling
    assert cells["D", "norm_scale"]["predicted"] == "degenerate" and "head.0.weight" in cells["D", "norm_scale"]["witness"]
    assert "qk_transform('body.attn'" in cells["D[head]", "qk_general"]["witness"]
    gaps = json.loads(js.read_text())["function_gaps"]
    assert max(g for pts in gaps.values() for _, g in pts) <= 1e-10


def test_a_broken_map_is_caught(monkeypatch):
    """Negative control: W_Q -> W_Q A without W_K -> W_K A⁻ᵀ changes the function, and the gauge-fixed D moves,
    so the cell predicted invariant disagrees."""
    target = tiny_transformer("mha", steps=5)
    real = EA.qk_transform

    def q_only(model, attn, A, head=None):
        new = real(model, attn, A, head)
        with torch.no_grad():  # put the K rows of the fused in_proj back
            d = model.get_submodule(attn).embed_dim
            new.get_submodule(attn).in_proj_weight[d:2 * d].copy_(model.get_submodule(attn).in_proj_weight[d:2 * d])
            new.get_submodule(attn).in_proj_bias[d:2 * d].copy_(model.get_submodule(attn).in_proj_bias[d:2 * d])
        return new

    monkeypatch.setattr(EA, "qk_transform", q_only)
    mx = EA.attention_matrix(target, ["D[gauge]"], ["qk_general"], quick=True)
    assert max(g for _, g in mx.gaps["qk_general"]) > 1e-6
    cell = mx.cell("D[gauge]", "qk_general")
    assert not cell.agrees and cell.deviation > 1e-6


@needs_transformers
@pytest.mark.parametrize("arch", ["gpt2-tiny", pytest.param("bert-tiny", marks=pytest.mark.slow)])
def test_hugging_face_archs(arch):
    target = tiny_transformer(arch, steps=5)
    mx = EA.attention_matrix(target, ["D", "D[head]", "D[gauge]"], ["qk_conformal", "qk_general", "vo"], quick=True,
                             options={m: {"max_dense": 256} for m in ("D[head]", "D[gauge]")})
    assert not mx.disagreements, [(c.measure, c.symmetry, c.deviation, c.witness) for c in mx.disagreements]
    assert mx.cell("D[head]", "qk_conformal").deviation <= 1e-9
    assert mx.cell("D[head]", "vo").deviation >= 1e-3 and mx.cell("D[gauge]", "vo").deviation <= 1e-9
