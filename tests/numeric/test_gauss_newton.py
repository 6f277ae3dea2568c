"""Gauss–Newton sums and dense blocks of Linear/Conv2d layers (numeric/factors/gauss_newton.py,
kronecker.py, layers.py) against ``torch.func.hessian``.

The reference is the brute-force Hessian of the block alone; Tanh networks are the negative
control (their Gauss–Newton form is not the Hessian, so it must be rejected and the fallback used).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.func import grad, hessian

from coupled_curvature.numeric.factors.gauss_newton import gauss_newton, linear_block_hessians
from coupled_curvature.numeric.factors.kronecker import per_sample_factors
from coupled_curvature.numeric.factors.layers import linear_module_of
from coupled_curvature.numeric.measures import registry as M
from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.hvp import block_curvature
from coupled_curvature.numeric.core.objective import Objective
from tests.numeric._nets import block_loss

CE = nn.CrossEntropyLoss()
ACT = {"relu": nn.ReLU, "leaky": lambda: nn.LeakyReLU(0.1), "tanh": nn.Tanh}
POOL = {"max": nn.MaxPool2d, "avg": nn.AvgPool2d}


def _cnn(conv: dict, act="relu", pool="max", size=9, seed=0) -> nn.Sequential:
    """Conv2d(2→3, **conv) -> act -> pool(2) (if room) -> Conv2d(3→2, 1×1) -> act -> Flatten -> Linear(·, 3)."""
    torch.manual_seed(seed)
    layers = [nn.Conv2d(2, 3, **conv), ACT[act]()]
    with torch.no_grad():
        side = nn.Conv2d(2, 3, **conv)(torch.zeros(1, 2, size, size)).shape[-1]
    if side >= 2:
        layers.append(POOL[pool](2))
    layers += [nn.Conv2d(3, 2, 1), ACT[act](), nn.Flatten()]
    body = nn.Sequential(*layers).to(torch.float64)
    width = body(torch.zeros(1, 2, size, size, dtype=torch.float64)).shape[1]
    return nn.Sequential(*body, nn.Linear(width, 3, dtype=torch.float64))


def _data(n=10, shape=(2, 9, 9), seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, *shape), generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def _reference(model, X, y, members):
    """``(H_bb, g_b)`` by ``torch.func`` on the block alone."""
    f, w = block_loss(model, CE, X, y, members)
    return hessian(f)(w), grad(f)(w)


def _rel(a, b):
    return float((a - b).abs().max()) / float(b.abs().max())


def _objective(model, X, y):
    return Objective(model, CE, prepare_batches((X, y), CE))


def _conv_partition(model):
    names = [n for n, _ in model.named_parameters()]
    part = {n: [n] for n in names if n.startswith(("0.", "3.", "4."))}
    first = [n for n in names if n.startswith("0.")]
    if len(first) == 2:
        part["0"] = first
    return part


CONFIGS = [
    ("stride2-relu-max", dict(kernel_size=3, stride=2, padding=1), "relu", "max"),
    ("dilation-leaky-avg-nobias", dict(kernel_size=3, dilation=2, padding=2, bias=False), "leaky", "avg"),
    ("same-reflect-relu-avg", dict(kernel_size=(3, 2), padding="same", padding_mode="reflect"), "relu", "avg"),
    ("rect-stride-leaky-max", dict(kernel_size=(2, 3), stride=(2, 1), padding=(0, 1)), "leaky", "max"),
]


@pytest.mark.parametrize("label,conv,act,pool", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_conv_blocks_match_torch_hessian(label, conv, act, pool):
    model = _cnn(conv, act, pool)
    X, y = _data()
    part = _conv_partition(model)
    got = block_curvature(_objective(model, X, y), part, set(part))
    for block, members in part.items():
        H, _ = _reference(model, X, y, members)
        assert got[block].notes == [], (block, got[block].notes)  # accepted: the factored route was used
        assert _rel(got[block].dense, H) <= 1e-10, block


@settings(derandomize=True, max_examples=8, deadline=None)
@given(k=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 2), dilation=st.integers(1, 2),
       bias=st.booleans(), act=st.sampled_from(["relu", "leaky"]), pool=st.sampled_from(["max", "avg"]))
def test_conv_gauss_newton_equals_hessian_for_random_geometries(k, stride, padding, dilation, bias, act, pool):
    conv = dict(kernel_size=k, stride=stride, padding=padding, dilation=dilation, bias=bias)
    model = _cnn(conv, act, pool, size=7)
    X, y = _data(n=6, shape=(2, 7, 7))
    members = ["0.weight", "0.bias"] if bias else ["0.weight"]
    dense = linear_block_hessians(_objective(model, X, y), 0, {"b": ("0", members)})["b"]
    H, _ = _reference(model, X, y, members)
    assert _rel(dense, H) <= 1e-10


def test_tanh_conv_gauss_newton_is_rejected_and_the_fallback_is_exact():
    model = _cnn(dict(kernel_size=3, stride=2), "tanh", "avg")
    X, y = _data()
    obj = _objective(model, X, y)
    H, _ = _reference(model, X, y, ["0.weight"])
    gn = linear_block_hessians(obj, 0, {"0.weight": ("0", ["0.weight"])})["0.weight"]
    assert _rel(gn, H) > 1e-6  # the Gauss–Newton form is not the Hessian of a Tanh net
    got = block_curvature(obj, {"0.weight": ["0.weight"]}, {"0.weight"})["0.weight"]
    assert any("disagreed" in n for n in got.notes)
    assert _rel(got.dense, H) <= 1e-10


def test_grouped_conv_is_not_factored_and_still_exact():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 7 * 7, 3)).double()
    X, y = _data()
    assert linear_module_of(model, ["0.weight"]) is None
    got = block_curvature(_objective(model, X, y), {"0.weight": ["0.weight"]}, {"0.weight"})["0.weight"]
    assert _rel(got.dense, _reference(model, X, y, ["0.weight"])[0]) <= 1e-10


def test_linear_on_sequences_uses_the_gauss_newton_route():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(15, 3)).double()
    X, y = _data(shape=(5, 4))
    part = {"0": ["0.weight", "0.bias"]}
    assert per_sample_factors(_objective(model, X, y), 0, ["0"]) == {}  # 3-D input: not the 2-D route
    got = block_curvature(_objective(model, X, y), part, {"0"})["0"]
    assert got.notes == [] and _rel(got.dense, _reference(model, X, y, part["0"])[0]) <= 1e-10


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_gauss_newton_factor_reproduces_block_and_gradient(act):
    model = _cnn(dict(kernel_size=3, padding=1), act, "max")
    X, y = _data()
    sums = gauss_newton(_objective(model, X, y), {"0.weight": ["0.weight"], "6.weight": ["6.weight"]},
                             factor=True)
    for name in ("0.weight", "6.weight"):
        H, g = _reference(model, X, y, [name])
        gn = sums[name]
        assert _rel(gn.B.T @ gn.s, g) <= 1e-10 and _rel(gn.grad, g) <= 1e-10  # g_b = Σ J_nᵀe_n always
        assert _rel(gn.diagonal, torch.diagonal(gn.B.T @ gn.B)) <= 1e-10
        if act == "relu" or name == "6.weight":  # the classifier's input does not depend on its weights
            assert _rel(gn.B.T @ gn.B, H) <= 1e-10
        else:
            assert _rel(gn.B.T @ gn.B, H) > 1e-6  # negative control


def test_conv_hessian_diagonal_is_exact_without_dense_blocks():
    model = _cnn(dict(kernel_size=3, stride=2, padding=1), "relu", "avg")
    X, y = _data()
    ref_diag = {n: torch.diagonal(_reference(model, X, y, [n])[0]) for n, _ in model.named_parameters()}
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref_trace = sum(float(d.sum()) for d in ref_diag.values())
    ref_flat = 2 * float((theta.abs() * torch.cat(list(ref_diag.values())).clamp(min=0).sqrt()).sum())
    cache = {}
    tr = M.hessian_trace(model, CE, (X, y), cache=cache, max_dense=0, probes=2)
    assert tr["method"] == "exact" and tr["notes"] == [] and abs(tr["value"] - ref_trace) <= 1e-10 * abs(ref_trace)
    nf = M.normalized_flatness(model, CE, (X, y), cache=cache, max_dense=0, probes=2)
    assert abs(nf["value"] - ref_flat) <= 1e-10 * ref_flat
    assert cache["_context"]._dense == {}  # no dense block was assembled


def test_tanh_conv_diagonal_falls_back_with_a_note():
    model = _cnn(dict(kernel_size=3, stride=2, padding=1), "tanh", "avg")
    X, y = _data()
    ref = sum(float(torch.diagonal(_reference(model, X, y, [n])[0]).sum()) for n, _ in model.named_parameters())
    tr = M.hessian_trace(model, CE, (X, y), max_dense=100)
    assert any(n.startswith("0.weight: Gauss–Newton diagonal rejected") for n in tr["notes"])
    assert tr["method"] == "exact" and abs(tr["value"] - ref) <= 1e-10 * abs(ref)  # via dense blocks
    est = M.hessian_trace(model, CE, (X, y), max_dense=0, probes=4)
    assert est["method"].startswith("Hutchinson") and abs(est["value"] - ref) > 1e-8 * abs(ref)
