"""sharpness_curve, crr_penalty and training_step check every argument before any work, with our errors.

Each hostile argument is refused with an InvalidInputError that names it, before the model is copied or a
gradient is taken (the work is replaced by a tripwire), and the model is left as it was. A radius so large
that the perturbed loss overflows is our error, never 0.0.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.measures import sharpness_curve as curve_module
from coupled_curvature.numeric.measures.sharpness_curve import sharpness_curve
from coupled_curvature.numeric.training import crr as crr_module
from coupled_curvature.numeric.training.crr import crr_penalty
from coupled_curvature.numeric.training.step import make_optimizer, training_step
from tests.reliability._common import assert_names_fix, assert_unchanged, snapshot

CE = nn.CrossEntropyLoss()
#: numbers that are not finite and > 0, and things that are not numbers
NOT_POSITIVE = [-1.0, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), True, None, "0.5", [0.5], 1e-320 * 0]


def _net(act=nn.Tanh) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), act(), nn.Linear(6, 3)).double()


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (16,), generator=g)


X, Y = _data()


def _tripwire(*args, **kwargs):
    raise AssertionError("work started before the arguments were checked")


# --- sharpness_curve --------------------------------------------------------------------------------


@settings(derandomize=True, max_examples=25, deadline=None)
@given(lr=st.sampled_from(NOT_POSITIVE))
def test_sharpness_curve_refuses_a_bad_lr_before_any_work(lr):
    model = _net(nn.ReLU)
    snap = snapshot(model)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(curve_module, "FlatLoss", _tripwire)
        with pytest.raises(InvalidInputError, match="lr") as excinfo:
            sharpness_curve(model, CE, (X, Y), [0.1], lr=lr)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)


@pytest.mark.parametrize("radii", [[-1.0], [0.0], [float("nan")], [float("inf")], [0.1, 0.1], [0.2, 0.1], [], "0.1",
                                   [True]])
def test_sharpness_curve_refuses_bad_radii_before_any_work(radii, monkeypatch):
    monkeypatch.setattr(curve_module, "FlatLoss", _tripwire)
    with pytest.raises(InvalidInputError, match="radii"):
        sharpness_curve(_net(), CE, (X, Y), radii)


@pytest.mark.parametrize("kw,name", [({"steps": 0}, "steps"), ({"samples": -1}, "samples"), ({"seed": -1}, "seed"),
                                     ({"steps": 2.5}, "steps"), ({"adaptive": "yes"}, "adaptive"),
                                     ({"average": 1}, "average")])
def test_sharpness_curve_refuses_bad_counts_and_flags_before_any_work(kw, name, monkeypatch):
    monkeypatch.setattr(curve_module, "FlatLoss", _tripwire)
    with pytest.raises(InvalidInputError, match=name):
        sharpness_curve(_net(), CE, (X, Y), [0.1], **kw)


@pytest.mark.parametrize("kind", [{}, {"adaptive": True}, {"adaptive": True, "average": True}])
def test_an_overflowing_radius_is_our_error_never_zero(kind):
    model = _net(nn.ReLU)
    snap = snapshot(model)
    with pytest.raises(InvalidInputError, match="radius 1e\\+300") as excinfo:
        sharpness_curve(model, CE, (X, Y), [1e300], **kind)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)


def test_negative_control_a_valid_call_gives_finite_growing_values():
    c = sharpness_curve(_net(nn.ReLU), CE, (X, Y), [0.01, 0.1], lr=0.5)
    assert all(math.isfinite(v) for v in c.values) and 0.0 < c.values[0] <= c.values[1]


# --- crr_penalty ------------------------------------------------------------------------------------


def _all_frozen(model: nn.Module) -> nn.Module:
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def test_crr_penalty_refuses_no_grad_and_frozen_models_before_any_work(monkeypatch):
    monkeypatch.setattr(crr_module, "directional_derivatives", _tripwire)
    model = _net()
    snap = snapshot(model)
    with torch.no_grad(), pytest.raises(InvalidInputError, match="no_grad") as excinfo:
        crr_penalty(model, CE, X, Y)
    assert_names_fix(excinfo)
    with torch.inference_mode(), pytest.raises(InvalidInputError, match="gradients disabled"):
        crr_penalty(model, CE, X, Y)
    assert_unchanged(model, snap)
    frozen = _all_frozen(_net())
    with pytest.raises(InvalidInputError, match="requires a gradient") as excinfo:
        crr_penalty(frozen, CE, X, Y)
    assert_names_fix(excinfo)


@settings(derandomize=True, max_examples=15, deadline=None)
@given(scale=st.sampled_from([-1.0, float("nan"), float("inf"), True, None, "1e-3"]))
def test_crr_penalty_refuses_a_bad_scale_before_any_work(scale):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(crr_module, "directional_derivatives", _tripwire)
        with pytest.raises(InvalidInputError, match="scale"):
            crr_penalty(_net(), CE, X, Y, scale=scale)


def test_negative_control_crr_penalty_with_one_trainable_parameter_runs():
    model = _all_frozen(_net())
    model[0].weight.requires_grad_(True)
    p = crr_penalty(model, CE, X, Y, scale=1e-2)
    p.backward()
    assert model[0].weight.grad is not None and model[2].weight.grad is None


# --- training_step and make_optimizer ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["baseline", "crr", "sam", "asam"])
def test_training_step_refuses_no_grad_and_frozen_models_and_leaves_them_alone(method):
    pytest.importorskip("pytorch_optimizer")
    model = _net()
    opt = make_optimizer(model, method)
    snap = snapshot(model)
    with torch.no_grad(), pytest.raises(InvalidInputError, match="no_grad") as excinfo:
        training_step(model, CE, X, Y, opt, method)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)
    frozen = _net()
    opt = make_optimizer(frozen, method)
    _all_frozen(frozen)
    snap = snapshot(frozen)
    with pytest.raises(InvalidInputError, match="requires a gradient") as excinfo:
        training_step(frozen, CE, X, Y, opt, method)
    assert_names_fix(excinfo)
    assert_unchanged(frozen, snap)


def test_training_step_refuses_what_is_not_an_optimizer_and_a_bad_crr_scale():
    model = _net()
    snap = snapshot(model)
    with pytest.raises(InvalidInputError, match="optimizer"):
        training_step(model, CE, X, Y, object(), "baseline")
    with pytest.raises(InvalidInputError, match="crr_scale"):
        training_step(model, CE, X, Y, make_optimizer(model, "crr"), "crr", crr_scale=float("nan"))
    assert_unchanged(model, snap)


@settings(derandomize=True, max_examples=25, deadline=None)
@given(value=st.sampled_from(NOT_POSITIVE), name=st.sampled_from(["lr", "rho"]))
def test_make_optimizer_refuses_a_bad_lr_or_rho(value, name):
    pytest.importorskip("pytorch_optimizer")
    if name == "rho" and value is None:
        return  # None is rho's "use the method's default"
    kw = {name: value}
    with pytest.raises(InvalidInputError, match=name):
        make_optimizer(_net(), "sam", **kw)


def test_negative_control_a_valid_step_moves_the_model():
    model = _net()
    before = snapshot(model)["state"]
    r = training_step(model, CE, X, Y, make_optimizer(model, "baseline", lr=0.1), "baseline")
    assert math.isfinite(r.loss)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
