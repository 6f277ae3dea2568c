"""Certified ``wᵀH⁺_τw`` of a symmetric ball matrix: eigenvalue enclosures, then a rigorous solve.

Eigenvalue enclosures. ``X`` (exact dyadic entries) approximates an orthonormal eigenbasis: a float64
``eigh`` of the midpoint, refined at the working precision by Ogita–Aishima iterations. In ball
arithmetic ``R = XᵀHX`` and ``F = XᵀX − I``. By Weyl, the ``i``-th eigenvalue of ``R`` lies within
``ε = ‖R − diag R‖_F`` of the ``i``-th order statistic of ``diag R``; by Ostrowski,
``λ_i(R) = θ_iλ_i(H)`` with ``θ_i ∈ [1 − ‖F‖_F, 1 + ‖F‖_F]``. Both bounds are computed in arb.

First, the float64 basis alone may certify the split at the cutoff (:mod:`.separation`: Schur
complements and interlacing bound the dropped eigenvalues by about ``2^-106·max|λ|²/κ``); otherwise
the basis is refined and every eigenvalue enclosed as above (also when the first route's ball is
wider than ``2^-70`` relative; the narrower certified ball is returned). The cutoff ``τ = rtol·max|λ|``
is a ball too. An eigenvalue is kept when ``|λ| > τ`` is certified,
dropped when ``|λ| < τ`` is; one whose ball meets ``τ``'s makes ``D⁺`` uncertifiable at that cutoff.
With every eigenvalue kept ``wᵀH⁺w = wᵀH⁻¹w`` (arb's certified solve). With some dropped (all of
them within ``|λ| ≤ δ``, the kept ones ``|λ| ≥ κ``), the rational filter
``r(λ) = λ^(2k−1)/(λ^(2k) + μ^(2k))`` is within ``e = max((μ/κ)^(2k)/κ, δ^(2k−1)/μ^(2k))`` of ``1/λ`` on
the kept and of 0 on the dropped eigenvalues, so ``wᵀH⁺_τw ∈ wᵀ(H^(2k) + μ^(2k)I)⁻¹H^(2k−1)w ± e‖w‖²``.
The ball is as narrow as the gap ``κ/δ`` and the precision allow; its width is part of the result.

On the first route both forms are evaluated by :mod:`.resolvent` (``wᵀr(H)w`` as ``k`` shifted solves,
certified by their residuals, no ``n³`` work), which aims at ``2^-(min(70, prec/3)+16)·‖w‖²/max|λ|``
for the filter and ``2^-(prec−32)·‖w‖²/max|λ|`` without one; where its float64 corrections cannot converge
(``max|λ|/κ`` beyond about ``2^38``) the ball solves above are used.

The Gram route (:mod:`.gram`) needs ``‖H⁺_τw‖² = wᵀ(H⁺_τ)²w`` of ``H = G = BBᵀ`` (``square=True``): the
same split, cutoff and refusals, then a ball ``x`` around ``r(H)w`` (or ``H⁻¹w``) from the same solves,
certified in the 2-norm (resolvent: ``β‖r‖₂``; ball solve: its entries), and
``‖H⁺_τw‖₂ ∈ ‖x‖₂ ± (that + e‖w‖₂)`` since ``‖r(H) − H⁺_τ‖₂ = max_i |r(λ_i) − f(λ_i)| ≤ e``
(``f(λ) = 1/λ`` kept, 0 dropped; the same ``e`` as above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from flint import arb, arb_mat, ctx

from coupled_curvature.numeric.certify.arrays import as_array, as_mat
from coupled_curvature.numeric.certify.resolvent import (filtered_form, filtered_norm, inverse_form, inverse_norm,
                                                          norm_sq)
from coupled_curvature.numeric.certify.separation import split

__all__ = ["PinvForm", "eigenvalue_balls", "pinv_form"]


@dataclass(frozen=True)
class PinvForm:
    """``value`` (``wᵀH⁺_τw``) or ``None`` with ``reason``; ``straddling`` the eigenvalue ball that meets
    the cutoff; ``rank`` the number of kept eigenvalues; ``cutoff`` the ball of ``τ``."""

    value: arb | None
    reason: str | None
    straddling: arb | None
    rank: int | None
    cutoff: arb | None


def _mid_matrix(m: arb_mat) -> np.ndarray:
    return as_array(m).astype(float)  # each ball's midpoint, rounded to float64


def _refine(H: arb_mat, X: arb_mat) -> arb_mat:
    """Ogita–Aishima refinement of an approximate orthonormal eigenbasis ``X`` of the midpoint of ``H``
    (midpoint arithmetic: the result is exact dyadic, its quality is checked afterwards, not assumed).
    Each step about doubles the correct bits, so it runs at 106, 212, … bits up to the working precision
    (the dropped eigenvalues' bound ``δ``, and with it the filter's error, shrinks with it)."""
    n = H.nrows()
    A = H.mid()
    normA = float(max(abs(v.mid()) for v in A.entries())) * n
    full = ctx.prec
    target, bits = full, 53
    try:
        while bits < target:
            bits = min(2 * bits, target)
            ctx.prec = bits + 32
            X = _refine_step(A, X, n, normA)
    finally:
        ctx.prec = full
    return X


def _refine_step(A: arb_mat, X: arb_mat, n: int, normA: float) -> arb_mat:
    """One Ogita–Aishima step at the current precision."""
    R = (arb_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)]) - X.transpose() * X).mid()
    S = (X.transpose() * A * X).mid()
    r, s = R.entries(), S.entries()
    lam = [s[i * n + i] / (1 - r[i * n + i]) for i in range(n)]
    lam_f = [float(v.mid()) for v in lam]
    off = max((abs(float(s[i * n + j].mid())) for i in range(n) for j in range(n) if i != j), default=0.0)
    rr = max((abs(float(v.mid())) for v in r), default=0.0)
    gap = 2 * n * (off + normA * rr)
    E = []
    for i in range(n):
        for j in range(n):
            if i != j and abs(lam_f[j] - lam_f[i]) > gap:
                E.append(((s[i * n + j] + lam[j] * r[i * n + j]) / (lam[j] - lam[i])).mid())
            else:
                E.append((r[i * n + j] / 2).mid())
    return (X + X * arb_mat(n, n, E)).mid()


def _frobenius_upper(entries) -> arb:
    """An exact upper bound of ``√(Σ x²)`` over the balls ``entries``."""
    return sum((v.abs_upper() ** 2 for v in entries), arb(0)).sqrt().upper()


def eigenvalue_balls(H: arb_mat, refine: bool = True) -> list[arb]:
    """Balls that certainly contain the eigenvalues of the symmetric ``H`` (every symmetric matrix in
    the ball matrix), in increasing order of their midpoints; from the float64 eigenbasis alone (balls
    about ``n·2^-53·max|λ|`` wide) unless ``refine``.

    >>> balls = eigenvalue_balls(arb_mat([[2, 1], [1, 2]]))
    >>> [b.contains(v) for b, v in zip(balls, (1, 3))]
    [True, True]
    """
    n = H.nrows()
    _, vecs = np.linalg.eigh(_mid_matrix(H))
    X = arb_mat(vecs.tolist())
    if refine:
        X = _refine(H, X)
    R = X.transpose() * H * X
    F = X.transpose() * X - arb_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    r = R.entries()
    eps = _frobenius_upper(r[i * n + j] for i in range(n) for j in range(n) if i != j)
    phi = _frobenius_upper(F.entries())
    if not phi < 1:
        raise ArithmeticError("the approximate eigenbasis is not close enough to orthonormal")
    diag = [r[i * n + i] for i in range(n)]
    lows = sorted((d - eps).lower() for d in diag)
    highs = sorted((d + eps).upper() for d in diag)
    theta = arb(1).union(arb(1) + phi).union(arb(1) - phi)
    return [lo.union(hi) / theta for lo, hi in zip(lows, highs)]


def _filtered(H: arb_mat, w: arb_mat, wsq: arb, top: arb, kappa: arb, delta: arb, square: bool = False) -> arb:
    """``wᵀH⁺_τw`` when the kept eigenvalues satisfy ``|λ| ≥ κ`` and the dropped ones ``|λ| ≤ δ < κ``:
    ``r(λ) = λ^(2k−1)/(λ^(2k) + μ^(2k))`` differs from ``1/λ`` on kept eigenvalues by at most
    ``(μ/κ)^(2k)/κ`` and from 0 on dropped ones by at most ``δ^(2k−1)/μ^(2k)``; ``wᵀr(H)w`` is one certified
    solve. ``k`` is the smallest that reaches the working precision, within what the precision carries
    (the solve's condition is ``≈ (max|λ|/μ)^(2k)``). ``square``: ``‖H⁺_τw‖²`` instead, from the ball
    ``x ∋ r(H)w`` of the same solve and ``‖r(H) − H⁺_τ‖₂ ≤ e`` (:func:`.resolvent.norm_sq`)."""
    prec = ctx.prec
    lk, ld, lt = (math.log2(float(x.mid())) for x in (kappa, delta if delta > 0 else kappa * 2.0 ** (-2 * prec), top))
    k, mu_log = 1, ((ld + 3 * lk) / 4)
    for cand in range(1, 33):  # the smallest k whose error is below 2^-(prec-32) of ‖w‖²/max|λ|, within the budget
        m = ((2 * cand - 1) * ld + (2 * cand + 1) * lk) / (4 * cand)
        if 2 * cand * (lt - m) > prec - 64:
            break
        k, mu_log = cand, m
        err_log = 2 * cand * (m - lk) - lk  # log2 of (μ/κ)^(2k)/κ, which the balance makes ≈ the other bound
        if err_log <= -lt - (prec - 32):
            break
    mu = arb(2) ** arb(round(mu_log))  # exact power of two near the balancing point
    n = H.nrows()
    try:
        ctx.prec = prec + int(2 * k * max(lt - mu_log, 0)) + 64
        H2 = H * H
        P = H2
        for _ in range(k - 1):
            P = P * H2  # H^(2k)
        rhs = H * w
        for _ in range(k - 1):
            rhs = H2 * rhs  # H^(2k−1) w
        mu2k = mu ** (2 * k)
        A = P + arb_mat(n, n, [mu2k if i == j else 0 for i in range(n) for j in range(n)])
        x = A.solve(rhs, algorithm="precond")
        e = ((mu / kappa) ** (2 * k) / kappa).max(delta ** (2 * k - 1) / mu2k)
        if square:
            return norm_sq(x, (e * wsq.sqrt()).upper())
        core = (w.transpose() * x).entries()[0]
        return core + arb(0, (e * wsq).upper())
    finally:
        ctx.prec = prec


def _quick_balls(H: arb_mat) -> list[arb]:
    """Eigenvalue balls from the float64 basis, computed at 128 bits (they are ~2^-53 wide anyway)."""
    prec = ctx.prec
    try:
        ctx.prec = min(prec, 128)
        return eigenvalue_balls(H, refine=False)
    finally:
        ctx.prec = prec


def _classify(lam: list[arb], rtol: Fraction) -> tuple[list[arb], list[arb], list[arb]]:
    """``(kept, dropped, straddling)`` against ``τ = rtol·max|λ|``."""
    top = max((abs(v).upper() for v in lam), default=arb(0))
    cutoff = (arb(rtol.numerator) / rtol.denominator) * max(v.abs_lower() for v in lam).union(top)
    kept: list[arb] = []
    dropped: list[arb] = []
    straddling: list[arb] = []
    for v in lam:
        (kept if v.abs_lower() > cutoff.upper() else dropped if v.abs_upper() < cutoff.lower() else straddling).append(v)
    return kept, dropped, straddling


def _wanted_bits() -> int:
    """The relative accuracy a ``D⁺`` ball of the first route must reach (``2^-70 ≈ 1e-21`` at 256 bits)."""
    return min(70, ctx.prec // 3)


def _deflate(H: arb_mat, w: arb_mat) -> tuple[arb_mat, arb_mat, np.ndarray]:
    """``H`` without its exactly-zero rows and columns (each is an exact eigenvector ``e_i`` with
    eigenvalue 0, always below the cutoff, and ``H⁺`` is 0 there too), ``w`` restricted alike, and
    the float64 midpoint of what is left: dead units and constant-zero inputs cost nothing."""
    n = H.nrows()
    a = as_array(H)
    dead = [i for i in range(n) if a[i, i].is_zero() and all(v.is_zero() for v in a[i])]
    if dead:
        live = np.setdiff1d(np.arange(n), dead)
        a = a[np.ix_(live, live)]
        H, w = as_mat(a), as_mat(as_array(w)[live])
    return H, w, a.astype(float)  # each ball's midpoint, rounded to float64


def _solve_form(H: arb_mat, w: arb_mat, square: bool) -> arb:
    """``wᵀH⁻¹w`` (or ``‖H⁻¹w‖²`` when ``square``) from arb's certified solve."""
    x = H.solve(w, algorithm="precond")
    return (x.transpose() * x if square else w.transpose() * x).entries()[0]


def _separated(H: arb_mat, w: arb_mat, rtol: Fraction, mid: np.ndarray, square: bool = False) -> PinvForm | None:
    """The form from the float64 basis's certified split (:mod:`.separation`), when it decides the cutoff:
    the refined shifted solves of :mod:`.resolvent`, else (they did not converge) the ball solves below."""
    sp = split(H, mid, float(rtol))
    if sp is None:
        return None
    cutoff = (arb(rtol.numerator) / rtol.denominator) * sp.top
    if not (sp.kappa > cutoff.upper() and (sp.kept == H.nrows() or sp.delta < cutoff.lower())):
        return None
    wsq = (w.transpose() * w).entries()[0]
    try:
        if sp.kept == H.nrows():
            value = (inverse_norm if square else inverse_form)(H, w, sp.vectors, sp.values, sp.kappa, sp.top.upper(),
                                                               ctx.prec - 32)
            if value is None:
                value = _solve_form(H, w, square)
        else:
            value = (filtered_norm if square else filtered_form)(H, w, sp.vectors, sp.values, sp.top.upper(),
                                                                 sp.kappa, sp.delta, _wanted_bits() + 16)
            if value is None:
                value = _filtered(H, w, wsq, sp.top.upper(), sp.kappa, sp.delta, square)
    except (ZeroDivisionError, ValueError):
        return None  # the general route below decides, and says why if it cannot
    return PinvForm(value, None, None, sp.kept, cutoff)


def pinv_form(H: arb_mat, w: arb_mat, rtol: Fraction, *, square: bool = False) -> PinvForm:
    """``wᵀH⁺_τw`` for the symmetric ball matrix ``H``, ``τ = rtol·max|λ|``, certified or refused.

    ``square=True`` gives ``wᵀ(H⁺_τ)²w = ‖H⁺_τw‖²`` instead, with the same split, cutoff and refusals: the
    Gram route (:mod:`.gram`) calls it with ``H = G = BBᵀ`` and ``w = v = Bw_b``, where
    ``w_bᵀ(BᵀB)⁺_τw_b = vᵀ(G⁺_τ)²v`` (the nonzero eigenvalues of ``BᵀB`` and ``BBᵀ`` coincide).

    >>> f = pinv_form(arb_mat([[4, 0], [0, 0]]), arb_mat([[1], [1]]), Fraction(1, 10**10))
    >>> f.value.contains(arb(1) / 4), f.rank
    (True, 1)
    """
    H, w, mid = _deflate(H, w)
    if H.nrows() == 0:
        return PinvForm(arb(0), None, None, 0, arb(0))
    eh, ew = _exponent(as_array(H).ravel(), mid), _exponent(as_array(w).ravel(), None)
    if eh == ew == 0:
        return _unit_form(H, w, rtol, mid, square)
    # H = 2^eh·H′, w = 2^ew·w′ (exact): the float64 steps see unit-scale numbers; H′ has H's eigenvectors
    # and the cutoff is relative, so the kept set is the same, and wᵀH⁺w = 2^(2ew − eh)·w′ᵀH′⁺w′
    H, w = H * arb(2) ** -eh, w * arb(2) ** -ew
    form = _unit_form(H, w, rtol, as_array(H).astype(float), square)
    up = arb(2) ** eh
    back = arb(2) ** (2 * ew - (2 if square else 1) * eh)
    if form.straddling is not None:
        assert form.cutoff is not None  # an eigenvalue straddles the cutoff: _general gives both
        v, cutoff = form.straddling * up, form.cutoff * up
        return PinvForm(None, _straddles(v, cutoff, rtol), v, None, cutoff)
    return PinvForm(None if form.value is None else form.value * back, form.reason, None, form.rank,
                    None if form.cutoff is None else form.cutoff * up)


def _straddles(v: arb, cutoff: arb, rtol: Fraction) -> str:
    return (f"the eigenvalue {v.str(6, radius=True)} straddles the cutoff τ = {cutoff.str(6, radius=True)}: D⁺ is not "
            f"certifiable at pinv_rtol={float(rtol):g}")


#: the float64 steps see a matrix (or vector) as it is when its largest entry lies within 2^±_RANGE
_RANGE = 400


def _exponent(entries: np.ndarray, mid: np.ndarray | None) -> int:
    """0 when the largest midpoint of ``entries`` (an object array of balls; ``mid``: their float64
    values, if at hand) lies within ``2^±_RANGE`` or all are exactly 0, else about its ``log2``: the
    power of two that brings it to unit scale."""
    mid = entries.astype(float) if mid is None else mid
    top = float(np.abs(mid).max()) if mid.size else 0.0
    if np.isfinite(mid).all() and 2.0 ** -_RANGE < top < 2.0 ** _RANGE:  # (a 0 may be an underflow)
        return 0
    best = None
    for v in entries:
        m, e = v.mid().man_exp()
        if int(m):
            k = int(e) + abs(int(m)).bit_length()
            best = k if best is None else max(best, k)
    return 0 if best is None else best


def _unit_form(H: arb_mat, w: arb_mat, rtol: Fraction, mid: np.ndarray, square: bool) -> PinvForm:
    """:func:`pinv_form` of a deflated ``H`` whose entries the float64 steps can represent."""
    fast = _separated(H, w, rtol, mid, square)
    if fast is None or fast.value is None:  # (the split route gives a value, or None when it cannot decide)
        return _general(H, w, rtol, square)
    if fast.value.rel_accuracy_bits() >= _wanted_bits():
        return fast
    general = _general(H, w, rtol, square)
    if general.value is not None and general.value.rad() <= fast.value.rad():
        return general
    return fast  # certified too, only wider than the refined route would have liked


def _general(H: arb_mat, w: arb_mat, rtol: Fraction, square: bool = False) -> PinvForm:
    """Every eigenvalue enclosed (refining the basis where the cutoff drops some), then the form."""
    lam = _quick_balls(H)
    kept, dropped, straddling = _classify(lam, rtol)
    if dropped or straddling:  # the float64 basis may be too coarse: refine it to the working precision
        lam = eigenvalue_balls(H, refine=True)
        kept, dropped, straddling = _classify(lam, rtol)
    top = max((abs(v).upper() for v in lam), default=arb(0))
    cutoff = (arb(rtol.numerator) / rtol.denominator) * max(v.abs_lower() for v in lam).union(top)
    if top == 0:
        return PinvForm(arb(0), None, None, 0, cutoff)
    if straddling:
        v = straddling[0]
        return PinvForm(None, _straddles(v, cutoff, rtol), v, None, cutoff)
    wsq = (w.transpose() * w).entries()[0]
    try:
        if not dropped:
            value = _solve_form(H, w, square)
        else:
            value = _filtered(H, w, wsq, top, min(v.abs_lower() for v in kept), max(v.abs_upper() for v in dropped),
                              square)
    except (ZeroDivisionError, ValueError) as e:
        return PinvForm(None, f"the certified solve failed at {ctx.prec} bits ({e}); raise prec", None, len(kept), cutoff)
    return PinvForm(value, None, None, len(kept), cutoff)
