"""Hostile inputs to certify and certify_invariance (issue 34): each either gives balls that contain
an independent float64 value, or our error with a message that says what to do, before any work;
never a false certificate, never a raw exception."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import CoupledCurvatureError, InvalidInputError, TrainModeError, UnsupportedModelError
from coupled_curvature.numeric.certify.api import certify
from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.invariance import certify_invariance
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale
from tests.reliability._common import FIX, assert_names_fix, assert_unchanged, snapshot


def net463(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).double()


def data16(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(16, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (16,), generator=g)


def float64_D(model: nn.Module, loss_fn, X, y, name: str) -> float:
    """``D`` of block ``name`` by torch autograd in float64 (the model's own forward and loss)."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    w = params[name]

    def L(v):
        return loss_fn(torch.func.functional_call(model, {**params, name: v}, (X,)), y)

    g = torch.func.grad(L)(w).reshape(-1)
    H = torch.func.hessian(L)(w).reshape(w.numel(), -1)
    v = w.reshape(-1)
    return float((v @ H @ v / (v @ v)) / (g @ g))


def close(ball: Ball, x: float, rtol: float = 1e-9) -> bool:
    return abs(Fraction(x) - ball.mid) <= Fraction(rtol) * abs(ball.mid) + ball.rad


@pytest.mark.parametrize("loss_fn", [nn.CrossEntropyLoss(ignore_index=1),
                                     nn.CrossEntropyLoss(weight=torch.tensor([0.2, 3.0, 1.0], dtype=torch.float64), label_smoothing=0.2),
                                     nn.CrossEntropyLoss(ignore_index=0, reduction="sum", label_smoothing=0.1)])
def test_case1_cross_entropy_options_give_the_true_D(loss_fn):
    """Before: ignore_index was ignored, a tight ball around the D of the plain loss (0.40 vs 0.14)."""
    model, (X, y) = net463(), data16()
    cert = certify(model, loss_fn, (X, y), prec=128)
    plain = certify(model, nn.CrossEntropyLoss(reduction=loss_fn.reduction), (X, y), prec=128)
    for name in ("0.weight", "2.weight"):
        true = float64_D(model, loss_fn, X, y, name)
        assert close(cert[name].coupled, true), (name, cert[name].coupled, true)
        assert not close(plain[name].coupled, true)  # negative control: the old answer is far off


class Tempered(nn.CrossEntropyLoss):
    def forward(self, f, y):
        return super().forward(f / 0.5, y)


class RootMSE(nn.MSELoss):
    def forward(self, f, y):
        return super().forward(f, y).sqrt()


@pytest.mark.parametrize("loss_fn, targets", [(Tempered(), "labels"), (RootMSE(), "values"),
                                              (nn.L1Loss(), "values"), (lambda f, y: ((f - y) ** 2).mean(), "values"),
                                              (nn.NLLLoss(), "labels")])
def test_cases2_3_unknown_losses_are_refused(loss_fn, targets):
    """Before: a subclass's forward was ignored (ball around 0.40, true D 0.20; the root MSE 0.60 vs 0.99)."""
    X, y = data16()
    y = y if targets == "labels" else torch.randn(16, 3, dtype=torch.float64)
    with pytest.raises(InvalidInputError, match="must know exactly what it computes") as e:
        certify(net463(), loss_fn, (X, y), prec=128)
    assert_names_fix(e)


def test_a_loss_with_a_hook_or_a_replaced_forward_is_refused():
    X, y = data16()
    hooked = nn.CrossEntropyLoss()
    hooked.register_forward_hook(lambda m, i, out: out * 2)
    patched = nn.CrossEntropyLoss()
    patched.forward = lambda f, t: nn.functional.cross_entropy(f * 3, t)
    for loss_fn in (hooked, patched):
        with pytest.raises(InvalidInputError, match="hooks") as e:
            certify(net463(), loss_fn, (X, y), prec=128)
        assert_names_fix(e)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 3)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_case4_tied_weights_are_refused_before_any_work():
    """Before: KeyError: 'b.weight'."""
    model = Tied().double()
    snap = snapshot(model)
    with pytest.raises(UnsupportedModelError, match="'a.weight' and 'b.weight' are one tensor") as e:
        certify(model, nn.CrossEntropyLoss(), data16(), prec=128)
    assert_names_fix(e)
    assert_unchanged(model, snap)


def test_case5_a_linear_on_3d_inputs_is_refused_with_the_module_and_shape():
    """Before: flint's ValueError (incompatible shapes for matrix multiplication)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Flatten(), nn.Linear(12, 3)).double()
    X, y = torch.randn(16, 2, 4, dtype=torch.float64), data16()[1]
    with pytest.raises(InvalidInputError, match=r"module '0' \(Linear\) receives per-sample inputs of shape \(2, 4\)") as e:
        certify(model, nn.CrossEntropyLoss(), (X, y), prec=128)
    assert_names_fix(e)
    with pytest.raises(InvalidInputError, match=r"\(16, 2, 3\)") as e:  # no Flatten: a 3-D output
        certify(net463(), nn.CrossEntropyLoss(), (X, y), prec=128)
    assert_names_fix(e)


@pytest.mark.parametrize("factor", [1e200, 1e-200, 1e300])
def test_case6_certify_after_an_extreme_layer_rescale(factor):
    """Before: numpy LinAlgError (Eigenvalues did not converge). D and D⁺ are invariant (T3)."""
    model, data = net463(), data16()
    ref = certify(model, nn.CrossEntropyLoss(), data, prec=128)
    cert = certify(layer_rescale(model, 0, factor), nn.CrossEntropyLoss(), data, prec=128)
    for b in cert:
        r = ref[b.name]
        assert b.coupled is not None and b.inverse_coupled is not None, (b.reason, b.inverse_reason)
        # the float64 rescaling rounds the weights (1e200 is not a power of two): equal to that rounding
        assert close(b.coupled, float(r.coupled.mid), 1e-12) and close(b.inverse_coupled, float(r.inverse_coupled.mid), 1e-10)
        assert b.rayleigh.excludes_zero() and str(b.rayleigh)  # readable beyond the float64 range
    assert not close(cert["0.weight"].rayleigh, float(ref["0.weight"].rayleigh.mid))  # RQ does move


@pytest.mark.parametrize("factor", [Fraction(10**200), Fraction(1, 10**200)])
def test_case6_certify_invariance_with_an_extreme_factor(factor):
    inv = certify_invariance(net463(), nn.CrossEntropyLoss(), data16(), ("layer_rescale", 0, factor), prec=128)
    for b in inv:
        assert 0 in b.coupled_change and 0 in b.inverse_coupled_change, b.name
        assert 0 < b.coupled_change_relative < 1e-30
    assert inv["0.weight"].rayleigh_change.excludes_zero()


def test_case7_batchnorm_with_zero_variance_and_eps_is_refused():
    """Before: ArithmeticError: the ball nan is not finite."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, eps=0.0), nn.ReLU(), nn.Linear(6, 3)).double().eval()
    model[1].running_var[2] = 0.0
    with pytest.raises(InvalidInputError, match=r"module '1' \(BatchNorm1d\).*channel 2.*eps") as e:
        certify(model, nn.CrossEntropyLoss(), data16(), prec=128)
    assert_names_fix(e)
    model[1].running_var[2] = 1.0
    model[1].running_mean[0] = float("inf")
    with pytest.raises(InvalidInputError, match="running_mean holds non-finite") as e:
        certify(model, nn.CrossEntropyLoss(), data16(), prec=128)
    assert_names_fix(e)


def test_case8_train_mode_advice_is_model_eval():
    """Before: the advice was allow_train_mode=True, which certify does not take."""
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3)).double()
    for call in (lambda: certify(model, nn.CrossEntropyLoss(), data16(), prec=128),
                 lambda: certify_invariance(model, nn.CrossEntropyLoss(), data16(), ("layer_rescale", 0, 2.0))):
        with pytest.raises(TrainModeError, match=r"model\.eval\(\)") as e:
            call()
        assert "allow_train_mode" not in str(e.value)
        assert_names_fix(e)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(bits=st.integers(1, 20_000), mid=st.integers(1, 2**60))
def test_case9_relative_width_is_never_zero_for_a_nonzero_radius(bits, mid):
    """Before: 0.0 above about 1,100 bits."""
    b = Ball(Fraction(mid), Fraction(mid) + Fraction(1, 2**bits))
    assert b.relative_width > 0
    m = b.mid
    assert abs(b.relative_width_log2 - (-bits - (math.log2(m.numerator) - math.log2(m.denominator)))) < 1e-9
    assert Ball(Fraction(mid), Fraction(mid)).relative_width == 0.0  # a point: exactly 0 (control)


def test_case9_certify_at_2000_bits_reads_its_width():
    from flint import arb, ctx

    cert = certify(net463(), nn.CrossEntropyLoss(), data16(), prec=2000, inverse=False)
    d = cert["0.weight"].coupled
    assert d.relative_width > 0 and -2000 < d.relative_width_log2 < -1900
    saved, ctx.prec = ctx.prec, 4000
    try:
        assert from_arb(arb(1) / 3).relative_width > 0
    finally:
        ctx.prec = saved


def test_case10_progress_and_bounded_chunks(capsys, monkeypatch):
    """Before: no progress at all. Stages and a block count go to stderr; the Linear Hessian's
    bounded-memory chunks give the same balls as one product (chunk of one unit pair/sample)."""
    import coupled_curvature.numeric.certify.hessian as hessian

    model, data = net463(), data16()
    whole = certify(model, nn.CrossEntropyLoss(), data, prec=128, progress=True)
    err = capsys.readouterr().err
    assert "certify: forward pass" in err and "certify 4/4" in err and "2.bias" in err
    certify(model, nn.CrossEntropyLoss(), data, prec=128, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(hessian, "_CHUNK", 1)
    chunked = certify(model, nn.CrossEntropyLoss(), data, prec=128)
    for n in whole.names():  # the sums run in another order: other balls, around the same number
        a, b = chunked[n].inverse_coupled, whole[n].inverse_coupled
        assert a.lower <= b.upper and b.lower <= a.upper and a.relative_width < 1e-10, n
    with pytest.raises(InvalidInputError, match="progress") as e:
        certify(model, nn.CrossEntropyLoss(), data, progress="yes")
    assert_names_fix(e)


CE_OPTIONS = st.fixed_dictionaries({
    "weight": st.one_of(st.none(), st.lists(st.sampled_from([0.0, 0.5, 2.0]), min_size=3, max_size=3),
                        st.lists(st.sampled_from([0.0, 0.5, 2.0, -1.0, float("nan")]), min_size=2, max_size=4)),
    "ignore_index": st.sampled_from([-100, 0, 1, 2]),
    "label_smoothing": st.sampled_from([0.0, 0.3, 1.0]),
    "reduction": st.sampled_from(["mean", "sum", "mean", "sum", "none"]),
})


@settings(max_examples=50, derandomize=True, deadline=None)
@given(options=CE_OPTIONS, labels=st.lists(st.integers(0, 2), min_size=4, max_size=4), batches=st.booleans())
def test_random_cross_entropy_options_give_a_true_loss_or_our_error(options, labels, batches):
    """Any option mix: the certified loss contains torch's (float64, to rounding), or our error with a fix."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3)).double()
    X, y = torch.randn(4, 3, dtype=torch.float64), torch.tensor(labels)
    w = options["weight"]
    loss_fn = nn.CrossEntropyLoss(**{**options, "weight": None if w is None else torch.tensor(w, dtype=torch.float64)})
    data = [(X[:2], y[:2]), (X[2:], y[2:])] if batches else (X, y)
    try:
        cert = certify(model, loss_fn, data, prec=128, inverse=False)
    except CoupledCurvatureError as e:
        assert FIX.search(str(e)) and "Traceback" not in str(e), str(e)
        return
    with torch.no_grad():
        parts = [(float(loss_fn(model(Xb), yb)), len(Xb)) for Xb, yb in (data if batches else [data])]
    total = sum(v * (n / 4 if options["reduction"] == "mean" else 1.0) for v, n in parts)
    assert math.isfinite(total) and close(cert.loss, total, 1e-12)
