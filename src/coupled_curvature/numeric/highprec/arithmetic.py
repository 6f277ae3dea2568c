"""Exact arithmetic on arrays of dyadic rationals ``M·2^e`` (Python integers, one binary exponent).

A float64 (and any mpmath number) is a dyadic rational ``m·2^e``, so arrays convert exactly
(:func:`from_floats`, :func:`from_mpfs`); products are exact (:func:`int_matmul`: above a small
size through float64 BLAS on 16-bit digit slices, exact because every partial sum is an integer
below ``2^53``); :func:`round_to_bits` rounds to block floating point where the caller allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import mpmath
import numpy as np

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["Dyadic", "dyadic_matmul", "from_floats", "from_mpfs", "int_matmul", "max_bits", "round_div",
           "round_shift", "round_to_bits", "shift_to", "to_mpf"]

_SMALL_PRODUCT = 20_000  # multiply-adds below which int_matmul uses plain Python integers


@dataclass
class Dyadic:
    """An array of dyadic rationals ``M·2^e``: ``M`` an object array of Python ints."""

    M: np.ndarray
    e: int


def max_bits(M: np.ndarray) -> int:
    """``max_i bitlength(|M_i|)`` over an object array of ints (0 when empty or all zero).

    >>> max_bits(np.array([3, -8, 0], dtype=object))
    4
    """
    return max(map(int.bit_length, M.ravel().tolist()), default=0)


def _from_pairs(pairs: list[tuple[int, int]], shape: tuple[int, ...]) -> Dyadic:
    """Exact array from ``(m, e)`` pairs (value ``m·2^e``), one common exponent."""
    nz = [(m, e) for m, e in pairs if m]
    if not nz:
        return Dyadic(np.zeros(shape, dtype=object), 0)
    e0 = min(e + ((m & -m).bit_length() - 1) for m, e in nz)  # drop common trailing zeros
    M = np.array([(m << (e - e0)) if e >= e0 else (m >> (e0 - e)) for m, e in pairs], dtype=object)
    return Dyadic(M.reshape(shape), e0)


def from_floats(a: np.ndarray) -> Dyadic:
    """float64 array -> exact dyadic array ``M·2^e`` (no rounding; common trailing zeros dropped).

    >>> d = from_floats(np.array([0.75, -2.0]))
    >>> d.M.tolist(), d.e
    ([3, -8], -2)
    """
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise InvalidInputError("highprec needs finite weights and data (found NaN or inf)")
    man, ex = np.frexp(a)
    ints = (man * 2.0**53).astype(np.int64).ravel().tolist()  # exact: 53-bit mantissas
    return _from_pairs([(m, int(e) - 53) for m, e in zip(ints, ex.ravel().tolist())], a.shape)


def from_mpfs(values: Sequence[mpmath.mpf], shape: tuple[int, ...]) -> Dyadic:
    """mpmath numbers -> exact dyadic array of ``shape`` (each ``mpf`` is ``±m·2^e``; none is re-rounded).

    >>> d = from_mpfs([mpmath.mpf(5) / 4, mpmath.mpf(3)], (2,))
    >>> d.M.tolist(), d.e
    ([5, 12], -2)
    """
    pairs = []
    for v in values:
        s, m, e, _ = (v if isinstance(v, mpmath.mpf) else mpmath.mpf(v))._mpf_  # mpf(v) would re-round
        pairs.append((-m if s else m, e))
    return _from_pairs(pairs, shape)


def round_to_bits(d: Dyadic, bits: int) -> Dyadic:
    """Round to at most ``bits`` bits relative to the largest entry (block floating point):
    ``M -> round(M / 2^s)``, ``e -> e + s`` with ``s = max_bits(M) − bits``.

    >>> d = round_to_bits(Dyadic(np.array([255, 1], dtype=object), 0), 4)
    >>> d.M.tolist(), d.e
    ([16, 0], 4)
    """
    sh = max_bits(d.M) - bits
    if sh <= 0:
        return d
    return Dyadic((d.M + (1 << (sh - 1))) >> sh, d.e + sh)


def shift_to(d: Dyadic, e: int) -> np.ndarray:
    """Integers of ``d`` at exponent ``e ≤ d.e`` (exact): ``M·2^(d.e − e)``.

    >>> shift_to(Dyadic(np.array([3], dtype=object), 2), 0).tolist()
    [12]
    """
    return d.M << (d.e - e) if d.e > e else d.M


def to_mpf(m: int, e: int) -> mpmath.mpf:
    """``m·2^e`` as an exact ``mpf`` (whatever the working precision).

    >>> to_mpf(3, -2), to_mpf(0, 5)
    (mpf('0.75'), mpf('0.0'))
    """
    return mpmath.mpf((m, e)) if m else mpmath.mpf(0)


def round_shift(M: np.ndarray, sh: int) -> np.ndarray:
    """``round(M / 2^sh)`` elementwise (halves round up; ``sh ≤ 0`` leaves ``M``).

    >>> round_shift(np.array([5, -5, 6], dtype=object), 1).tolist()
    [3, -2, 3]
    """
    return (M + (1 << (sh - 1))) >> sh if sh > 0 else M


@overload
def round_div(M: int, d: int) -> int: ...


@overload
def round_div(M: np.ndarray, d: int) -> np.ndarray: ...


def round_div(M: np.ndarray | int, d: int) -> np.ndarray | int:
    """``round(M / d) = ⌊(2M + d) / 2d⌋`` elementwise for a positive int ``d``.

    >>> round_div(np.array([7, -7, 5], dtype=object), 2).tolist()
    [4, -3, 3]
    """
    return (2 * M + d) // (2 * d)


# --------------------------------------------------------------------------- exact integer matmul


def _digits(M: np.ndarray) -> tuple[np.ndarray, int]:
    """Signed 16-bit digits as float64: ``M = Σ_s D[s]·2^(16s)``, ``D`` of shape ``(K, *M.shape)``."""
    flat = M.ravel().tolist()
    K = max(1, -(-max(map(int.bit_length, flat), default=0) // 16))
    buf = b"".join(abs(x).to_bytes(2 * K, "little") for x in flat)
    D = np.frombuffer(buf, dtype="<u2").reshape(len(flat), K).T.astype(np.float64)
    neg = np.fromiter((x < 0 for x in flat), dtype=bool, count=len(flat))
    D[:, neg] *= -1.0
    return D.reshape((K, *M.shape)), K


def int_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact ``A @ B`` for object arrays of Python ints, through float64 BLAS on digit slices.

    Each digit product sum is an integer of magnitude ``≤ k·(2^16−1)² < 2^53`` (``k ≤ 2^20``), so
    BLAS computes it exactly; digit groups are summed in int64, carried, and reassembled.

    >>> A = np.array([[3**80, -1], [2, 5**40]] * 20, dtype=object).reshape(40, 2)
    >>> B = np.array([[7**90, -(2**200)] * 300, [1, 0] * 300], dtype=object)
    >>> bool((int_matmul(A, B) == A.dot(B)).all())
    True
    """
    m, k = A.shape
    n = B.shape[1]
    if m * n == 0 or k == 0:
        return np.zeros((m, n), dtype=object)
    if m * n * k <= _SMALL_PRODUCT:
        return A.dot(B)  # Python integer arithmetic beats the slicing overhead here
    if k > 1 << 20:
        raise InvalidInputError("highprec: inner dimension too large for the exact product")
    Da, Ka = _digits(A)
    Db, Kb = _digits(B)
    Bs = np.ascontiguousarray(Db.transpose(1, 0, 2)).reshape(k, Kb * n)
    T = Ka + Kb + 3  # digit groups plus room for carries
    C = np.zeros((T, m, n), dtype=np.int64)
    for s in range(Ka):
        R = (Da[s] @ Bs).reshape(m, Kb, n).transpose(1, 0, 2)
        C[s:s + Kb] += R.astype(np.int64)
    for u in range(T - 1):
        carry = C[u] >> 16
        C[u] -= carry << 16
        C[u + 1] += carry
    low = np.ascontiguousarray(C[:T - 1].reshape(T - 1, -1).T.astype("<u2"))
    view, step, sh = memoryview(low.tobytes()), 2 * (T - 1), 16 * (T - 1)
    out = [int.from_bytes(view[i * step:(i + 1) * step], "little") + (t << sh)
           for i, t in enumerate(C[T - 1].ravel().tolist())]
    return np.array(out, dtype=object).reshape(m, n)


def dyadic_matmul(a: Dyadic, b: Dyadic) -> Dyadic:
    """Exact ``(A·2^a)(B·2^b) = (AB)·2^(a+b)``.

    >>> c = dyadic_matmul(from_floats(np.array([[0.5, 1.0]])), from_floats(np.array([[2.0], [0.25]])))
    >>> to_mpf(int(c.M[0, 0]), c.e)
    mpf('1.25')
    """
    return Dyadic(int_matmul(a.M, b.M), a.e + b.e)


