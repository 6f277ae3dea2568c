"""Certified ``wᵀH⁻¹w`` and ``wᵀr(H)w`` from float64 eigenpairs, refined residuals and a resolvent bound.

``H`` is a symmetric ball matrix (the true ``H`` symmetric), ``z`` a shift with a certified bound
``‖(H − zI)⁻¹‖₂ ≤ β``: ``1/|Im z|`` for a non-real ``z`` (the eigenvalues are real), ``1/κ`` for
``z = 0`` when every eigenvalue is ``≥ κ > 0``. For any exact ``u``, ``‖u − (H − zI)⁻¹w‖₂ ≤ β·‖r‖₂``
with ``r = w − (H − zI)u`` computed in ball arithmetic, so ``Re wᵀ(H − zI)⁻¹w ∈ wᵀRe u ± ‖w‖₂β‖r‖₂``.
``u`` comes from iterative refinement: residuals in balls at the working precision, corrections from
the float64 eigenpairs of the midpoint, ``u += V(Λ − z)⁻¹Vᵀr``. The float64 part only has to make
``r`` small; the enclosure rests on the computed residual, never on the float64 arithmetic. Cost:
one ``n × 2k`` ball product per step, no ``n³`` work.

The pseudo-inverse filter ``r(λ) = λ^(2k−1)/(λ^(2k) + μ^(2k))`` (see :mod:`.spectrum`) is
``(1/k)·Re Σ_j 1/(λ − μζ_j)`` over the ``k`` roots ``ζ_j = exp(iπ(2j+1)/(2k))`` of ``ζ^(2k) = −1``
in the upper half plane (``r = p′/(2k·p)`` for ``p(λ) = λ^(2k) + μ^(2k) = Π(λ − μζ_j)``), so
``wᵀr(H)w`` is ``k`` shifted solves whose resolvents are bounded by ``1/(μ sin θ_j)``: the condition
stays ``max|λ|/μ``, not ``(max|λ|/μ)^(2k)`` as with ``H^(2k) + μ^(2k)I``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from flint import arb, arb_mat, ctx

from coupled_curvature.numeric.certify.arrays import as_array

__all__ = ["filtered_form", "filtered_norm", "inverse_form", "inverse_norm", "norm_sq"]

_BUDGET = 38  # bits: the largest log2(max|λ|/|Im z|) handed to the float64 corrections (53-bit arithmetic)
_MAX_STEPS = 80
_LOW = 128  # bits of the first refinement steps' residuals


def _solve(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, shifts: list[tuple[arb, arb]],
           bounds: list[arb], goal: arb) -> list[arb] | None:
    """Balls of ``Re wᵀ(H − z_jI)⁻¹w`` for ``z_j = re_j + i·im_j`` with ``‖(H − z_jI)⁻¹‖₂ ≤ bounds[j]``,
    refined until each error bound is below ``goal`` or stops shrinking; ``None`` if none converges."""
    out = _refine(H, w, vecs, lam, shifts, bounds, goal)
    return None if out is None else _forms(w, *out)


def _forms(w: arb_mat, U: arb_mat, verr: list[arb]) -> list[arb]:
    """Balls of ``Re wᵀu_j`` from the columns of :func:`_refine` and their error bounds."""
    wnorm = (w.transpose() * w).entries()[0].sqrt().upper()
    dots = (w.transpose() * U).entries()[0::2]
    return [d + arb(0, (e * wnorm).upper()) for d, e in zip(dots, verr)]


def _refine(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, shifts: list[tuple[arb, arb]],
            bounds: list[arb], goal: arb) -> tuple[arb_mat, list[arb]] | None:
    """``(U, verr)``: exact columns ``U[:, 2j] + i·U[:, 2j+1]`` with ``‖U_j − (H − z_jI)⁻¹w‖₂ ≤ verr[j]``
    (``β_j·‖r_j‖₂``), refined until each ``verr[j]·‖w‖₂`` is below ``goal`` or stops shrinking; ``None``
    if none converges. The first steps take their residuals at ``_LOW`` bits with ``H`` rounded to it
    (a ball that contains ``H``, so those bounds hold too), the last at the working precision."""
    n, k, prec = H.nrows(), len(shifts), ctx.prec
    levels = [(H, prec)]
    if prec > _LOW + 32:
        ctx.prec = _LOW
        levels.insert(0, (H * 1, _LOW))  # H rounded to _LOW bits: a ball that contains it
        ctx.prec = prec
    W = as_array(w)[:, 0]
    wnorm = (w.transpose() * w).entries()[0].sqrt().upper()
    re = np.array([a for a, _ in shifts], dtype=object)
    im = np.array([b for _, b in shifts], dtype=object)
    poles = np.array([complex(float(a.mid()), float(b.mid())) for a, b in shifts])
    scale = np.array(list(bounds), dtype=object)
    U = arb_mat(n, 2 * k)
    best, stalled, level = None, 0, 0
    try:
        for _ in range(_MAX_STEPS):
            Hs, ctx.prec = levels[level]
            HU, Ua = as_array(Hs * U), as_array(U)
            A, B = Ua[:, 0::2], Ua[:, 1::2]
            r_re = W[:, None] - HU[:, 0::2] + (A * re - B * im)
            r_im = (A * im + B * re) - HU[:, 1::2]
            err = [(v.upper().sqrt() * s).upper() for v, s in zip((r_re * r_re + r_im * r_im).sum(axis=0), scale)]
            worst = (max(err) * wnorm).upper()
            stalled = 0 if best is None or worst < best[0] / 2 else stalled + 1
            if best is None or worst < best[0]:
                best = (worst, U, err)
            if worst <= goal:
                break
            if stalled >= (1 if level + 1 < len(levels) else 3):
                if level + 1 == len(levels):
                    break
                level, stalled = level + 1, 0
                continue  # the same iterate, its residual at the next precision
            R = r_re.astype(float) + 1j * r_im.astype(float)
            D = vecs @ ((vecs.T @ R) / (lam[:, None] - poles[None, :]))
            step = np.empty((n, 2 * k))
            step[:, 0::2], step[:, 1::2] = D.real, D.imag
            if not np.isfinite(step).all():
                break
            ctx.prec = prec
            U = (U + arb_mat(step.tolist())).mid()
    finally:
        ctx.prec = prec
    assert best is not None, "the loop runs at least one step and keeps its first result"
    worst, U, err = best
    if not worst < goal * 2**40:  # far from the goal: the float64 corrections did not converge
        return None
    return U, err


def _inverse(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, kappa: arb, top: arb,
             bits: int) -> tuple[arb_mat, list[arb]] | None:
    """:func:`_refine` of ``H⁻¹w`` (``H ≥ kappa > 0``) to the error goal ``2^-bits·‖w‖²/top``; ``None`` when
    ``top/kappa`` is beyond what the float64 corrections take (``2^_BUDGET``) or they do not converge."""
    if not kappa > 0 or math.log2(float(top.mid()) / float(kappa.mid())) > _BUDGET:
        return None
    wsq = (w.transpose() * w).entries()[0]
    return _refine(H, w, vecs, lam, [(arb(0), arb(0))], [1 / kappa], (wsq / top * arb(2) ** -bits).upper())


def inverse_form(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, kappa: arb, top: arb,
                 bits: int) -> arb | None:
    """``wᵀH⁻¹w`` when every eigenvalue of ``H`` is ``≥ kappa > 0`` (certified by the caller), to about
    ``2^-bits·‖w‖²/top``; ``None`` when the float64 corrections cannot converge."""
    out = _inverse(H, w, vecs, lam, kappa, top, bits)
    return None if out is None else _forms(w, *out)[0]


def _order(c0: float, g: float, bits: int) -> tuple[int, int] | None:
    """``(k, s)``: the fewest poles whose filter error reaches ``2^-(bits + c0)·‖w‖²/κ`` with ``μ = κ·2^-s``
    (``c0 = log2(top/κ)``, ``g = log2(κ/δ)``) and ``max|λ|/|Im z| ≤ 2^_BUDGET``; else the most accurate."""
    target, best = bits + c0, None
    for k in range(1, 17):
        s_max = _BUDGET - c0 - 1 - math.log2(1 / math.sin(math.pi / (2 * k)))
        s = math.floor(min(s_max, (2 * k - 1) * g / (4 * k)))
        if s < 1:
            continue
        if best is None or 2 * k * s > 2 * best[0] * best[1]:
            best = (k, s)
        if 2 * k * s >= target:
            break
    return best


def _filter(top: arb, kappa: arb, delta: arb, bits: int) -> tuple[int, arb, list[tuple[arb, arb]]] | None:
    """The filter ``r`` of :func:`filtered_form` for kept ``|λ| ≥ κ`` and dropped ``|λ| ≤ δ < κ``: its order
    ``k``, its error ``e = max((μ/κ)^(2k)/κ, δ^(2k−1)/μ^(2k))`` (a ball) and its ``k`` shifts
    ``μζ_j = (μ cos θ_j, μ sin θ_j)``, ``θ_j = π(2j+1)/(2k)``; ``None`` when no order reaches ``bits``."""
    if not (kappa > 0 and delta < kappa):
        return None
    c0 = math.log2(float(top.mid()) / float(kappa.mid()))
    g = math.inf if delta == 0 else math.log2(float(kappa.mid()) / float(delta.upper()))
    ks = _order(c0, g, bits)
    if ks is None:
        return None
    k, s = ks
    mu = arb(2) ** (math.floor(math.log2(float(kappa.lower()))) - s)  # exact: μ ≤ κ·2^-s
    e = ((mu / kappa) ** (2 * k) / kappa).max(delta ** (2 * k - 1) / mu ** (2 * k))
    angles = [arb.pi() * (2 * j + 1) / (2 * k) for j in range(k)]
    return k, e, [(mu * t.cos(), mu * t.sin()) for t in angles]


class _Filtered(NamedTuple):
    """The filter's ``k`` shifted solves ``U`` (with their error bounds ``verr``), its error ``e`` and ``‖w‖²``."""

    k: int
    e: arb
    wsq: arb
    U: arb_mat
    verr: list[arb]


def _filtered(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, top: arb, kappa: arb, delta: arb,
              bits: int) -> _Filtered | None:
    """The ``k`` shifted solves of the filter of :func:`_filter` (error ``e``), refined (:func:`_refine`) to the
    goal ``e‖w‖²/4``; ``None`` when no filter fits the budget or the solves do not converge."""
    filt = _filter(top, kappa, delta, bits)
    if filt is None:
        return None
    k, e, shifts = filt
    wsq = (w.transpose() * w).entries()[0]
    out = _refine(H, w, vecs, lam, shifts, [1 / b for _, b in shifts], (e * wsq / 4).upper().max(arb(0)))
    return None if out is None else _Filtered(k, e, wsq, *out)


def filtered_form(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, top: arb, kappa: arb, delta: arb,
                  bits: int) -> arb | None:
    """``wᵀH⁺_τw`` when the kept eigenvalues satisfy ``|λ| ≥ κ`` and the dropped ones ``|λ| ≤ δ < κ``:
    ``wᵀr(H)w ± e‖w‖²`` with ``e = max((μ/κ)^(2k)/κ, δ^(2k−1)/μ^(2k))`` (``r`` within ``e`` of ``1/λ`` on
    the kept and of 0 on the dropped eigenvalues), aiming at ``e‖w‖² ≈ 2^-bits·‖w‖²/top``."""
    f = _filtered(H, w, vecs, lam, top, kappa, delta, bits)
    return None if f is None else sum(_forms(w, f.U, f.verr), arb(0)) / f.k + arb(0, (f.e * f.wsq).upper())


def norm_sq(x: arb_mat, err: arb) -> arb:
    """A ball of ``‖y‖₂²`` for every ``y`` with ``‖y − x‖₂ ≤ err``, ``x`` a ball column (for every
    vector in it): ``‖y‖₂ ∈ [‖x‖₂ − err, ‖x‖₂ + err]`` (triangle inequality), clamped at 0, squared."""
    nx = (x.transpose() * x).entries()[0].sqrt()
    lo, hi = (nx - err).lower(), (nx + err).upper()
    lo_sq = (lo * lo).lower() if lo > 0 else arb(0)
    return lo_sq.union((hi * hi).upper())


def _real_mean(U: arb_mat, k: int) -> arb_mat:
    """``(1/k)·Σ_j U[:, 2j]``: the mean of the real parts of ``k`` complex columns (a ball column)."""
    cols = as_array(U)[:, 0::2]
    mean = cols.sum(axis=1) / k if k > 1 else cols[:, 0]
    return arb_mat(len(mean), 1, list(mean))


def inverse_norm(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, kappa: arb, top: arb,
                 bits: int) -> arb | None:
    """``‖H⁻¹w‖₂² = wᵀH⁻²w`` when every eigenvalue of ``H`` is ``≥ kappa > 0`` (certified by the caller), to
    about ``2^-bits`` relative: ``u`` with ``‖u − H⁻¹w‖₂ ≤ ‖r‖₂/κ`` (as in :func:`inverse_form`), then
    :func:`norm_sq`; ``None`` when the float64 corrections cannot converge."""
    out = _inverse(H, w, vecs, lam, kappa, top, bits)
    return None if out is None else norm_sq(_real_mean(out[0], 1), out[1][0])


def filtered_norm(H: arb_mat, w: arb_mat, vecs: np.ndarray, lam: np.ndarray, top: arb, kappa: arb, delta: arb,
                  bits: int) -> arb | None:
    """``‖H⁺_τw‖₂² = wᵀ(H⁺_τ)²w`` when the kept eigenvalues satisfy ``|λ| ≥ κ`` and the dropped ones
    ``|λ| ≤ δ < κ``. With the filter ``r`` of :func:`filtered_form` (``k`` poles, ``μ``),
    ``r(H) − H⁺_τ = Σ_i (r(λ_i) − f(λ_i))q_iq_iᵀ`` (``f(λ) = 1/λ`` kept, 0 dropped) has spectral norm
    ``≤ e = max((μ/κ)^(2k)/κ, δ^(2k−1)/μ^(2k))``, so ``‖r(H)w − H⁺_τw‖₂ ≤ e‖w‖₂``; and
    ``r(H)w = (1/k)·Re Σ_j (H − μζ_jI)⁻¹w`` is approximated by ``x = (1/k)Σ_j Re u_j`` with
    ``‖x − r(H)w‖₂ ≤ (1/k)Σ_j ‖r_j‖₂/(μ sin θ_j)``. Hence ``‖H⁺_τw‖₂ ∈ ‖x‖₂ ± (that + e‖w‖₂)``
    (:func:`norm_sq`)."""
    f = _filtered(H, w, vecs, lam, top, kappa, delta, bits)
    if f is None:
        return None
    err = (sum(f.verr, arb(0)) / f.k + f.e.upper() * f.wsq.sqrt()).upper()
    return norm_sq(_real_mean(f.U, f.k), err)
