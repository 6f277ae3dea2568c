"""T14 on real models: the gauge-fixed D and D⁺ (``gauge="balanced"``, numeric/symmetries/gauge.py) are unchanged
under non-conformal attention maps (Q/K by A, V/O by B, per head) and non-uniform ReLU neuron rescalings, which
move the raw D; the balanced model computes the same function; what has no unique balanced point is refused."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric import (
    diagnose,
    function_gap,
    neuron_rescale,
    qk_transform,
    vo_transform,
)
from coupled_curvature.numeric.symmetries.gauge import balance
from tests.numeric.test_head_blocks import CASES, CE, F64, _built, _head_dim

TOL = 1e-10


def _non_conformal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    A = torch.eye(n, dtype=F64) + 0.6 * torch.randn(n, n, generator=g, dtype=F64)
    return A @ torch.diag(torch.linspace(0.5, 2.0, n, dtype=F64))


def _rel(a: float | None, b: float | None) -> float:
    """Relative difference; D = None (a gradient at rounding, e.g. BERT's key bias) on both sides is agreement."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def _mlp(seed: int = 0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).double()
    X, y = torch.randn(24, 4, dtype=F64), torch.randint(0, 3, (24,))
    return net, (X, y)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(layer=st.integers(0, 1), seed=st.integers(0, 10**6))
def test_relu_gauge_fixed_d_is_invariant_under_non_uniform_rescaling(layer, seed):
    net, data = _mlp()
    units = net[2 * layer].out_features
    g = torch.Generator().manual_seed(seed)
    scales = torch.exp(1.5 * torch.randn(units, generator=g, dtype=F64))
    moved = neuron_rescale(net, layer, scales)
    raw = (diagnose(net, CE, data), diagnose(moved, CE, data))
    fixed = (diagnose(net, CE, data, gauge="balanced"), diagnose(moved, CE, data, gauge="balanced"))
    assert max(_rel(raw[0][n].coupled, raw[1][n].coupled) for n in raw[0].names()) > 1e-3  # the raw D moves
    for n in fixed[0].names():
        assert _rel(fixed[0][n].coupled, fixed[1][n].coupled) <= TOL
        assert _rel(fixed[0][n].inverse_coupled, fixed[1][n].inverse_coupled) <= 1e-8


@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
@pytest.mark.parametrize("pair", ["qk", "vo"])
def test_attention_gauge_fixed_d_is_invariant_under_non_conformal_maps(make, pair):
    model, attn, loss, data, *_ = _built(make)
    d = _head_dim(model, attn)
    M = _non_conformal(d, 7)
    moved = (qk_transform if pair == "qk" else vo_transform)(model, attn, M, head=1)
    raw = (diagnose(model, loss, data, inverse=False), diagnose(moved, loss, data, inverse=False))
    fixed = (diagnose(model, loss, data, inverse=False, gauge="balanced"),
             diagnose(moved, loss, data, inverse=False, gauge="balanced"))
    touched = [n for n in raw[0].names() if _rel(raw[0][n].coupled, raw[1][n].coupled) > 1e-4]
    assert touched  # the raw D of the mapped tensors moves
    for n in fixed[0].names():
        if fixed[0][n].coupled is not None:
            assert _rel(fixed[0][n].coupled, fixed[1][n].coupled) <= TOL, n


@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
def test_the_balanced_model_computes_the_same_function_and_the_users_model_is_untouched(make):
    model, attn, loss, data, *_ = _built(make)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fixed = balance(model)
    assert fixed.heads >= 1
    assert function_gap(model, fixed.model, data[0]) <= 1e-10
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


def test_per_head_blocks_at_the_balanced_point():
    """gauge and blocks='head' together: each head's q block is invariant under that head's non-conformal A."""
    model, attn, loss, data, *_ = _built(CASES["encoder"])
    moved = qk_transform(model, attn, _non_conformal(_head_dim(model, attn), 3), head=0)
    a = diagnose(model, loss, data, blocks="head", gauge="balanced", inverse=False)
    b = diagnose(moved, loss, data, blocks="head", gauge="balanced", inverse=False)
    raw = diagnose(moved, loss, data, blocks="head", inverse=False)
    q0 = [n for n in a.names() if n.endswith(".q[0]")][0]
    assert _rel(a[q0].coupled, b[q0].coupled) <= TOL
    assert _rel(a[q0].coupled, raw[q0].coupled) > 1e-4


def test_a_map_outside_the_group_moves_the_gauge_fixed_d():
    """Negative control: W_Q doubled without K compensated is not a symmetry (the function changes); the
    gauge cannot absorb it, and the gauge-fixed D moves."""
    model, attn, loss, data, *_ = _built(CASES["encoder"])
    broken = qk_transform(model, attn, 2.0 * torch.eye(_head_dim(model, attn), dtype=F64), head=0)
    with torch.no_grad():  # undo the K half only: Q stays doubled
        lay_k = broken.body.self_attn.in_proj_weight
        e, d = lay_k.shape[1], _head_dim(model, attn)
        lay_k[e:e + d] *= 2.0
        broken.body.self_attn.in_proj_bias[e:e + d] *= 2.0
    assert function_gap(model, broken, data[0]) > 1e-3
    a = diagnose(model, loss, data, inverse=False, gauge="balanced")
    b = diagnose(broken, loss, data, inverse=False, gauge="balanced")
    assert max(_rel(a[n].coupled, b[n].coupled) for n in a.names()) > 1e-4


def test_hostile_gauges_and_points_without_a_unique_balance():
    net, data = _mlp()
    for bad in ("balance", "", 1, True):
        with pytest.raises(InvalidInputError, match="gauge must be None or one of 'balanced'"):
            diagnose(net, CE, data, gauge=bad)
    with pytest.raises(InvalidInputError, match="inplace=True balances a float64 model"):
        balance(net.float(), inplace=True)
    net, data = _mlp()
    dead = net
    with torch.no_grad():
        dead = neuron_rescale(net, 0, torch.ones(6, dtype=F64))
        dead[0].weight[2].zero_()
        dead[0].bias[2] = 0.0
    with pytest.raises(UnsupportedModelError, match="dead unit"):
        diagnose(dead, CE, data, gauge="balanced")
    model, attn, loss, data2, *_ = _built(CASES["mha"])
    flat = balance(model).model
    with torch.no_grad():
        flat.body.in_proj_weight[:4].zero_()  # head 0's queries: rank 0
        flat.body.in_proj_bias[:4].zero_()
    with pytest.raises(UnsupportedModelError, match="rank below its head size"):
        balance(flat)


def test_every_entry_point_takes_the_gauge():
    from coupled_curvature.numeric import CurvatureTracker, spectral_profile

    net, data = _mlp()
    d = diagnose(net, CE, data, inverse=False, gauge="balanced")
    assert any("gauge='balanced'" in n for n in d.notes)
    prof = spectral_profile(net, CE, data, gauge="balanced")
    assert prof["0.weight"].D() == pytest.approx(diagnose(net, CE, data, gauge="balanced")["0.weight"].coupled,
                                                     rel=1e-12)
    rec = CurvatureTracker(net, CE, data, every=1, gauge="balanced").record(0)
    assert rec["D/0.weight"] == pytest.approx(d["0.weight"].coupled, rel=1e-12)
    assert rec["D/0.weight"] != pytest.approx(diagnose(net, CE, data, inverse=False)["0.weight"].coupled, rel=1e-6)


def test_ccurv_diagnose_takes_the_gauge(capsys):
    from coupled_curvature.cli import main

    assert main(["diagnose", "--epochs", "0", "--samples", "30", "--gauge", "balanced", "--no-inverse"]) == 0
    out = capsys.readouterr().out
    assert "gauge='balanced'" in out and "ReLU unit(s)" in out
