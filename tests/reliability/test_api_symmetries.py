"""Symmetry maps and function_gap refuse hostile factors, indices and inputs with a fix, never NaN."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, layer_rescale, neuron_rescale, permute_neurons
from tests.reliability._common import assert_finite, assert_names_fix, assert_unchanged, batch, net, snapshot

CE = torch.nn.CrossEntropyLoss()


def _refused(fn, model, *args, error=InvalidInputError, match=None):
    snap = snapshot(model)
    with pytest.raises(error, match=match) as excinfo:
        fn(model, *args)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)
    return str(excinfo.value)


def _all_finite(model) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


# --- factors outside the dtype's range: refused with the dtype and the usable range ---------------


@pytest.mark.parametrize(
    "dtype, c",
    [(torch.float32, 1e300), (torch.float32, 1e-300), (torch.float32, 1e39), (torch.float32, 1e-39),
     (torch.float32, 1e37), (torch.float16, 1e6), (torch.float16, 1e-6), (torch.float64, 1e308),
     (torch.float64, 1e-308)],
)
def test_layer_rescale_outside_the_dtype_range_is_refused(dtype, c):
    message = _refused(layer_rescale, net(dtype=dtype), 0, c, match="usable range")
    assert str(dtype) in message and ".double()" in message


@pytest.mark.parametrize("c", [float("inf"), float("nan"), 0.0, -1.0, -1e-3, "abc", "8", True, None, 1 + 2j,
                               [2.0], torch.tensor([1.0, 2.0])])
def test_layer_rescale_refuses_non_factors(c):
    _refused(layer_rescale, net(), 0, c)


@pytest.mark.parametrize("layer", [True, 1.0, -1, 1, 99, "0"])
def test_layer_argument_must_be_a_valid_weight_layer_index(layer):
    _refused(layer_rescale, net(), layer, 2.0, match="layer")


@settings(derandomize=True, max_examples=30)
@given(exponent=st.integers(39, 400), sign=st.sampled_from([1, -1]))
def test_generated_huge_factors_on_float32_are_refused(exponent, sign):
    model = net(dtype=torch.float32)
    snap = snapshot(model)
    with pytest.raises(InvalidInputError, match="float32") as excinfo:
        layer_rescale(model, 0, 10.0 ** (sign * min(exponent, 307)))
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)


@settings(derandomize=True, max_examples=20)
@given(log_c=st.floats(-6, 6))
def test_generated_factors_in_range_are_exact_symmetries(log_c):
    model = net(dtype=torch.float32)
    X, _ = batch()
    moved = layer_rescale(model, 0, 10.0**log_c)
    assert moved.parameters().__next__().dtype == torch.float32 and _all_finite(moved)
    gap = function_gap(model, moved, X)
    assert math.isfinite(gap) and gap < 1e-4


@pytest.mark.parametrize(
    "scales, match",
    [([1.0, 1e300, 1.0, 1.0], "usable range"), ([1.0, 1e-300, 1.0, 1.0], "usable range"),
     ([1.0, float("nan"), 1.0, 1.0], "finite and positive"), ([1.0, 0.0, 1.0, 1.0], "finite and positive"),
     ([1.0, -2.0, 1.0, 1.0], "finite and positive"), ([1.0, 2.0], "one per unit"), ("1234", "real numbers"),
     ([True, True, True, True], "real numbers"), ([1.0, "a", 1.0, 1.0], "real numbers"), (None, "real numbers")],
)
def test_neuron_rescale_refuses_bad_scales(scales, match):
    _refused(neuron_rescale, net(dtype=torch.float32), 0, scales, match=match)


@pytest.mark.parametrize(
    "perm, match",
    [([0.5, 1.2, 2.7, 3.1], "integer"), ([3.0, 2.0, 1.0, 0.0], "integer"), (np.array([0.0, 1.0, 2.0, 3.0]), "integer"),
     ([True, False, True, False], "integer"), ("0123", "integer"), ([0, 0, 1, 2], "permutation"),
     ([0, 1, 2, 5], "permutation"), ([-1, 0, 1, 2], "permutation"), ([0, 1, 2], "permutation"),
     (torch.tensor([0.0, 1.0, 2.0, 3.0]), "integer"), ([[0, 1], [2, 3]], "flat list"), (None, "integer")],
)
def test_permute_neurons_refuses_non_permutations(perm, match):
    _refused(permute_neurons, net(), 0, perm, match=match)


def test_integer_permutations_of_every_kind_are_accepted():
    model = net()
    X, _ = batch()
    for perm in ([3, 1, 0, 2], np.array([3, 1, 0, 2]), torch.tensor([3, 1, 0, 2], dtype=torch.int32)):
        assert function_gap(model, permute_neurons(model, 0, perm), X) < 1e-12


# --- the result keeps the model's dtype; .double() gives the float64 invariance -------------------


def test_float32_model_stays_float32_and_double_gives_float64_invariance():
    model = net((4, 8, 3), dtype=torch.float32)
    X, y = batch(64, 4, 3)
    moved32 = layer_rescale(model, 0, 1000.0)
    assert all(p.dtype == torch.float32 for p in moved32.parameters())
    d = diagnose(model, CE, (X, y))["0.weight"].coupled
    rel32 = abs(diagnose(moved32, CE, (X, y))["0.weight"].coupled - d) / abs(d)
    assert 1e-12 < rel32 < 1e-5  # float32 rounding of the rescaled weights, as the README says
    model64 = model.double()
    d64 = diagnose(model64, CE, (X, y))["0.weight"].coupled
    rel64 = abs(diagnose(layer_rescale(model64, 0, 1000.0), CE, (X, y))["0.weight"].coupled - d64) / abs(d64)
    assert rel64 < 1e-13
    for fn in (layer_rescale, neuron_rescale, permute_neurons):
        assert "dtype" in fn.__doc__


def test_non_uniform_neuron_rescale_still_changes_D():
    """Negative control (T5): a non-uniform scaling is not conformal, so D moves."""
    model = net((3, 4, 2))
    X, y = batch()
    before = diagnose(model, CE, (X, y))
    after = diagnose(neuron_rescale(model, 0, [1.0, 4.0, 0.25, 2.0]), CE, (X, y))
    assert_finite(before) and assert_finite(after)
    assert abs(after["0.weight"].coupled - before["0.weight"].coupled) > 1e-3 * abs(before["0.weight"].coupled)
    uniform = diagnose(neuron_rescale(model, 0, [3.0] * 4), CE, (X, y))
    assert abs(uniform["0.weight"].coupled - before["0.weight"].coupled) < 1e-12 * abs(before["0.weight"].coupled)


# --- function_gap checks its inputs as diagnose does -------------------------------------------


@pytest.mark.parametrize(
    "X, match",
    [(torch.full((3, 3), float("nan")), "non-finite"), (torch.full((3, 3), float("inf")), "non-finite"),
     ("abc", "torch.Tensor or numpy array"), (None, "torch.Tensor or numpy array"),
     (torch.ones(3, 3, dtype=torch.long), "float inputs"), (torch.ones(3, 5), "shape"),
     (np.array([[1.0, float("nan"), 0.0]]), "non-finite")],
)
def test_function_gap_refuses_bad_inputs(X, match):
    a, b = net(), net(seed=1)
    snaps = snapshot(a), snapshot(b)
    with pytest.raises(InvalidInputError, match=match) as excinfo:
        function_gap(a, b, X)
    assert_names_fix(excinfo)
    assert_unchanged(a, snaps[0]) and assert_unchanged(b, snaps[1])


def test_function_gap_refuses_non_finite_models_and_outputs():
    a, b = net(), net()
    with torch.no_grad():
        b[0].weight[0, 0] = float("nan")
    with pytest.raises(InvalidInputError, match="non-finite") as excinfo:
        function_gap(a, b, batch()[0])
    assert_names_fix(excinfo)
    big = net()
    with torch.no_grad():
        big[0].weight.fill_(1e200)
        big[2].weight.fill_(1e200)
    with pytest.raises(InvalidInputError, match="non-finite outputs"):
        function_gap(a, big, batch()[0] + 10.0)


def test_function_gap_valid_call_is_finite():
    a = net()
    gap = function_gap(a, net(seed=1), batch()[0])
    assert_finite(gap) and gap > 0.0
    assert function_gap(a, a, batch()[0]) == 0.0


def test_meta_device_models_are_refused_by_the_maps():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4, device="meta"), torch.nn.ReLU(), torch.nn.Linear(4, 2, device="meta"))
    from coupled_curvature.base.errors import UnsupportedModelError

    for call in (lambda: layer_rescale(model, 0, 2.0), lambda: permute_neurons(model, 0, [1, 0, 2, 3])):
        with pytest.raises(UnsupportedModelError, match="meta device") as excinfo:
            call()
        assert_names_fix(excinfo)
