"""A certified kept/dropped split of a positive semidefinite ``H`` from its float64 eigenbasis alone.

``X`` (exact dyadic) is a float64 eigenbasis of the midpoint of ``H``; in arb, ``R = XᵀHX`` and
``φ = ‖XᵀX − I‖_F``. Order ``X``'s columns into the tentatively kept ``K`` and dropped ``D``, so that
``R = [[A, E], [Eᵀ, C]]``. Let ``κ_A`` bound the eigenvalues of ``A`` from below (Weyl:
``min diag A − ‖A − diag A‖_F``), ``c = ‖C‖_F`` and ``e = ‖E‖_F``. If ``κ_A > 0`` and
``δ_R > c + e²/κ_A`` with ``δ_R < κ_A``, then (Sylvester's inertia on Schur complements):

* ``R − δ_R·I``: ``A − δ_R I ≻ 0`` and ``C − δ_R I − Eᵀ(A − δ_R I)⁻¹E ≼ (c − δ_R)I ≺ 0``, so exactly
  ``|D|`` eigenvalues of ``R`` lie below ``δ_R``;
* ``R + δ_R·I``: ``A + δ_R I ≻ 0`` and ``C + δ_R I − Eᵀ(A + δ_R I)⁻¹E ≽ (δ_R − c − e²/κ_A)I ≻ 0``, so
  every eigenvalue of ``R`` is above ``−δ_R``;
* by interlacing, the ``|K|`` largest eigenvalues of ``R`` are at least ``κ_A``.

By Ostrowski ``λ_i(R) = θ_iλ_i(H)`` with ``θ_i ∈ [1 − φ, 1 + φ]``, so ``H`` has ``|K|`` eigenvalues
``≥ κ_A/(1 + φ)`` and ``|D|`` of absolute value ``≤ δ_R/(1 − φ)``. With a float64 basis ``e`` is about
``2^-53·max|λ|``, so the dropped eigenvalues are bounded by about ``2^-106·max|λ|²/κ``: no refinement.
``R`` and ``XᵀX`` are computed at 128 bits (the working precision if lower), ``H`` rounded to it: their
radii, about ``n·2^-128·max|λ|``, stay well below that term, and the products cost less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flint import arb, arb_mat, ctx

from coupled_curvature.numeric.certify.arrays import ZERO, as_array

__all__ = ["Split", "split"]

_PREC = 128  # bits for the products XᵀHX and XᵀX


@dataclass(frozen=True)
class Split:
    """``kept`` eigenvalues of ``H`` are ``≥ kappa``, the others ``|λ| ≤ delta``; ``top`` encloses ``max|λ|``;
    ``values`` and ``vectors`` are the float64 eigenpairs of the midpoint (approximations, not certified)."""

    kept: int
    kappa: arb
    delta: arb
    top: arb
    values: np.ndarray
    vectors: np.ndarray


def _sum_upper(squares: np.ndarray) -> arb:
    """An upper bound of ``Σ x²`` from the balls ``squares`` of ``x·x`` (each contains ``x²``)."""
    return arb(0) if squares.size == 0 else squares.sum().upper()


def _gamma(m: int) -> arb:
    """``γ_m = m·u/(1 − m·u)``, ``u = 2^-53``: the relative error bound of ``m`` float64 operations."""
    mu = arb(m) * arb(2) ** -53
    return (mu / (1 - mu)).upper()


def _orthogonality_defect(X: np.ndarray) -> arb:
    """An upper bound of ``φ = ‖XᵀX − I‖_F`` for a float64 ``X`` (exact dyadic entries), from float64
    arithmetic whose rounding is accounted for (round to nearest, any summation order, with or without
    FMA, gradual underflow or flush to zero; ``η = 2^-1021`` covers underflow per term):

    * ``G = fl(XᵀX)``: ``|G − XᵀX| ≤ γ_n|X|ᵀ|X| + nη`` entry-wise, so ``φ ≤ ‖G − I‖_F + γ_n‖X‖_F² + n²η``;
    * ``G − I`` is exact (Sterbenz: the diagonal of ``G`` lies in ``[1/2, 2]``, else ``φ`` is not small and
      1 is returned);
    * a float64 sum ``S`` of ``m`` squares of exact numbers: ``|S − Σ| ≤ γ_mΣ + mη``, so
      ``Σ ≤ (S + mη)/(1 − γ_m)``.

    This replaces an ``n³`` ball product: the bound is about ``n²·2^-53`` and only enters as ``1 ± φ``.
    """
    n = X.shape[0]
    G = X.T @ X
    d = np.diagonal(G)
    if not ((d >= 0.5) & (d <= 2.0)).all():
        return arb(1)
    G[np.arange(n), np.arange(n)] = d - 1.0  # exact
    m, eta = n * n, arb(2) ** -1021
    sums = [((arb(float(np.sum(A * A))) + m * eta) / (1 - _gamma(m))).upper() for A in (G, X)]
    return (sums[0].sqrt() + _gamma(n) * sums[1] + m * eta).upper()


def split(H: arb_mat, mid: np.ndarray, rtol: float) -> Split | None:
    """The certified split at the tentative cutoff ``rtol·max λ`` of the float64 eigenvalues, or ``None``
    when the bounds do not separate (a negative kept eigenvalue, or too small a gap).

    >>> s = split(arb_mat([[4, 0], [0, 0]]), np.array([[4.0, 0.0], [0.0, 0.0]]), 1e-10)
    >>> s.kept, 3.99 < s.kappa <= 4, s.delta == 0  # κ: a lower bound of the kept eigenvalue 4
    (1, True, True)
    """
    n = H.nrows()
    lam, vecs = np.linalg.eigh(mid)
    big = float(np.abs(lam).max()) if n else 0.0
    if big == 0.0:
        return None
    order = [i for i in range(n) if lam[i] > rtol * big] + [i for i in range(n) if not lam[i] > rtol * big]
    k = sum(1 for i in range(n) if lam[i] > rtol * big)
    saved = ctx.prec
    try:
        ctx.prec = min(saved, _PREC)
        X = arb_mat(vecs[:, order].tolist())
        R = X.transpose() * (H * 1) * X  # H * 1: H rounded to this precision (a ball that contains it)
    finally:
        ctx.prec = saved
    phi = _orthogonality_defect(vecs)
    if not phi < arb(1) / 2 or k == 0:
        return None
    r = as_array(R)
    diag = np.diagonal(r)
    saved = ctx.prec
    try:  # squares for the Frobenius bounds: upper bounds, so 64 bits suffice
        ctx.prec = 64
        sq = r * r
    finally:
        ctx.prec = saved
    sq[np.arange(n), np.arange(n)] = ZERO  # only off-diagonal entries enter the bounds
    off_a = _sum_upper(sq[:k, :k]).sqrt().upper()
    kappa_a = min((d - off_a).lower() for d in diag[:k])
    if not kappa_a > 0:
        return None
    c = (_sum_upper(sq[k:, k:]) + _sum_upper(np.diagonal(r)[k:] ** 2)).sqrt().upper()
    e2 = _sum_upper(sq[:k, k:])
    delta_r = ((c + e2 / kappa_a) * (1 + arb(2) ** -20)).upper()
    if not delta_r < kappa_a:
        return None
    eps = _sum_upper(sq).sqrt().upper()
    top_r = max((d + eps).upper() for d in diag).union(max((d - off_a).lower() for d in diag[:k]))
    return Split(k, (kappa_a / (1 + phi)).lower(), (delta_r / (1 - phi)).upper(),
                 top_r / arb(1).union(1 + phi).union(1 - phi), lam, vecs)
