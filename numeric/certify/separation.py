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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flint import arb, arb_mat

__all__ = ["Split", "split"]


@dataclass(frozen=True)
class Split:
    """``kept`` eigenvalues of ``H`` are ``≥ kappa``, the others ``|λ| ≤ delta``; ``top`` encloses ``max|λ|``."""

    kept: int
    kappa: arb
    delta: arb
    top: arb


def _frob_sq_upper(entries) -> arb:
    return sum((v.abs_upper() ** 2 for v in entries), arb(0)).upper()


def split(H: arb_mat, mid: np.ndarray, rtol: float) -> Split | None:
    """The certified split at the tentative cutoff ``rtol·max λ`` of the float64 eigenvalues, or ``None``
    when the bounds do not separate (a negative kept eigenvalue, or too small a gap).

    >>> s = split(arb_mat([[4, 0], [0, 0]]), np.array([[4.0, 0.0], [0.0, 0.0]]), 1e-10)
    >>> s.kept, s.kappa.contains(4), s.delta == 0
    (1, True, True)
    """
    n = H.nrows()
    lam, vecs = np.linalg.eigh(mid)
    big = float(np.abs(lam).max()) if n else 0.0
    if big == 0.0:
        return None
    order = [i for i in range(n) if lam[i] > rtol * big] + [i for i in range(n) if not lam[i] > rtol * big]
    k = sum(1 for i in range(n) if lam[i] > rtol * big)
    X = arb_mat(vecs[:, order].tolist())
    R = X.transpose() * H * X
    F = X.transpose() * X - arb_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    phi = _frob_sq_upper(F.entries()).sqrt().upper()
    if not phi < arb(1) / 2 or k == 0:
        return None
    r = R.entries()
    off_a = _frob_sq_upper(r[i * n + j] for i in range(k) for j in range(k) if i != j).sqrt().upper()
    kappa_a = min((r[i * n + i] - off_a).lower() for i in range(k))
    if not kappa_a > 0:
        return None
    c = _frob_sq_upper(r[i * n + j] for i in range(k, n) for j in range(k, n)).sqrt().upper()
    e2 = _frob_sq_upper(r[i * n + j] for i in range(k) for j in range(k, n))
    delta_r = ((c + e2 / kappa_a) * (1 + arb(2) ** -20)).upper()
    if not delta_r < kappa_a:
        return None
    eps = _frob_sq_upper(r[i * n + j] for i in range(n) for j in range(n) if i != j).sqrt().upper()
    top_r = max((r[i * n + i] + eps).upper() for i in range(n)).union(max((r[i * n + i] - off_a).lower()
                                                                           for i in range(k)))
    return Split(k, (kappa_a / (1 + phi)).lower(), (delta_r / (1 - phi)).upper(),
                 top_r / arb(1).union(1 + phi).union(1 - phi))
