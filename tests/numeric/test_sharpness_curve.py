"""The radius sweep: it is the point measures at each radius, common random numbers across radii, the
rescaled twin's raw curve shifts while its adaptive curves coincide, bad radii."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.measures.registry import (adaptive_average_measure, adaptive_worst_measure,
                                                         sam_sharpness_measure)
from coupled_curvature.numeric.measures.sharpness_curve import DEFAULT_RADII, sharpness_curve
from coupled_curvature.numeric.studies.sharpness_twin import curve_gap, twin_curves
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale
from tests.numeric._nets import data, mlp

pytestmark = pytest.mark.usefixtures("one_thread")

RADII = (0.01, 0.05, 0.2)


def _setup():
    return mlp([3, 5, 4, 2], seed=4), nn.CrossEntropyLoss(), data(20, (3,), 2, seed=5)


@pytest.mark.parametrize("adaptive,average,point", [(False, False, sam_sharpness_measure),
                                                    (True, False, adaptive_worst_measure),
                                                    (True, True, adaptive_average_measure)])
def test_each_value_is_the_point_measure_at_that_radius(adaptive, average, point):
    net, loss, d = _setup()
    curve = sharpness_curve(net, loss, d, RADII, adaptive=adaptive, average=average, seed=3, samples=8)
    for rho, v in zip(RADII, curve.values):
        opts = {"samples": 8, "seed": 3} if average else {}
        assert v == point(net, loss, d, rho=rho, **opts)["value"]
    assert curve.adaptive == adaptive and len(curve.stderr) == len(RADII)


def test_default_radii_are_log_spaced():
    net, loss, d = _setup()
    r = np.log10(sharpness_curve(net, loss, d, steps=1).radii)
    assert len(r) >= 5 and np.allclose(np.diff(r), r[1] - r[0]) and r[0] < -2 and r[-1] >= 0
    assert sharpness_curve(net, loss, d, steps=1).radii == DEFAULT_RADII


def test_common_random_numbers_make_a_quadratic_exactly_a_polynomial_in_the_radius():
    # L(θ) = Σ a_i θ_i² + b·θ: with the same unit draws ε_k at every radius, the average increase is
    # exactly αρ + βρ² (α, β fixed by the draws), so three radii predict a fourth to round-off.
    # Fresh draws per radius (different seeds) break it: the control.
    class Quad(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([0.7, -1.2, 0.4, 0.9], dtype=torch.float64))
            self.register_buffer("a", torch.tensor([1.0, 3.0, 0.5, 2.0], dtype=torch.float64))
            self.register_buffer("b", torch.tensor([0.3, 0.1, -0.2, 0.5], dtype=torch.float64))

        def forward(self, x):
            return ((self.a * self.w * self.w).sum() + (self.b * self.w).sum()) * torch.ones_like(x)

    class MeanLoss(nn.Module):
        reduction = "mean"

        def forward(self, out, y):
            return out.mean()

    net, loss = Quad(), MeanLoss()
    X = torch.zeros(2, 1, dtype=torch.float64)
    radii = (0.1, 0.2, 0.4, 0.8)

    def residual(vals):  # fit αρ + βρ² on the first two radii, predict the last two
        coef = np.linalg.solve(np.array([[r, r * r] for r in radii[:2]]), np.array(vals[:2]))
        pred = np.array([[r, r * r] for r in radii[2:]]) @ coef
        return float(np.max(np.abs(pred - np.array(vals[2:])) / np.abs(np.array(vals[2:]))))

    crn = sharpness_curve(net, loss, (X, X), radii, adaptive=True, average=True, samples=16, seed=1).values
    assert min(crn) > 0 and residual(crn) < 1e-10
    fresh = [sharpness_curve(net, loss, (X, X), (r,), adaptive=True, average=True, samples=16, seed=s).values[0]
             for s, r in enumerate(radii)]
    assert residual(fresh) > 1e-3


@pytest.mark.parametrize("c", [4.0, 0.3])
def test_raw_curve_of_the_rescaled_twin_shifts_and_adaptive_curves_coincide(c):
    net, loss, d = _setup()
    t = twin_curves(net, loss, d, layer=1, c=c, radii=RADII, steps=5)
    assert t.function_gap < 1e-12
    assert t.raw_gap > 0.05  # raw ℓ2 sharpness sees the coordinates
    assert t.adaptive_gap < 1e-9  # exact up to the rounding of the rescaled weights
    avg = [sharpness_curve(m, loss, d, RADII, adaptive=True, average=True, samples=8)
           for m in (net, layer_rescale(net, 1, c))]
    assert curve_gap(*avg) < 1e-9


@pytest.mark.parametrize("radii", [[0.0], [-0.1, 0.2], [float("nan")], [float("inf")], [], [0.1, 0.1], [0.2, 0.1],
                                   "ab", 0.1, [True]])
def test_bad_radii(radii):
    net, loss, d = _setup()
    with pytest.raises(InvalidInputError, match="radii"):
        sharpness_curve(net, loss, d, radii)


def test_average_needs_adaptive_and_counts_are_checked():
    net, loss, d = _setup()
    with pytest.raises(InvalidInputError, match="adaptive=True"):
        sharpness_curve(net, loss, d, RADII, average=True)
    with pytest.raises(InvalidInputError, match="steps"):
        sharpness_curve(net, loss, d, RADII, steps=0)
    assert math.isfinite(sharpness_curve(net, loss, d, RADII, steps=1).values[0])


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6))
@settings(max_examples=60)
def test_radii_are_accepted_exactly_when_finite_positive_increasing(radii):
    from coupled_curvature.numeric.measures.sharpness_curve import check_radii

    good = all(math.isfinite(r) and r > 0 for r in radii) and all(b > a for a, b in zip(radii, radii[1:]))
    if good:
        assert check_radii(radii) == tuple(radii)
    else:
        with pytest.raises(InvalidInputError, match="radii"):
            check_radii(radii)
