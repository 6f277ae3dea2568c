"""Pseudo-inverse quadratic forms ``wᵀH⁺w`` with a cutoff relative to the spectrum.

Both routes compute every eigenvalue ``λ_i`` of ``H`` and the weight ``c_i = (u_iᵀw)²`` of ``w``
on its eigenvector, then keep ``|λ_i| > τ``:

* small blocks: a full eigendecomposition (``torch.linalg.eigh``);
* large blocks: a Householder reflection ``P`` with ``Pw = ±‖w‖e₁``, then a two-stage reduction
  of ``PHP`` to tridiagonal ``T`` (full → band with blocked reflectors, band → tridiagonal with
  rotations). Neither stage touches the first coordinate, so ``Uᵀw = ±‖w‖e₁`` for the whole
  orthogonal ``U``, and ``c_i = ‖w‖² z_i[0]²`` with ``z_i`` the eigenvectors of ``T`` (divide and
  conquer, ``stevd``; MRRR, ``stemr``, was faster but its eigenvectors lose ``O(10²ε)``
  orthogonality, which moved ``D⁺`` by 0.4% when eigenvalues sat within 1% of the cutoff).
  No eigenvector of ``H`` is formed and no transform is applied back: about ``4/3·n³`` flops,
  nearly all in ``symm``/``syr2k``, against ``≈ 9n³`` for eigenvalues and eigenvectors. The BLAS/LAPACK
  routines are bound from scipy's capsules (:mod:`.lapack_binding`); :func:`fast_route_status` says
  whether they are, and a fallback to ``eigh`` warns once (:class:`FastRouteUnavailableWarning`).

Every route ends in :func:`cutoff_sum`, the one relative-cutoff spectrum sum of the package.

Both are backward stable (the values are exact for a matrix within ``O(nε‖H‖)`` of ``H``).
Exactly zero rows (dead ReLU units) are dropped first: they carry exact zero eigenvalues, which
no cutoff keeps. Memory: one ``n×n`` working copy, then ``2n²`` for the tridiagonal eigenvectors
and their workspace (the copy is freed first).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg.lapack import dstevd
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg import lapack_binding as lapack_binding
from coupled_curvature.numeric.linalg.lapack_binding import (
    FastRouteStatus,
    FastRouteUnavailableWarning,
    fast_route_status,
)
from coupled_curvature.numeric.linalg.scaled import Scaled, ScaledValue, scaled_sum

#: blocks with at least this many non-zero rows take the tridiagonal route (measured crossover
#: ≈ 300–400 on one core: ``python bench/bench_inverse.py --crossover``).
FAST_MIN_SIZE = 384


def _band_for(n: int) -> int:
    """Bandwidth of the intermediate band matrix: wide panels speed up stage 1 (``O(n³)``),
    stage 2 costs ``O(n²·band)``; on one core 32 measured best up to n = 2000, 64 at 4000–9025
    (96 was 8% slower at 9025)."""
    return 32 if n < 2500 else 64


@dataclass(frozen=True)
class PinvForm(ScaledValue):
    """``value = wᵀH⁺_τ w`` with ``τ = rtol·max|λ|``; ``rank`` eigenvalues kept, ``noise_kept`` of
    them at rounding level (``|λ| ≤ n·ε·max|λ|``, only possible when ``rtol < n·ε``).

    ``scaled`` is the same number as a :class:`~.scaled.Scaled` ``m·2^e`` (never overflows); ``value`` is
    ``None`` where it does not fit float64 (after a rescaling by ``10¹⁰⁰``, ``wᵀH⁺w ≈ 10⁴⁰⁰``), and
    ``D⁺`` is then formed from ``scaled`` (``scaled.times((g_sq, 1), (w_sq, -1))``); ``exact`` is either as a
    :class:`~.scaled.Scaled`."""

    value: float | None
    rank: int
    cutoff: float
    max_abs_eig: float
    min_kept_rel_eig: float | None
    noise_kept: int = 0
    scaled: Scaled | None = None


def pinv_quadratic_form(H: Tensor, w: Tensor, rtol: float) -> PinvForm:
    """``wᵀH⁺_τ w = Σ_{|λ_i| > τ} (u_iᵀw)² / λ_i`` for symmetric ``H``, ``τ = rtol·max_i|λ_i|``.

    The cutoff is relative, so ``H -> c⁻²QHQᵀ`` keeps the same eigen-directions (T7).
    ``H`` may be indefinite; negative eigenvalues contribute negative terms. ``H`` is read
    as ``(H + Hᵀ)/2`` and never modified. Rows of ``H`` that are exactly zero carry exact zero
    eigenvalues, which no cutoff keeps; they are dropped before the decomposition.

    Args:
        H: a square symmetric matrix (read as ``(H + Hᵀ)/2``), finite.
        w: a vector of the same size.
        rtol: the relative cutoff, in ``[0, 1)``.

    Returns:
        PinvForm: the value, the kept rank, the cutoff and the
        smallest kept relative eigenvalue.

    Raises:
        InvalidInputError: a matrix that is not square, not finite, or a vector of the wrong size.

    See also:
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (which takes it per block).

    >>> H = torch.diag(torch.tensor([4.0, -2.0, 0.0], dtype=torch.float64))
    >>> pinv_quadratic_form(H, torch.ones(3, dtype=torch.float64), 1e-10).value
    -0.25
    """
    S, v = _symmetric_nonzero_part(H, w, rtol)
    return cutoff_sum(*_spectrum_consuming(S, v), rtol)


def symmetric_spectrum(S: Tensor, v: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, c)``: eigenvalues of symmetric ``S`` and ``c_i = (u_iᵀv)²``, by the faster route for its size.

    Reads ``(S + Sᵀ)/2`` and never modifies ``S``; exactly zero rows (exact zero eigenvalues,
    ``c_i = v_i²``) are kept in the output. Blocks of at least :data:`FAST_MIN_SIZE` non-zero rows
    take the tridiagonal route, smaller ones a full ``eigh``.

    >>> S = torch.tensor([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    >>> lam, c = symmetric_spectrum(S, torch.tensor([1.0, 0.0, 3.0], dtype=torch.float64))
    >>> sorted(zip(lam.round(12).tolist(), c.round(12).tolist()))
    [(0.0, 9.0), (1.0, 0.5), (3.0, 0.5)]
    """
    S, v = S.detach().to(torch.float64).cpu(), v.detach().to(torch.float64).cpu()
    _check_finite(S)
    live, v_live, dead = _live_part(S, v)
    if not v_live.numel():
        return np.zeros(dead.numel()), (dead * dead).cpu().numpy()
    # the eigen-step runs on a well-scaled matrix: S/2^a and v/2^b with max|S|, max|v| in [0.5, 1), exact
    # (powers of two), and the scales are put back on λ and c = (u·v)² at the end
    a, b = _binary_exponent(live), _binary_exponent(v_live)
    _scale_by_power_of_two(live, -a)
    lam, c = _spectrum_consuming(live, _scale_by_power_of_two(v_live.clone(), -b))
    with np.errstate(over="ignore"):  # checked just below
        lam, c = np.ldexp(lam, a), np.ldexp(c, 2 * b)
    if not (np.isfinite(lam).all() and np.isfinite(c).all()):
        raise InvalidInputError(
            "the spectrum of a curvature block does not fit float64 (‖w‖² or an eigenvalue overflows: the weights' "
            "scale is too extreme, e.g. a layer rescaled by 1e160); use a model rescaled towards unit scale before "
            "diagnosing it")
    return np.concatenate([lam, np.zeros(dead.numel())]), np.concatenate([c, (dead * dead).cpu().numpy()])


def _binary_exponent(t: Tensor) -> int:
    """``e`` with ``max|t| = m·2^e``, ``0.5 ≤ m < 1`` (0 for an all-zero tensor)."""
    top = float(t.abs().max()) if t.numel() else 0.0
    return 0 if top == 0.0 else math.frexp(top)[1]


def _scale_by_power_of_two(t: Tensor, k: int) -> Tensor:
    """``t·2^k`` in place, exact; in two halves so that neither factor overflows."""
    for part in (k // 2, k - k // 2):
        if part:
            t.mul_(2.0**part)
    return t


def _spectrum_consuming(S: Tensor, v: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, c)`` of symmetric ``S`` (our own copy: the tridiagonal route uses it as workspace)."""
    if S.shape[0] >= FAST_MIN_SIZE:
        if lapack_binding.ROUTINES is not None:
            d, e, w_sq = _tridiagonalize(S.cpu().numpy().T, v.cpu().numpy(), None)
            del S  # freed before the tridiagonal eigenvectors are allocated
            return _first_components(d, e, w_sq)
        lapack_binding.warn_fallback()
    return eigh_spectrum(S, v)


def _check_finite(S: Tensor) -> None:
    """Refuse a curvature matrix with NaN or inf entries before LAPACK sees it (it would fail to converge)."""
    if not bool(torch.isfinite(S).all()):
        raise InvalidInputError(
            "the curvature matrix holds non-finite values (float64 overflow: the weights' scale is too extreme, "
            "e.g. a layer rescaled by 1e300); rescale the model towards unit scale, or use a power-of-two factor "
            "of moderate size, before diagnosing it")


def eigh_spectrum(S: Tensor, w: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, c)``: eigenvalues of symmetric ``S`` and ``c_i = (u_iᵀw)²``, by full ``eigh``.

    >>> S = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    >>> lam, c = eigh_spectrum(S, torch.tensor([1.0, 0.0], dtype=torch.float64))
    >>> lam.round(12).tolist(), c.round(12).tolist()
    ([1.0, 3.0], [0.5, 0.5])
    """
    try:
        evals, evecs = torch.linalg.eigh(S)
    except torch.linalg.LinAlgError as e:
        scale = float(S.abs().max()) if S.numel() else 0.0
        raise InvalidInputError(
            f"the eigendecomposition of a curvature matrix failed to converge ({str(e).splitlines()[0]}; largest "
            f"entry {scale:.3g}): its entries span more than float64 can resolve, as after a rescaling by 1e300; "
            "use a model rescaled towards unit scale before diagnosing it") from None
    coeff = evecs.T @ w
    return evals.cpu().numpy(), (coeff * coeff).cpu().numpy()


def tridiagonal_spectrum(S: Tensor, w: Tensor, band: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, c)`` as :func:`eigh_spectrum`, without eigenvectors of ``S``.

    ``U`` orthogonal with ``UᵀSU = T`` tridiagonal and ``Uᵀw = ±‖w‖e₁``; for ``Tz_i = λ_i z_i``,
    ``c_i = (u_iᵀw)² = ‖w‖² z_i[0]²`` with ``u_i = Uz_i``. ``S`` (symmetric) is copied, not
    modified; ``band`` is the intermediate bandwidth (default by size).

    >>> S, w = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64), torch.tensor([1.0, 0.0]).double()
    >>> [x.round(12).tolist() for x in tridiagonal_spectrum(S, w)] == [x.round(12).tolist() for x in
    ...                                                                eigh_spectrum(S, w)]
    True
    """
    if lapack_binding.ROUTINES is None:
        raise RuntimeError(f"the two-stage LAPACK route is unavailable ({fast_route_status().reason}); "
                           "use eigh_spectrum")
    A = np.array(S.detach().to(torch.float64).cpu().numpy(), order="F")  # only its lower part is used
    return _first_components(*_tridiagonalize(A, w.detach().to(torch.float64).cpu().numpy(), band))


def _tridiagonalize(A: np.ndarray, w: np.ndarray, band: int | None) -> tuple[np.ndarray, np.ndarray, float]:
    """``(d, e, ‖w‖²)``: ``T = UᵀAU`` with ``Uᵀw = ±‖w‖e₁``.

    ``A`` is Fortran-ordered; its lower part is read and overwritten."""
    n = A.shape[0]
    wn = np.array(w, dtype=np.float64)
    w_sq = float(wn @ wn)
    if n == 1:
        return A[0].copy(), np.empty(0), w_sq
    _reflect_to_e1(A, wn)
    d, e = _band_to_tridiagonal(_full_to_band(A, min(band or _band_for(n), n - 1)))
    return d, e, w_sq


def _first_components(d: np.ndarray, e: np.ndarray, w_sq: float) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of the tridiagonal ``T`` and ``‖w‖² z_i[0]²`` (divide and conquer)."""
    if d.size == 1:
        return d.copy(), np.array([w_sq])
    evals, Z, info = dstevd(d, e, compute_v=1)
    if info != 0:
        raise RuntimeError(f"LAPACK dstevd did not converge (info={info})")
    return evals, w_sq * Z[0] ** 2


def cutoff_sum(evals: np.ndarray, weights: np.ndarray, rtol: float, power: int = 1) -> PinvForm:
    """``Σ_{|λ_i| > τ} c_i / λ_i^power`` with ``τ = rtol·max_i|λ_i|`` (strict ``>``: an eigenvalue at the
    cutoff is dropped; ``value = 0``, ``rank = 0`` and ``min_kept_rel_eig = None`` when none is kept).

    The one relative-cutoff spectrum sum: ``power = 1`` gives ``wᵀH⁺_τ w`` from ``(λ, c)`` of ``H``,
    ``power = 2`` gives ``wᵀ(BᵀB)⁺_τ w`` from the spectrum of ``K = BBᵀ`` with ``c`` taken on ``Bw``.

    >>> f = cutoff_sum(np.array([4.0, -2.0, 1e-12]), np.array([1.0, 1.0, 1.0]), 1e-10)
    >>> f.value, f.rank, f.min_kept_rel_eig
    (-0.25, 2, 0.5)
    >>> cutoff_sum(np.array([2.0, 1.0]), np.array([1.0, 1.0]), 0.5).rank   # 1.0 is at τ, not above
    1
    """
    max_abs = float(np.abs(evals).max()) if evals.size else 0.0
    cutoff = rtol * max_abs
    keep = np.abs(evals) > cutoff
    if max_abs == 0.0 or not keep.any():
        return PinvForm(0.0, 0, cutoff, max_abs, None, scaled=Scaled(0.0))
    kept = evals[keep]
    total = scaled_sum(weights[keep], kept, power)
    noise = int((np.abs(kept) <= rounding_level(evals.size) * max_abs).sum())
    return PinvForm(total.value, int(keep.sum()), cutoff, max_abs, float(np.abs(kept).min()) / max_abs, noise,
                    scaled=total)


#: the constant ``c`` of the conditioning-aware tolerance ``max(tol, c·ε·κ)`` (:func:`conditioned_rtol`)
CONDITION_FACTOR = 20.0


def conditioned_rtol(tol: float, kappa: float | None) -> float:
    """``max(tol, c·ε·κ)``, ``c = 20``: the relative agreement two float64 computations of ``wᵀH⁺_τw``
    (or ``D⁺``) can be held to, with ``κ = max|λ| / min_{kept}|λ|`` the condition number of the kept
    spectrum (``1/min_kept_rel_eig`` of a ``Diagnosis`` block). A tiny kept eigenvalue makes ``D⁺``
    large and its float64 value accurate only to about ``ε·κ``; a fixed bound that passes on one
    CPU's BLAS fails on another's.

    >>> conditioned_rtol(1e-9, 10.0), conditioned_rtol(1e-9, 1e9) > 1e-6
    (1e-09, True)
    """
    return max(float(tol), CONDITION_FACTOR * float(np.finfo(np.float64).eps) * float(kappa or 0.0))


def rounding_level(n: int) -> float:
    """``n·ε``: eigenvalues of an ``n×n`` float64 block below this fraction of ``max|λ|`` are rounding noise.

    >>> rounding_level(1000) < 1e-12
    True
    """
    return max(n, 1) * float(np.finfo(np.float64).eps)


def _symmetric_nonzero_part(H: Tensor, w: Tensor, rtol: float) -> tuple[Tensor, Tensor]:
    """Checked inputs: ``(H + Hᵀ)/2`` and ``w`` restricted to the rows of ``H`` that are not exactly zero."""
    if not isinstance(H, Tensor) or not isinstance(w, Tensor):
        raise InvalidInputError("H and w must be torch tensors")
    if H.dim() != 2 or H.shape[0] != H.shape[1] or w.dim() != 1 or w.shape[0] != H.shape[0]:
        raise InvalidInputError(
            f"H must be square (n, n) and w of length n; got H {tuple(H.shape)}, w {tuple(w.shape)}"
        )
    if not isinstance(rtol, (int, float)) or not (0.0 <= rtol < 1.0):
        raise InvalidInputError(f"rtol must be a number in [0, 1), got {rtol!r}")
    H = H.detach().to(dtype=torch.float64, device="cpu")
    w = w.detach().to(dtype=torch.float64, device="cpu")
    if not bool(torch.isfinite(H).all()) or not bool(torch.isfinite(w).all()):
        raise InvalidInputError("H and w must be finite (found NaN or inf); check the loss and the weights")
    S, v, _ = _live_part(H, w)
    return S, v


def _live_part(H: Tensor, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(S, v, w_dead)``: ``S = (H + Hᵀ)/2`` (a new tensor) and ``w`` on the rows that are not exactly
    zero, and ``w`` on the zero rows (exact zero eigenvalues with eigenvectors ``e_i``)."""
    S = H + H.T
    S.mul_(0.5)
    live = (S != 0).any(dim=1)
    if bool(live.all()):
        return S, w.contiguous(), w[:0]
    idx = live.nonzero().squeeze(1)
    return S[idx][:, idx], w[idx].contiguous(), w[~live]


def _i(v: int):
    """A pointer to a 32-bit integer: the width :mod:`.lapack_binding` checked before binding."""
    return ctypes.byref(ctypes.c_int32(v))


def _f(v: float):
    return ctypes.byref(ctypes.c_double(v))


def _p(a: np.ndarray, offset: int = 0) -> int:
    return a.ctypes.data + a.itemsize * offset


def _check(info: ctypes.c_int32, routine: str) -> None:
    if info.value != 0:
        raise RuntimeError(f"LAPACK {routine} failed with info={info.value}")


def _reflect_to_e1(A: np.ndarray, w: np.ndarray) -> None:
    """``A ← PAP`` (lower part) with the Householder ``P = I − τvvᵀ``, ``Pw = βe₁``."""
    n, L = A.shape[0], lapack_binding.bound_routines()
    v = np.array(w, dtype=np.float64, order="F")
    tau, work, info = np.zeros(1), np.empty(max(n, 1)), ctypes.c_int32(0)
    L["dgeqrf"](_i(n), _i(1), _p(v), _i(n), _p(tau), _p(work), _i(work.size), ctypes.byref(info))
    _check(info, "dgeqrf")
    if tau[0] == 0.0:  # w already along e₁ (or zero)
        return
    v[0] = 1.0
    y = np.zeros(n)
    L["dsymv"](b"L", _i(n), _f(tau[0]), _p(A), _i(n), _p(v), _i(1), _f(0.0), _p(y), _i(1))
    y += (-0.5 * tau[0] * float(y @ v)) * v
    L["dsyr2"](b"L", _i(n), _f(-1.0), _p(v), _i(1), _p(y), _i(1), _p(A), _i(n))


def _full_to_band(A: np.ndarray, b: int) -> np.ndarray:
    """Lower band storage ``(b+1, n)`` of ``QᵀAQ``, ``Q`` acting on rows ``≥ b`` only; ``A`` is overwritten.

    Panel ``j``: ``A[j+b:, j:j+b] = V R`` (QR), ``Q_j = I − VTVᵀ``; the trailing block
    becomes ``A₂₂ − VWᵀ − WVᵀ`` with ``X = A₂₂VT`` and ``W = X − ½V(TᵀVᵀX)``.
    """
    n, L = A.shape[0], lapack_binding.bound_routines()
    V = np.zeros((n, b), order="F")
    W = np.zeros((n, b), order="F")
    T = np.zeros((b, b), order="F")
    M = np.zeros((b, b), order="F")
    tau = np.zeros(b)
    work = np.empty(max(64 * b, n))
    info = ctypes.c_int32(0)
    for j in range(0, n - b - 1, b):
        m, k = n - j - b, min(n - j - b, b)
        panel, trail = (j + b) + j * n, (j + b) + (j + b) * n
        L["dgeqrf"](_i(m), _i(b), _p(A, panel), _i(n), _p(tau), _p(work), _i(work.size), ctypes.byref(info))
        _check(info, "dgeqrf")
        V[:m, :k] = np.tril(A[j + b :, j : j + k], -1)
        np.fill_diagonal(V[:m, :k], 1.0)
        L["dlarft"](b"F", b"C", _i(m), _i(k), _p(V), _i(n), _p(tau), _p(T), _i(b))
        L["dsymm"](b"L", b"L", _i(m), _i(k), _f(1.0), _p(A, trail), _i(n), _p(V), _i(n), _f(0.0), _p(W), _i(n))
        L["dtrmm"](b"R", b"U", b"N", b"N", _i(m), _i(k), _f(1.0), _p(T), _i(b), _p(W), _i(n))
        L["dgemm"](b"T", b"N", _i(k), _i(k), _i(m), _f(1.0), _p(V), _i(n), _p(W), _i(n), _f(0.0), _p(M), _i(b))
        L["dtrmm"](b"L", b"U", b"T", b"N", _i(k), _i(k), _f(1.0), _p(T), _i(b), _p(M), _i(b))
        L["dgemm"](b"N", b"N", _i(m), _i(k), _i(k), _f(-0.5), _p(V), _i(n), _p(M), _i(b), _f(1.0), _p(W), _i(n))
        L["dsyr2k"](b"L", b"N", _i(m), _i(k), _f(-1.0), _p(V), _i(n), _p(W), _i(n), _f(1.0), _p(A, trail), _i(n))
    ab = np.zeros((b + 1, n), order="F")
    for r in range(b + 1):  # entries below the band hold reflectors and are never read
        ab[r, : n - r] = np.diagonal(A, -r)
    return ab


def _band_to_tridiagonal(ab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(d, e)`` of the tridiagonal form of a lower band matrix (rotations never touch row 0)."""
    kd, n = ab.shape[0] - 1, ab.shape[1]
    d, e, q, work, info = np.empty(n), np.empty(n), np.zeros(1), np.empty(n), ctypes.c_int32(0)
    lapack_binding.bound_routines()["dsbtrd"](
        b"N", b"L", _i(n), _i(kd), _p(ab), _i(kd + 1), _p(d), _p(e), _p(q), _i(1), _p(work), ctypes.byref(info)
    )
    _check(info, "dsbtrd")
    return d, e[: n - 1]


__all__ = ["CONDITION_FACTOR", "FAST_MIN_SIZE", "FastRouteStatus", "FastRouteUnavailableWarning", "PinvForm",
           "conditioned_rtol", "cutoff_sum",
           "eigh_spectrum", "fast_route_status", "pinv_quadratic_form", "symmetric_spectrum",
           "rounding_level", "tridiagonal_spectrum"]
