"""λ's analytic meaning: for ``f`` analytic at 0 with radius of convergence ``R``, the growth rate of the
factorial-normalised derivatives ``c_n = f⁽ⁿ⁾(0)/n!`` is ``−log R`` (Cauchy–Hadamard,
``limsup |c_n|^{1/n} = 1/R``).

For ``f = (1 − x/R)^{−k}`` (a pole of order ``k`` at ``R``) the coefficients are exactly
``c_n = C(n+k−1, k−1)·R^{−n}``, so ``log|c_n| = −n·log R + log C(n+k−1, k−1)`` and
``log C(n+k−1, k−1) = (k−1)·log n − log (k−1)! + O(1/n)``: a least-squares fit of ``log|c_n|`` on
``(n, log n, 1)`` recovers ``−log R`` up to the ``O(1/n)`` remainder, while a fit on ``(n, 1)`` alone is
biased by about ``(k−1)/n``. What is exact and what is evidence:

* exact (rational arithmetic, :func:`~coupled_curvature.symbolic.derivation.exact_equal`): the truncated
  SymPy series ``S_N`` satisfies ``(1 − x/R)^k·S_N = 1 + O(x^{N+1})`` (so its coefficients are the Taylor
  coefficients), and ``c_n·R^n / C(n+k−1, k−1) = 1`` for every ``n ≤ N``;
* evidence (a float fit, never proof): the fitted slope and its distance to ``−log R``;
* the negative control ``exp(−1/x²)`` (extended by 0): ``f⁽ⁿ⁾(x) = P_n(1/x)·e^{−1/x²}`` with
  ``P_{n+1}(t) = 2t³P_n(t) − t²P_n′(t)`` (exact), every Taylor coefficient at 0 is 0 (the limit
  ``P_n(1/x)e^{−1/x²} → 0``: SymPy's series, not a proof step), so ``log|c_n|`` is ``−∞`` at every
  order and no finite rate exists: the fit refuses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import sympy as sp

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic.derivation import Derivation

__all__ = ["CASES", "RateFit", "SeriesCase", "fit_rate", "flat_function_derivation", "pole_case", "predicted_bias",
           "rate_identities", "series_coefficients"]

X = sp.Symbol("x")
#: (R, pole order k) of the default cases: several rational radii, a simple pole and a third-order pole
CASES: tuple[tuple[sp.Rational, int], ...] = ((sp.Rational(1, 2), 1), (sp.Rational(3, 2), 1), (sp.Rational(7, 3), 1),
                                             (sp.Rational(2, 5), 3), (sp.Rational(5, 4), 3))


@dataclass(frozen=True)
class RateFit:
    """Least-squares slope of ``log|c_n|`` on ``n`` (with a ``log n`` column when ``log_correction``)."""

    slope: float | None
    orders: tuple[int, ...]
    log_correction: bool
    reason: str | None = None  # why there is no finite rate (``slope`` is None)


@dataclass(frozen=True)
class SeriesCase:
    """``f = (1 − x/R)^{−k}``: its exact coefficients, the exact checks, and the fitted rates (evidence)."""

    R: sp.Rational
    pole_order: int
    coefficients: tuple[sp.Rational, ...]  # c_0 … c_N, exact
    derivation: Derivation  # the exact steps
    corrected: RateFit  # fit on (n, log n, 1) for k > 1, on (n, 1) for k = 1
    plain: RateFit  # fit on (n, 1)
    predicted: float  # the corrected fit's signed error that the exact coefficients predict
    plain_predicted: float  # the same for the plain fit

    @property
    def target(self) -> float:
        """``−log R``."""
        return -math.log(float(self.R))

    @property
    def error(self) -> float:
        """``|fitted slope − (−log R)|`` of the corrected fit (float evidence)."""
        return abs(self.corrected.slope - self.target)  # type: ignore[operator]

    @property
    def plain_error(self) -> float:
        return abs(self.plain.slope - self.target)  # type: ignore[operator]


def series_coefficients(f: sp.Expr, order: int) -> tuple[sp.Rational, ...]:
    """``(c_0, …, c_order)``: the Taylor coefficients at 0 of ``f`` (in ``x``), from SymPy's exact series.

    >>> series_coefficients(1 / (1 - 2 * X), 3)
    (1, 2, 4, 8)
    """
    s = sp.series(f, X, 0, order + 1).removeO()
    return tuple(sp.Rational(sp.expand(s).coeff(X, n)) for n in range(order + 1))


def _log_abs(c: sp.Rational) -> float:
    """``log|c|`` of a non-zero rational, exact big integers to one float (no overflow)."""
    p, q = abs(int(c.p)), int(c.q)
    return math.log(p) - math.log(q)


def _lstsq_slope(rows: list[list[float]], values: list[float]) -> float:
    """The first coefficient of the least-squares solution (normal equations in exact rationals of the
    float inputs, so that the fit adds no round-off of its own)."""
    A = sp.Matrix([[sp.Rational(v) for v in r] for r in rows])
    b = sp.Matrix([sp.Rational(v) for v in values])
    return float((A.T * A).LUsolve(A.T * b)[0])


def fit_rate(coefficients: Sequence[sp.Rational], orders: Sequence[int], *, log_correction: bool = False) -> RateFit:
    """The growth rate of ``|c_n|`` over ``orders``: least-squares slope of ``log|c_n|`` on ``n`` (and
    ``log n``, with ``log_correction``, for a pole of order > 1). No finite rate when fewer than
    two (three with the correction) orders have ``c_n ≠ 0``: then ``slope`` is ``None`` with the reason.

    >>> fit_rate([sp.Rational(1, 3) ** n for n in range(8)], range(1, 8)).slope == -math.log(3)
    True
    >>> fit_rate([0] * 8, range(1, 8)).reason
    'every coefficient c_n with n in 1..7 is 0: log|c_n| = −∞, no finite rate'
    """
    orders = tuple(orders)
    if not orders or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in orders) or \
            any(b <= a for a, b in zip(orders, orders[1:])):
        raise InvalidInputError(f"orders must be strictly increasing positive ints, got {orders!r}")
    if orders[-1] >= len(coefficients):
        raise InvalidInputError(f"order {orders[-1]} needs coefficients up to it; {len(coefficients)} given")
    live = [n for n in orders if coefficients[n] != 0]
    need = 3 if log_correction else 2
    if len(live) < need:
        what = "every coefficient" if not live else f"all but {len(live)} coefficients"
        return RateFit(None, orders, log_correction,
                       f"{what} c_n with n in {orders[0]}..{orders[-1]} is 0: log|c_n| = −∞, no finite rate")
    rows = [[float(n), math.log(n), 1.0] if log_correction else [float(n), 1.0] for n in live]
    return RateFit(_lstsq_slope(rows, [_log_abs(sp.Rational(coefficients[n])) for n in live]), orders, log_correction)


def pole_case(R: sp.Rational, pole_order: int = 1, orders: Sequence[int] = tuple(range(10, 41))) -> SeriesCase:
    """``f = (1 − x/R)^{−k}``: exact series to the last order, exact checks, fitted rates.

    >>> c = pole_case(sp.Rational(3, 2), 1, range(2, 12))
    >>> c.derivation.ok, c.error < 1e-12
    (True, True)
    """
    R, k = sp.Rational(R), int(pole_order)
    if R <= 0 or k < 1:
        raise InvalidInputError(f"need R > 0 and a pole order k ≥ 1, got R = {R}, k = {k}")
    N = max(orders)
    f = (1 - X / R) ** (-k)
    c = series_coefficients(f, N)
    d = Derivation(f"λ analytic: pole of order {k} at R = {R}",
                   f"f = (1 − x/R)^(−{k}) has c_n = f⁽ⁿ⁾(0)/n! = C(n+{k - 1}, {k - 1})·R^(−n), so "
                   "log|c_n| = −n·log R + log C(n+k−1, k−1) and the growth rate is −log R",
                   [f"R = {R} > 0", f"orders 0..{N} of SymPy's series of f at 0"])
    S = sum(cn * X**n for n, cn in enumerate(c))
    low = sp.expand((1 - X / R) ** k * S)
    d.exact(f"(1 − x/R)^{k}·S_{N}(x) = 1 + O(x^{N + 1}): the series' coefficients are f's Taylor coefficients",
            sum(low.coeff(X, n) * X**n for n in range(N + 1)), sp.Integer(1))
    d.exact(f"c_n·R^n / C(n+{k - 1}, {k - 1}) = 1 for n = 0..{N} (rational arithmetic)",
            sp.Matrix([c[n] * R**n / sp.binomial(n + k - 1, k - 1) for n in range(N + 1)]), sp.ones(N + 1, 1))
    d.finish()
    corrected = fit_rate(c, orders, log_correction=k > 1)
    plain = fit_rate(c, orders)
    return SeriesCase(R, k, c, d, corrected, plain, predicted_bias(k, orders, k > 1), predicted_bias(k, orders, False))


def predicted_bias(pole_order: int, orders: Sequence[int], log_correction: bool) -> float:
    """The signed error ``fitted slope − (−log R)`` that the exact coefficients force: the fit is linear
    and reproduces ``−n·log R`` (and ``(k−1)·log n − log (k−1)!`` with the correction) exactly, so its
    error is the fitted slope of the remainder ``log C(n+k−1, k−1)`` (minus ``(k−1)·log n``), which does
    not depend on ``R``. Zero for a simple pole; ``O(1/n)`` for ``k > 1``.

    >>> predicted_bias(1, range(2, 9), False)
    0.0
    >>> 0 < predicted_bias(3, range(10, 41), True) < predicted_bias(3, range(10, 41), False)
    True
    """
    k = int(pole_order)
    rows = [[float(n), math.log(n), 1.0] if log_correction else [float(n), 1.0] for n in orders]
    rest = [math.log(math.comb(n + k - 1, k - 1)) - ((k - 1) * math.log(n) if log_correction else 0.0)
            for n in orders]
    return _lstsq_slope(rows, rest)


def flat_function_derivation(N: int = 12) -> tuple[Derivation, RateFit]:
    """The negative control ``f = exp(−1/x²)``: the exact derivative structure, its (zero) series, no rate.

    >>> d, fit = flat_function_derivation(6)
    >>> d.ok, fit.slope
    (True, None)
    """
    t = sp.Symbol("t")
    f = sp.exp(-1 / X**2)
    d = Derivation("λ analytic: negative control exp(−1/x²)",
                   "f = exp(−1/x²) (f(0) = 0) is smooth but not analytic at 0: every c_n = f⁽ⁿ⁾(0)/n! is 0 while "
                   "f ≠ 0, so log|c_n| = −∞ and there is no finite growth rate",
                   [f"orders 1..{N}", "the limit P_n(1/x)·e^(−1/x²) → 0 as x → 0 is SymPy's series (not a proof step)"])
    P = sp.Integer(1)
    for n in range(1, N + 1):
        nxt = sp.expand(2 * t**3 * P - t**2 * sp.diff(P, t))
        # f⁽ⁿ⁾ = P_n(1/x)·f: differentiating P_{n−1}(1/x)·f gives P_n(1/x)·f
        d.exact(f"d/dx [P_{n - 1}(1/x)·e^(−1/x²)] / e^(−1/x²) = P_{n}(1/x)",
                sp.diff(P.subs(t, 1 / X) * f, X) / f, nxt.subs(t, 1 / X))
        P = nxt
    d.finish()
    c = series_coefficients(f, N)
    return d, fit_rate(c, tuple(range(1, N + 1)))


def rate_identities(cases: Sequence[tuple[sp.Rational, int]] = CASES,
                    orders: Sequence[int] = tuple(range(10, 41))) -> list[SeriesCase]:
    """:func:`pole_case` for every ``(R, k)`` of ``cases`` (default :data:`CASES`) over ``orders``."""
    return [pole_case(R, k, orders) for R, k in cases]
