"""``wᵀH⁺_τw`` of one block in arbitrary precision, certified; the float64 path's semantics.

As :mod:`numeric.linalg.pinv`, keep the eigenvalues ``|λ| > τ = rtol·max|λ|``. A blocked pivoted Cholesky in ``F``-bit fixed point runs until the
remaining diagonal is rounding noise, ``Σ|S_ii| ≤ min(rtol/2, 2^-(F-24))·max H_ii``, so
``H = LLᵀ + S`` with ``λ_{r+1}(H) ≤ tr S ≤ τ/2``. It is used when also
``λ_r(H) ≥ 1/‖L₁₁⁻¹‖_F² > 2·rtol·tr H ≥ 2τ``: then its kept set provably is the eigenvalue
cutoff's, and ``wᵀ(LLᵀ)⁺w`` is the value for ``H − S`` (``S`` is noise). Otherwise (an
eigenvalue above the noise floor but within about a factor ``n`` of ``τ`` or below it, or an
indefinite block) ``mpmath.eigsy`` decides; that is slow beyond ~100 parameters. The default
``rtol = 10^-⌈2·dps/3⌉`` keeps every eigenvalue above the noise floor in practice; the float64
path's ``1e-10`` may cut inside the spectrum of a trained net and send large blocks to eigsy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.highprec.arithmetic import (
    Dyadic,
    int_matmul,
    max_bits,
    round_div,
    round_shift,
    to_mpf,
)

__all__ = ["PinvForm", "eigsy_pinv_form", "pinv_form"]

_EIG_MAX = 0  # blocks up to this size always use mpmath.eigsy (tests raise it to compare the routes)
_NOISE_MARGIN = 24  # Cholesky stops once the remainder is below 2^-(F-24)·max H_ii: rounding noise
_PANEL = 32  # Cholesky panel width: columns factorised with integer matvecs, then one BLAS update


def _pivoted_cholesky(A: np.ndarray, stop: int) -> tuple[np.ndarray, list[int], list[int], bool]:
    """``PAPᵀ ≈ LLᵀ`` for ``A`` (ints at scale ``2^-2F``; ``L`` at ``2^-F``), greedy diagonal
    pivoting, until the remaining diagonal has ``Σ|d_i| ≤ stop``. Returns ``L`` (n×r), the
    permutation, the remaining diagonal and whether the remainder looked PSD."""
    n = A.shape[0]
    A = A.copy()
    L = np.zeros((n, n), dtype=object)
    dg = [A[i, i] for i in range(n)]
    perm = list(range(n))
    c = j0 = 0
    psd = True
    while c < n:
        j1 = min(j0 + _PANEL, n)
        while c < j1:
            rest = dg[c:]
            if sum(map(abs, rest)) <= stop:
                break
            p = c + max(range(n - c), key=rest.__getitem__)
            if dg[p] <= 0:
                psd = False
                break
            if p != c:
                perm[c], perm[p], dg[c], dg[p] = perm[p], perm[c], dg[p], dg[c]
                A[[c, p], :] = A[[p, c], :]
                A[:, [c, p]] = A[:, [p, c]]
                L[[c, p], :c] = L[[p, c], :c]
            v = A[c + 1:, c] - L[c + 1:, j0:c].dot(L[c, j0:c]) if c > j0 else A[c + 1:, c]
            dd = math.isqrt(dg[c])
            L[c, c] = dd
            col = round_div(v, dd)
            L[c + 1:, c] = col
            dg[c + 1:] = [x - y * y for x, y in zip(dg[c + 1:], col.tolist())]
            c += 1
        if c < n and c > j0:
            P = L[c:, j0:c]
            A[c:, c:] -= int_matmul(P, np.ascontiguousarray(P.T))
        if c < j1:
            break
        j0 = c
    return L[:, :c], perm, dg[c:], psd and all(x >= -stop for x in dg[c:])


def _tri_inv(L: np.ndarray, F: int) -> np.ndarray:
    """``L⁻¹`` for lower-triangular ``L`` in ``F``-bit fixed point (ints at ``2^-F``)."""
    n = L.shape[0]
    if n <= 24:
        X = np.zeros((n, n), dtype=object)
        for j in range(n):
            X[j, j] = round_div(1 << (2 * F), L[j, j])
            if j:
                X[j, :j] = -round_div(L[j, :j].dot(X[:j, :j]), L[j, j])
        return X
    h = n // 2
    Ai, Ci = _tri_inv(L[:h, :h], F), _tri_inv(L[h:, h:], F)
    low = -round_shift(int_matmul(round_shift(int_matmul(Ci, np.ascontiguousarray(L[h:, :h])), F), Ai), F)
    X = np.zeros((n, n), dtype=object)
    X[:h, :h], X[h:, h:], X[h:, :h] = Ai, Ci, low
    return X


def _spd_solve(M2: np.ndarray, b: np.ndarray, F: int) -> np.ndarray:
    """``M⁻¹b`` for SPD ``M`` (ints at ``2^-2F``), ``b`` and the result at ``2^-F``."""
    L, perm, _, _ = _pivoted_cholesky(M2, 0)
    n = L.shape[0]
    if n < M2.shape[0]:
        raise InvalidInputError("highprec: internal SPD solve met a singular matrix")
    y = np.zeros(n, dtype=object)
    bp = b[perm]
    for j in range(n):
        y[j] = round_div((bp[j] << F) - L[j, :j].dot(y[:j]), L[j, j])
    x = np.zeros(n, dtype=object)
    for j in range(n - 1, -1, -1):
        x[j] = round_div((y[j] << F) - L[j + 1:, j].dot(x[j + 1:]), L[j, j])
    out = np.zeros(n, dtype=object)
    out[perm] = x
    return out


@dataclass
class PinvForm:
    """``value = wᵀH⁺_τw``, the kept ``rank``, the ``cutoff`` ``τ``, the smallest kept ``|λ|/max|λ|``
    (``min_rel``, eigsy route only) and a ``note`` naming the route."""

    value: mpmath.mpf
    rank: int
    cutoff: mpmath.mpf | None
    min_rel: mpmath.mpf | None
    note: str


def _to_float(A: np.ndarray, F: int) -> np.ndarray:
    """Ints at ``2^-2F`` (entries of order 1) as float64."""
    sh = 2 * F - 60
    return np.array([float(x >> sh) for x in A.ravel().tolist()]).reshape(A.shape) * 2.0**-60


def eigsy_pinv_form(H: Dyadic, w: Dyadic, rtol, F: int, why: str) -> PinvForm:
    """``Σ_{|λ_i| > τ} (q_iᵀw)²/λ_i``, ``τ = rtol·max|λ|``, from ``mpmath.eigsy`` at ``F`` bits
    (``why`` is appended to the note).

    >>> from coupled_curvature.numeric.highprec.arithmetic import from_floats
    >>> H, w = from_floats(np.diag([4.0, 1e-30])), from_floats(np.array([2.0, 1.0]))
    >>> r = eigsy_pinv_form(H, w, mpmath.mpf("1e-10"), 120, "")
    >>> r.value, r.rank
    (mpf('1.0'), 1)
    """
    n = H.M.shape[0]
    with mpmath.workprec(F):
        E, Q = mpmath.eigsy(mpmath.matrix([[to_mpf(int(x), H.e) for x in row] for row in H.M.tolist()]))
        lam = [E[i] for i in range(n)]
        top = max(abs(v) for v in lam)
        cutoff = rtol * top
        keep = [i for i in range(n) if abs(lam[i]) > cutoff]
        wv = [to_mpf(int(x), w.e) for x in w.M.tolist()]
        value = mpmath.fsum((mpmath.fsum(Q[r, i] * wv[r] for r in range(n)) ** 2) / lam[i] for i in keep)
        min_rel = min(abs(lam[i]) for i in keep) / top if keep else None
    return PinvForm(value, len(keep), cutoff, min_rel, f"H⁺ by mpmath.eigsy{why}")


def pinv_form(H: Dyadic, w: Dyadic, rtol, F: int) -> PinvForm:
    """``wᵀH⁺_τw``, ``τ = rtol·max|λ|``: certified pivoted Cholesky, else ``mpmath.eigsy``.

    >>> from coupled_curvature.numeric.highprec.arithmetic import from_floats
    >>> H, w = from_floats(np.array([[2.0, 1.0], [1.0, 2.0]])), from_floats(np.array([1.0, 1.0]))
    >>> r = pinv_form(H, w, mpmath.mpf("1e-10"), 120)  # w is an eigenvector of eigenvalue 3: 2/3
    >>> mpmath.nstr(r.value, 15), r.rank, "Cholesky" in r.note
    ('0.666666666666667', 2, True)
    """
    n = H.M.shape[0]
    diag = [int(H.M[i, i]) for i in range(n)]
    top = max(diag, default=0)
    if n <= _EIG_MAX or top <= 0:
        if not any(H.M.ravel().tolist()):
            return PinvForm(mpmath.mpf(0), 0, mpmath.mpf(0), None, "H_bb = 0: H⁺ = 0")
        return eigsy_pinv_form(H, w, rtol, F, "" if top > 0 else " (block not PSD)")
    sh = 2 * F + 1 - top.bit_length()  # scale so that max diag ∈ [1, 2)
    A = H.M << sh if sh >= 0 else round_shift(H.M, -sh)
    E = H.e - sh + 2 * F  # H = Ã·2^E with Ã = A·2^-2F
    with mpmath.workprec(F + 16):
        amax = max(int(A[i, i]) for i in range(n))
        # stop at the rounding-noise floor (2^-(F-24) of the top), never above half the cutoff
        stop = min(int(mpmath.floor(rtol * amax / 2)), amax >> (F - _NOISE_MARGIN))
        L, perm, rest, psd = _pivoted_cholesky(A, stop)
        r = L.shape[1]
        cutoff_note = "H⁺ by pivoted Cholesky (kept set certified equal to the eigenvalue cutoff)"
        if not psd:
            return eigsy_pinv_form(H, w, rtol, F, " (block not PSD)")
        if r == 0:
            return PinvForm(mpmath.mpf(0), 0, None, None, "H_bb = 0 under the cutoff: H⁺ = 0; " + cutoff_note)
        X = _tri_inv(np.ascontiguousarray(L[:r, :r]), F)
        frob = mpmath.mpf(sum(x * x for x in X.ravel().tolist())) * mpmath.mpf(2) ** (-2 * F)
        trace = mpmath.mpf(sum(int(A[i, i]) for i in range(n))) * mpmath.mpf(2) ** (-2 * F)
        if not 2 * rtol * trace * frob < 1:
            return eigsy_pinv_form(H, w, rtol, F, " (no certified spectral gap at the cutoff)")
        wb = w.M[perm]
        wsh = F + 1 - max_bits(wb)
        wi = wb << wsh if wsh >= 0 else round_shift(wb, -wsh)
        ew = w.e - wsh + F  # w = w̃·2^ew, w̃ = wi·2^-F
        w1, w2 = wi[:r], wi[r:]
        m = n - r
        if m:
            K = round_shift(int_matmul(np.ascontiguousarray(L[r:, :r]), X), F)  # L₂₁L₁₁⁻¹, m × r
            v = w1 + round_shift(int_matmul(np.ascontiguousarray(K.T), w2[:, None])[:, 0], F)
            Kv = round_shift(int_matmul(K, v[:, None])[:, 0], F)
            if m <= r:  # (I + KᵀK)⁻¹v = v − Kᵀ(I + KKᵀ)⁻¹Kv
                M2 = int_matmul(K, np.ascontiguousarray(K.T))
                M2[np.arange(m), np.arange(m)] += 1 << (2 * F)
                t = _spd_solve(M2, Kv, F)
                s = v - round_shift(int_matmul(np.ascontiguousarray(K.T), t[:, None])[:, 0], F)
            else:
                M2 = int_matmul(np.ascontiguousarray(K.T), K)
                M2[np.arange(r), np.arange(r)] += 1 << (2 * F)
                s = _spd_solve(M2, v, F)
        else:
            s = w1
        y = int_matmul(X, s[:, None])[:, 0]  # at 2^-2F
        value = mpmath.mpf(sum(x * x for x in y.tolist())) * mpmath.mpf(2) ** (2 * ew - E - 4 * F)
        dropped = mpmath.mpf(sum(map(abs, rest))) * mpmath.mpf(2) ** (E - 2 * F)
        note = f"{cutoff_note}; dropped trace {mpmath.nstr(dropped, 3)}"
        lam_top = float(np.linalg.eigvalsh(_to_float(A, F))[-1])  # λ_max(Ã) to float64 accuracy
        cutoff = rtol * mpmath.mpf(lam_top) * mpmath.mpf(2) ** E
    return PinvForm(value, r, cutoff, None, note)


