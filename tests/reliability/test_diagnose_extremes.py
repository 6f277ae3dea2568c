"""diagnose() never gives a silently wrong number at extreme scales or on a gradient that is zero to rounding.

D⁺ is invariant under a layer rescaling (T3) although wᵀH⁺w moves by c⁴: at every scale the dtype holds, every
D⁺ route (Gram, dense, Krylov, the per-sample factor) gives the unscaled value to 1e-8, or None with a note, or
our error naming the fix; never inf or 0.0, and never a warning (warnings are errors here).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric import diagnose, layer_rescale, neuron_rescale
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.factors.relu_mlp import with_factor_dplus
from tests.reliability._common import assert_finite, assert_names_fix, assert_unchanged, snapshot

CE = nn.CrossEntropyLoss()
METHODS = (None, "dense", "krylov")
RTOL = 1e-8
#: |k| up to this keeps every block sum (‖w‖², wᵀHw, the Hessian's entries) inside float64 for this net
SAFE_EXPONENT = 150


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).double()


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (16,), generator=g)


NET, DATA = _net(), _data()
BASE = {m: diagnose(NET, CE, DATA, method=m) for m in METHODS}


def _close(a: float, b: float, rtol: float = RTOL) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def _same_or_declared(base: Diagnosis, d: Diagnosis) -> None:
    """Every D and D⁺ equals the unscaled one to RTOL, or is None with a note that says it does not fit."""
    assert_finite(d)
    for b0, b in zip(base, d):
        for field in ("coupled", "inverse_coupled"):
            v0, v = getattr(b0, field), getattr(b, field)
            assert v0 is not None and v0 != 0.0
            if v is None:
                assert any("does not fit float64" in n for n in b.notes), (b.name, field, b.notes)
            else:
                assert _close(v, v0), (b.name, field, v, v0)


@settings(derandomize=True, max_examples=12, deadline=None)
@given(k=st.integers(-SAFE_EXPONENT, SAFE_EXPONENT), method=st.sampled_from(METHODS), layer=st.sampled_from((0,)))
def test_dplus_is_invariant_under_a_layer_rescaling_at_any_scale(k, method, layer):
    scaled = layer_rescale(NET, layer, 10.0**k)
    _same_or_declared(BASE[method], diagnose(scaled, CE, DATA, method=method))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("c", [1e100, 1e-100])
def test_the_reported_case_gives_the_unscaled_values(method, c):
    d = diagnose(layer_rescale(NET, 0, c), CE, DATA, method=method)
    _same_or_declared(BASE[method], d)
    assert all(b.inverse_coupled is not None for b in d)  # D⁺ itself fits: it must be given
    big = d["0.weight"]  # wᵀH⁺w ≈ c⁴·(unscaled) does not fit float64: None with a note, not inf or 0.0
    assert big.wHpinvw is None and any(n.startswith("wᵀH⁺w ≈ 1e") for n in big.notes)


@pytest.mark.parametrize("c", [1e100, 1e-100])
def test_the_per_sample_factor_route_is_invariant_too(c):
    X = DATA[0]
    base = with_factor_dplus(diagnose(NET, CE, DATA, inverse=False), NET, X)
    scaled_net = layer_rescale(NET, 0, c)
    d = with_factor_dplus(diagnose(scaled_net, CE, DATA, inverse=False), scaled_net, X)
    _same_or_declared(base, d)
    assert all(b.inverse_coupled is not None for b in d)


@settings(derandomize=True, max_examples=6, deadline=None)
@given(k=st.integers(155, 300), sign=st.sampled_from((1, -1)), method=st.sampled_from(METHODS))
def test_beyond_the_dtype_an_error_names_the_fix_never_a_number(k, sign, method):
    scaled = layer_rescale(NET, 0, 10.0 ** (sign * k))
    snap = snapshot(scaled)
    try:
        d = diagnose(scaled, CE, DATA, method=method)
    except InvalidInputError as e:
        assert_names_fix(pytest.ExceptionInfo.from_exc_info((type(e), e, e.__traceback__)))
    else:
        _same_or_declared(BASE[method], d)
    assert_unchanged(scaled, snap)


def test_negative_control_a_non_uniform_neuron_rescaling_moves_d():
    moved = diagnose(neuron_rescale(NET, 0, [1.0, 4.0, 0.25, 2.0, 0.5, 8.0]), CE, DATA)
    assert not _close(moved["0.weight"].coupled, BASE[None]["0.weight"].coupled, 1e-3)


# --- a gradient that is zero in exact arithmetic ----------------------------------------------------


class _Shifted(nn.Module):
    """The net plus one scalar added to every logit: softmax is shift invariant, so its gradient is exactly 0."""

    def __init__(self):
        super().__init__()
        self.net = _net()
        self.shift = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, x):
        return self.net(x) + self.shift


class _ScaleInvariant(nn.Module):
    """A first layer whose weight enters as v/‖v‖ (T10: L(s·v) = L(v), so vᵀg = 0 while g ≠ 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.v = nn.Parameter(torch.randn(6, 4, dtype=torch.float64))
        self.head = nn.Linear(6, 3).double()

    def forward(self, x):
        return self.head(torch.relu(x @ (3.0 * self.v / self.v.norm()).T))


@pytest.mark.parametrize("method", METHODS)
def test_a_gradient_zero_to_rounding_gives_no_d_and_says_why(method):
    d = diagnose(_Shifted(), CE, DATA, method=method)
    b = d["shift"]
    assert b.g_at_rounding and b.g_rounding is not None and math.sqrt(b.g_sq) <= b.g_rounding
    assert b.coupled is None and b.inverse_coupled is None
    assert any("zero to rounding" in n for n in b.notes)
    others = [x for x in d if x.name != "shift"]  # negative control: the real gradients are far above it
    assert others and all(not x.g_at_rounding and x.coupled is not None for x in others)
    back = Diagnosis.from_json(d.to_json())
    assert back["shift"].g_at_rounding and back["shift"].g_rounding == b.g_rounding


def test_a_scale_invariant_block_is_not_taken_for_a_zero_gradient():
    d = diagnose(_ScaleInvariant(), CE, DATA)
    b = d["v"]
    assert b.scale_invariant and not b.g_at_rounding
    assert b.coupled is not None and abs(b.coupled) < 1e-8  # T10: wᵀHw = 0, so D = 0
    assert any("scale-invariant" in n for n in b.notes) and not any("zero to rounding" in n for n in b.notes)


def test_an_exactly_zero_gradient_is_not_called_rounding():
    """A dead ReLU layer: every term of g is exactly 0 (g_rounding = 0), so g = 0 exactly and D⁺ = 0 is defined."""
    model = _net()
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.fill_(-1.0)
    b = diagnose(model, CE, DATA)["0.bias"]
    assert b.g_sq == 0.0 and b.g_rounding == 0.0 and not b.g_at_rounding
    assert b.coupled is None and b.inverse_coupled == 0.0
