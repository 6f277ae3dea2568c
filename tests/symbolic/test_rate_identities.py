"""λ's analytic identity in the symbolic layer: exact SymPy series of (1 − x/R)^(−k), the fitted rate
against −log R with the log-n correction, and the negative controls (no finite rate)."""

import math

import pytest
import sympy as sp

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic.rate_identities import (CASES, fit_rate, flat_function_derivation, pole_case,
                                                        predicted_bias, series_coefficients)

X = sp.Symbol("x")
ORDERS = tuple(range(10, 41))


@pytest.mark.parametrize("R,k", CASES)
def test_exact_coefficients_and_recovered_rate(R, k):
    c = pole_case(R, k, ORDERS)
    assert c.derivation.ok and len(c.derivation.steps) == 2
    assert all(s.method.kind.value == "exact" for s in c.derivation.steps)
    # independent of the module: the coefficients by the generalised binomial theorem, in Python fractions
    for n in (0, 1, 7, ORDERS[-1]):
        assert c.coefficients[n] == sp.Rational(math.comb(n + k - 1, k - 1)) / R**n
    # the fit misses −log R by exactly the bias that the exact coefficients predict (float round-off only)
    assert abs((c.corrected.slope - c.target) - c.predicted) < 1e-12
    if k == 1:
        assert c.error < 1e-12
    else:
        assert 0 < c.error < 1e-2  # O(1/n) remainder at orders 10..40
        assert c.plain_error > 5 * c.error  # without the log-n term the fit is biased by ≈ (k−1)/n


def test_higher_orders_shrink_the_third_order_pole_error():
    low, high = pole_case(sp.Rational(2, 5), 3, range(10, 21)), pole_case(sp.Rational(2, 5), 3, range(40, 81))
    assert high.error < low.error / 3


def test_a_wrong_claim_fails_the_exact_step():
    # control: the same checks with a coefficient off by one unit in the last place fail
    c = pole_case(sp.Rational(3, 2), 1, range(2, 8))
    from coupled_curvature.symbolic.derivation import exact_equal
    bad = list(c.coefficients)
    bad[5] += sp.Rational(1, 10**30)
    S = sum(b * X**n for n, b in enumerate(bad))
    low = sp.expand((1 - X / sp.Rational(3, 2)) * S)
    assert not exact_equal(sum(low.coeff(X, n) * X**n for n in range(8)), 1)


def test_non_analytic_function_has_no_finite_rate():
    d, fit = flat_function_derivation(10)
    assert d.ok and fit.slope is None and "no finite rate" in fit.reason
    assert all(cn == 0 for cn in series_coefficients(sp.exp(-1 / X**2), 10))
    # ... although the function is not zero: f(1/2) = e^(−4)
    assert sp.exp(-1 / X**2).subs(X, sp.Rational(1, 2)) == sp.exp(-4)


def test_zero_radius_series_has_no_finite_rate():
    # c_n = n! (Euler's divergent series): the windowed slope grows like log n without bound
    c = [sp.factorial(n) for n in range(0, 201)]
    slopes = [fit_rate(c, range(a, a + 20)).slope for a in (10, 50, 180)]
    assert slopes[0] < slopes[1] < slopes[2] and slopes[2] > math.log(180)


def test_predicted_bias_is_zero_for_a_simple_pole_and_shrinks():
    assert predicted_bias(1, ORDERS, False) == 0.0
    assert predicted_bias(3, range(40, 81), True) < predicted_bias(3, range(10, 41), True)


@pytest.mark.parametrize("orders", [(), (0, 1, 2), (3, 2), (2, 2), (1.5, 2)])
def test_bad_orders(orders):
    with pytest.raises(InvalidInputError, match="orders"):
        fit_rate([1] * 10, orders)


def test_bad_pole():
    with pytest.raises(InvalidInputError):
        pole_case(sp.Rational(-1, 2), 1, range(2, 5))
    with pytest.raises(InvalidInputError):
        pole_case(sp.Rational(1, 2), 0, range(2, 5))
