"""T14's cross-check on trained models: raw D moves and the gauge-fixed D stays under non-conformal per-head maps
and a non-uniform neuron rescaling; a map outside the group moves the gauge-fixed D too (negative control)."""

import torch
from torch import nn

from coupled_curvature.numeric import diagnose
from coupled_curvature.proofs.crosschecks import Lab, crosscheck
from coupled_curvature.proofs.gauge_crosscheck import gauge_rows, non_conformal
from coupled_curvature.proofs.attention_crosscheck import trained_classifier


def test_rows_agree_and_cover_both_layouts_and_both_pairs():
    rows = gauge_rows(1, tol=1e-10, move=1e-3)
    assert all(r[-1] for r in rows), [r for r in rows if not r[-1]]
    nets = {r[0] for r in rows}
    assert nets == {"mha-separate-4x2", "mha-fused-4x2"}
    assert sum("Q/K" in r[1] for r in rows) == sum("V/O" in r[1] for r in rows) == 6
    raw = [r[2] for r in rows if "raw D moves" in r[1]]
    fixed = [r[2] for r in rows if "gauge-fixed" in r[1]]
    assert min(raw) > 1e-3 and max(fixed) <= 1e-10


def test_the_registered_check_agrees():
    res = crosscheck("T14", Lab(seed=0, heavy=False))
    assert res.agrees and res.figure <= 1e-10
    assert any(r["net"] == "relu-mlp" for r in res.rows)


def test_a_map_outside_the_group_moves_the_gauge_fixed_d():
    """Q mapped by A without K mapped by A⁻ᵀ changes the function: the gauge-fixed D then moves as well."""
    model, data = trained_classifier(True, 0)
    broken = trained_classifier(True, 0)[0]
    with torch.no_grad():
        W = broken.attn.q_proj_weight
        W[:2] = non_conformal(2, 3).T @ W[:2]  # head 0's rows of W_Q only
    loss = nn.CrossEntropyLoss()
    a = diagnose(model, loss, data, inverse=False, gauge="balanced")
    b = diagnose(broken, loss, data, inverse=False, gauge="balanced")
    worst = max(abs(a[n].coupled - b[n].coupled) / abs(a[n].coupled) for n in a.names())
    assert worst > 1e-3
