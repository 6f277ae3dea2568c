"""Certified invariance (issue 24, T3/T5): the symmetry applied exactly in ball arithmetic."""

from __future__ import annotations

from fractions import Fraction

import pytest
from flint import arb
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.certify.api import evaluate, prepare
from coupled_curvature.numeric.certify.exact import exact_params
from coupled_curvature.numeric.certify.invariance import _output_gap, certify_invariance
from tests.numeric._nets import cnn, data, mlp
from tests.numeric.test_certify import residual_net

CE = nn.CrossEntropyLoss()
C = Fraction(37, 10)  # not dyadic: the rescaled weights are not float64 numbers


@pytest.fixture(scope="module")
def small():
    return mlp([3, 5, 4, 3], seed=0), data(16, (3,), 3, seed=0)


def test_layer_rescale_non_dyadic_both_halves(small, one_thread):
    """D and D⁺ unchanged (ball ∋ 0, narrower than 1e-30 relative); RQ and ‖g‖² of the affected blocks
    certainly changed (ball ∌ 0); the untouched blocks have exactly the same values."""
    model, (X, y) = small
    inv = certify_invariance(model, CE, (X, y), ("layer_rescale", 0, C))
    assert 0 in inv.output_gap
    for name in ("0.weight", "0.bias", "2.weight"):
        b = inv[name]
        assert 0 in b.coupled_change and b.coupled_change_relative < 1e-30
        assert 0 in b.inverse_coupled_change  # and the ball is narrow, so that this says something:
        assert b.inverse_coupled_change.width / abs(b.before.inverse_coupled.mid) < 1e-20
        assert b.rayleigh_change.excludes_zero() and b.sqnorm_grad_change.excludes_zero()
        # T3: RQ(Tθ) = c^{∓2}·RQ(θ), certified
        factor = C ** -2 if name.startswith("0.") else C ** 2
        assert factor * b.before.rayleigh.lower <= b.after.rayleigh.upper
        assert b.after.rayleigh.lower <= factor * b.before.rayleigh.upper
    for name in ("2.bias", "4.weight", "4.bias"):
        assert 0 in inv[name].rayleigh_change and 0 in inv[name].coupled_change


def test_negative_control_non_uniform_neuron_scaling(small, one_thread):
    """T5: a non-uniform neuron scaling is not conformal on the tensor blocks: D moves, certified."""
    model, (X, y) = small
    inv = certify_invariance(model, CE, (X, y), ("neuron_rescale", 0, [Fraction(1), Fraction(3), Fraction(1, 2),
                                                                        Fraction(7, 5), Fraction(2)]), inverse=False)
    assert 0 in inv.output_gap
    assert inv["0.weight"].coupled_change.excludes_zero()
    assert inv["2.weight"].coupled_change.excludes_zero()
    assert 0 in inv["4.weight"].coupled_change


def test_permutation_is_exact(small, one_thread):
    model, (X, y) = small
    inv = certify_invariance(model, CE, (X, y), ("permute_neurons", 1, [3, 1, 0, 2]))
    for b in inv:
        assert 0 in b.coupled_change and 0 in b.rayleigh_change and 0 in b.sqnorm_grad_change


def test_cnn_named_layer_rescale(one_thread):
    model = cnn(seed=0)
    X, y = data(4, (1, 8, 8), 3, seed=1)
    inv = certify_invariance(model, CE, (X, y), ("layer_rescale", ("0", "3"), C), inverse=False)
    assert 0 in inv["0.weight"].coupled_change and inv["0.weight"].coupled_change_relative < 1e-30
    assert inv["0.weight"].rayleigh_change.excludes_zero()
    assert 0 in inv["7.weight"].rayleigh_change


def test_batchnorm_source_rescale(one_thread):
    """The residual net's bn2 feeds a residual sum: refused by the path check; conv3 -> fc is fine after pooling."""
    model = residual_net()
    X, y = data(3, (1, 8, 8), 3, seed=2)
    with pytest.raises(InvalidInputError):
        certify_invariance(model, CE, (X, y), ("layer_rescale", ("bn2", "conv3"), C))
    inv = certify_invariance(model, CE, (X, y), ("layer_rescale", ("conv3", "fc"), C), inverse=False)
    assert 0 in inv["conv3.weight"].coupled_change and inv["conv3.weight"].rayleigh_change.excludes_zero()


@pytest.mark.parametrize("symmetry", [
    ("layer_rescale", 0, Fraction(-1)),
    ("layer_rescale", 0, "2"),
    ("stretch", 0, 2.0),
    ("neuron_rescale", 0, [1, 2]),
    ("permute_neurons", 0, [0, 0, 1, 2, 3]),
    ["layer_rescale", 0, 2.0],
])
def test_bad_symmetries(small, symmetry):
    model, (X, y) = small
    with pytest.raises(InvalidInputError):
        certify_invariance(model, CE, (X, y), symmetry)


def test_function_gap_checked_exactly(small):
    """Parameters that change the function are refused, with the output and the ball of its change."""
    model, (X, y) = small
    prep = prepare(model, CE, (X, y), prec=128)
    params = exact_params(prep.model64)
    moved = dict(params)
    moved["4.bias"] = params["4.bias"] * (1 + arb(2) ** -40)  # a tiny but certain change
    same, other = evaluate(prep, params, 128)[0], evaluate(prep, moved, 128)[0]
    assert 0 in _output_gap(same, same, 128)
    with pytest.raises(InvalidInputError, match="changes the function"):
        _output_gap(same, other, 128)
