"""λ's meaning for a band-limited signal: the rate of ‖Dⁿf‖ recovers log Ω within the stated bound."""

import math

import pytest

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.studies.band_limited import band_limited_rate


@pytest.mark.parametrize("omega", [12, 50, 100])
def test_rate_recovers_log_omega_within_the_stated_bound(omega):
    r = band_limited_rate(omega, orders=tuple(range(10, 31)))
    assert r.within_bound and r.error <= r.bound + 1e-9 and r.bound < 0.05


def test_log_norms_match_parseval_and_do_not_depend_on_the_phases():
    omega = 30
    a, b = band_limited_rate(omega, seed=0), band_limited_rate(omega, seed=7)
    for n, v in zip(a.orders, a.log_norms):
        exact = 0.5 * (math.log(sum(k ** (2 * n) for k in range(1, omega + 1))) - math.log(2))
        assert abs(v - exact) < 1e-12 * max(1.0, abs(exact))
    assert max(abs(x - y) for x, y in zip(a.log_norms, b.log_norms)) < 1e-12


def test_the_bound_tightens_with_the_order_and_the_rate_follows_the_band():
    low, high = band_limited_rate(50, orders=tuple(range(5, 16))), band_limited_rate(50, orders=tuple(range(40, 61)))
    assert high.bound < low.bound / 4 and high.error < low.error
    # control: halving the band moves the rate by log 2 (the fit is not a constant)
    half = band_limited_rate(25, orders=tuple(range(40, 61)))
    assert abs((high.rate - half.rate) - math.log(2)) < high.bound + half.bound


@pytest.mark.parametrize("kw", [{"orders": (3, 5)}, {"orders": (0, 1)}, {"orders": (4,)}, {"omega": 0},
                                {"omega": 600, "samples": 1024}, {"orders": (2.0, 3.0)}])
def test_bad_input(kw):
    with pytest.raises(InvalidInputError):
        band_limited_rate(**kw)
