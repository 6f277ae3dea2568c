"""The T2 maps preserve the function, return new models, and refuse what they cannot do exactly."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.symmetries.homogeneous import (
    function_gap,
    layer_rescale,
    neuron_rescale,
    permute_neurons,
)
from tests.numeric._nets import cnn, data, mlp


@settings(max_examples=15)
@given(
    widths=st.lists(st.integers(2, 7), min_size=1, max_size=4),
    bias=st.booleans(),
    act=st.sampled_from(["relu", "leaky"]),
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["layer", "neuron", "perm"]),
)
def test_maps_preserve_the_function(widths, bias, act, seed, kind):
    model = mlp([3, *widths, 2], bias=bias, act=act, seed=seed)
    X, _ = data(20, (3,), 2, seed=seed)
    rng = np.random.default_rng(seed)
    layer = int(rng.integers(len(widths)))
    units = widths[layer]
    if kind == "layer":
        new = layer_rescale(model, layer, float(10 ** rng.uniform(-3, 3)))
    elif kind == "neuron":
        new = neuron_rescale(model, layer, 10 ** rng.uniform(-2, 2, units))
    else:
        new = permute_neurons(model, layer, rng.permutation(units))
    with torch.no_grad():
        scale = float(model(X).abs().max())
    assert function_gap(model, new, X) <= 1e-12 * max(scale, 1.0)
    assert new is not model
    changed = [n for (n, p), (_, q) in zip(model.named_parameters(), new.named_parameters()) if not torch.equal(p, q)]
    assert changed, "the map must change the parameters (negative control for a no-op)"


def test_cnn_maps_preserve_the_function_across_pooling_and_flatten():
    model = cnn(seed=1)
    X, _ = data(6, (1, 8, 8), 3)
    for new in (
        layer_rescale(model, 0, 3.0),
        layer_rescale(model, 1, 0.01),
        neuron_rescale(model, 1, [0.5, 2.0, 3.0, 7.0]),
        permute_neurons(model, 1, [3, 1, 0, 2]),
    ):
        assert function_gap(model, new, X) <= 1e-12


def test_a_wrong_compensation_is_detected_by_function_gap():
    model = mlp([3, 4, 2], seed=0)
    X, _ = data(10, (3,), 2)
    broken = layer_rescale(model, 0, 2.0)
    with torch.no_grad():
        broken[2].weight.mul_(2.0)  # undo the compensation: no longer the same function
    assert function_gap(model, broken, X) > 1e-3


def test_user_model_is_untouched():
    model = mlp([3, 4, 2], seed=0)
    snap = [p.detach().clone() for p in model.parameters()]
    layer_rescale(model, 0, 5.0)
    neuron_rescale(model, 0, [1, 2, 3, 4])
    permute_neurons(model, 0, [1, 0, 3, 2])
    assert all(torch.equal(a, b) for a, b in zip(snap, model.parameters()))


@pytest.mark.parametrize("act", [nn.Tanh(), nn.GELU(), nn.Sigmoid(), nn.BatchNorm1d(4)])
def test_refuses_non_homogeneous_activation_naming_the_module(act):
    model = nn.Sequential(nn.Linear(3, 4), act, nn.Linear(4, 2))
    with pytest.raises(UnsupportedModelError, match=f"'1' \\({type(act).__name__}\\)"):
        layer_rescale(model, 0, 2.0)


def test_bad_arguments():
    model = mlp([3, 4, 2])
    with pytest.raises(InvalidInputError, match="0..0"):
        layer_rescale(model, 1, 2.0)  # the last weight layer has no next layer
    with pytest.raises(InvalidInputError, match="positive"):
        layer_rescale(model, 0, -1.0)
    with pytest.raises(InvalidInputError, match="4 units"):
        neuron_rescale(model, 0, [1.0, 2.0])
    with pytest.raises(InvalidInputError, match="positive"):
        neuron_rescale(model, 0, [1.0, 0.0, 1.0, 1.0])
    with pytest.raises(InvalidInputError, match="permutation"):
        permute_neurons(model, 0, [0, 0, 1, 2])
    with pytest.raises(UnsupportedModelError, match="nn.Sequential"):
        layer_rescale(nn.Linear(3, 2), 0, 2.0)
