"""The tangent route of diagnose (numeric/core/tangents.py) against the Hessian-vector-product route and brute force."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.numeric.core import diagnostics as diagnostics
from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.tangents import block_quadratic_forms, single_layer_blocks
from tests.numeric._nets import data, mlp, reference_block, rel

CE, MSE = nn.CrossEntropyLoss(), nn.MSELoss()


@pytest.fixture
def hvp_route(monkeypatch):
    def run(*args, **kwargs):
        monkeypatch.setattr(diagnostics, "_tangent_route", False)
        try:
            return diagnose(*args, **kwargs)
        finally:
            monkeypatch.setattr(diagnostics, "_tangent_route", True)
    return run


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    widths=st.lists(st.integers(1, 6), min_size=0, max_size=3),
    out=st.integers(1, 4),
    n=st.integers(1, 9),
    split=st.booleans(),
    bias=st.booleans(),
    act=st.sampled_from(["relu", "leaky"]),
    loss=st.sampled_from(["ce", "mse"]),
    blocks=st.sampled_from(["tensor", "layer"]),
    seed=st.integers(0, 10**6),
)
def test_tangent_route_matches_the_hvp_route(hvp_route, widths, out, n, split, bias, act, loss, blocks, seed):
    net = mlp([4, *widths, out], bias=bias, act=act, seed=seed % 997)
    if loss == "ce":
        out = max(out, 2)
        net = mlp([4, *widths, out], bias=bias, act=act, seed=seed % 997)
        X, y = data(n, (4,), out, seed=seed)
        loss_fn = CE
    else:
        X, _ = data(n, (4,), 2, seed=seed)
        y = torch.randn(n, out, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        loss_fn = MSE
    batches = [(X[:1], y[:1]), (X[1:], y[1:])] if split and n > 1 else (X, y)
    fast = diagnose(net, loss_fn, batches, inverse=False, blocks=blocks)
    slow = hvp_route(net, loss_fn, batches, inverse=False, blocks=blocks)
    assert fast.meta["wHw_route"] == "tangent" and slow.meta["wHw_route"] == "hvp"
    assert abs(fast.meta["loss"] - slow.meta["loss"]) <= 1e-12 * abs(slow.meta["loss"])
    for b in slow:
        f = fast[b.name]
        scale = max(abs(b.wHw), 1e-300)
        assert abs(f.wHw - b.wHw) <= 1e-10 * scale + 1e-15, (b.name, f.wHw, b.wHw)
        assert abs(f.g_sq - b.g_sq) <= 1e-12 * max(b.g_sq, 1e-300) + 1e-30
        assert abs(f.w_dot_g - b.w_dot_g) <= 1e-12 * max(abs(b.w_dot_g), 1e-300) + 1e-30


def test_tangent_route_matches_brute_force_hessian():
    net = mlp([5, 6, 4, 3], act="leaky", seed=2)
    X, y = data(17, (5,), 3)
    d = diagnose(net, CE, (X, y), inverse=False)
    assert d.meta["wHw_route"] == "tangent"
    for b in d:
        ref = reference_block(net, CE, X, y, [b.name])
        assert rel(b.wHw, ref["wHw"]) < 1e-10 and rel(b.coupled, ref["coupled"]) < 1e-10


@pytest.mark.parametrize("case", ["tanh", "cross-layer block", "inverse", "sequence input"])
def test_falls_back_where_the_identity_does_not_hold(case):
    net, X, y = mlp([3, 4, 2], seed=1), *data(6, (3,), 2)
    kwargs: dict = {"inverse": False}
    if case == "tanh":
        net = mlp([3, 4, 2], act="tanh", seed=1)
    elif case == "cross-layer block":
        kwargs["blocks"] = {"both": ["0.weight", "2.weight"]}
    elif case == "inverse":
        kwargs["inverse"] = True
    else:
        X, y = torch.randn(6, 5, 3, dtype=torch.float64), torch.randn(6, 5, 2, dtype=torch.float64)
    d = diagnose(net, MSE if case == "sequence input" else CE, (X, y), **kwargs)
    assert d.meta["wHw_route"] == "hvp"
    if case == "cross-layer block":  # the cross-layer second derivative is real: brute force includes it
        ref = reference_block(net, CE, X, y, ["0.weight", "2.weight"])
        assert rel(d["both"].wHw, ref["wHw"]) < 1e-10


def test_negative_control_the_gate_matters():
    """Forcing the tangent formula on a Tanh net (treated as if linear) gives a wrong wᵀHw."""
    net = mlp([3, 4, 2], act="tanh", seed=1)
    X, y = data(6, (3,), 2)
    assert single_layer_blocks(net, {"0.weight": ["0.weight"]}) is None
    forced, _, _ = block_quadratic_forms(net, CE, prepare_batches((X, y), CE), {"0.weight": (0, ["0.weight"])})
    ref = reference_block(net, CE, X, y, ["0.weight"])
    assert rel(forced["0.weight"], ref["wHw"]) > 1e-3
