"""Float64 numbers with a separate binary exponent, for products whose factors span more than float64 does.

``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` is invariant under the rescalings of T3, but its factors are not: after a
layer is scaled by ``c = 10¹⁰⁰``, ``wᵀH⁺w ≈ c⁴`` overflows float64 while ``D⁺`` is of order 1. A
:class:`Scaled` number ``m·2^e`` keeps the mantissa ``m`` in float64 and the exponent ``e`` as a
Python integer, so products and quotients of representable numbers never overflow or underflow on the
way; only the final :attr:`Scaled.value` is asked to fit float64, and it is ``None`` where it does not.
Scaling by powers of two is exact, so nothing is rounded that a plain float64 product would not round.

>>> big = Scaled.of(1e200).times((1e200, 1), (1e-250, 1))
>>> big.value
1e+150
>>> Scaled.of(1e200).times((1e200, 1)).value is None  # 1e400 does not fit float64
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Scaled", "ScaledValue", "safe_norm", "scaled_sum"]

#: the smallest normal float64: a value below it in magnitude has lost relative precision
_TINY = 2.2250738585072014e-308


@dataclass(frozen=True)
class Scaled:
    """The real number ``mantissa·2^exponent`` (``mantissa`` a float64, ``exponent`` an ``int``).

    >>> Scaled(0.75, 3).value
    6.0
    """

    mantissa: float
    exponent: int = 0

    @classmethod
    def of(cls, x: float) -> Scaled:
        """``x`` (finite) split by :func:`math.frexp`: ``x = m·2^e``, ``0.5 ≤ |m| < 1`` (or ``m = 0``).

        >>> Scaled.of(6.0)
        Scaled(mantissa=0.75, exponent=3)
        """
        x = float(x)
        if not math.isfinite(x):
            raise ValueError(f"Scaled.of needs a finite number, got {x!r}")
        m, e = math.frexp(x)
        return cls(m, e)

    def normalized(self) -> Scaled:
        """The same number with ``0.5 ≤ |mantissa| < 1`` (or ``mantissa = 0``, exponent 0)."""
        if self.mantissa == 0.0:
            return Scaled(0.0, 0)
        m, e = math.frexp(self.mantissa)
        return Scaled(m, e + self.exponent)

    def times(self, *factors: tuple[float, int] | Scaled) -> Scaled:
        """``self · Π x_i^{k_i}`` for factors ``(x_i, k_i)`` (finite floats, integer powers; a zero ``x_i``
        needs ``k_i ≥ 0``) or :class:`Scaled` numbers, with no intermediate overflow or underflow.

        >>> Scaled.of(3.0).times((1e300, 2), (1e300, -2)).value
        3.0
        """
        out = self.normalized()
        m, e = out.mantissa, out.exponent
        for f in factors:
            if isinstance(f, Scaled):
                fm, fe, k = f.mantissa, f.exponent, 1
            else:
                x, k = f
                x = float(x)
                if not math.isfinite(x) or (x == 0.0 and k < 0):
                    raise ValueError(f"Scaled.times needs finite factors (non-zero under a negative power), got {x!r}")
                fm, fe = math.frexp(x)
            if fm == 0.0:
                if k > 0:
                    return Scaled(0.0, 0)
                continue
            mk, ek = math.frexp(fm**k)  # 0.5 ≤ |fm| < 1: fm^k stays in range for any |k| ≤ 1000
            m, e2 = math.frexp(m * mk)
            e += e2 + ek + fe * k
        return Scaled(m, e)

    def __add__(self, other: Scaled) -> Scaled:
        """The sum, aligned on the larger exponent (the smaller term loses what float64 would lose)."""
        a, b = self.normalized(), other.normalized()
        if a.mantissa == 0.0:
            return b
        if b.mantissa == 0.0:
            return a
        e = max(a.exponent, b.exponent)
        return Scaled(math.ldexp(a.mantissa, a.exponent - e) + math.ldexp(b.mantissa, b.exponent - e), e).normalized()

    @property
    def log10(self) -> float:
        """``log₁₀|x|`` (``-inf`` for 0): the magnitude of a value that does not fit float64, for a note."""
        if self.mantissa == 0.0:
            return -math.inf
        return math.log10(abs(self.mantissa)) + self.exponent * math.log10(2.0)

    @property
    def value(self) -> float | None:
        """The float64 of the number, or ``None`` where it overflows or falls below the normal range
        (a subnormal or a flush to 0 would lose its digits); an exact 0 is 0.0.

        >>> Scaled(1.0, -1100).value is None, Scaled(0.0, -1100).value
        (True, 0.0)
        """
        n = self.normalized()
        if n.mantissa == 0.0:
            return 0.0
        if n.exponent > 1024:
            return None
        x = math.ldexp(n.mantissa, n.exponent)
        return x if math.isfinite(x) and abs(x) >= _TINY else None


class ScaledValue:
    """A base for results whose float64 ``value`` (``None`` where it does not fit) may come with ``scaled``, the
    same number as a :class:`Scaled`; :attr:`exact` is the number as a :class:`Scaled` either way.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Form(ScaledValue):
    ...     value: float | None
    ...     scaled: Scaled | None = None
    >>> Form(6.0).exact, Form(None, Scaled(0.5, 2000)).exact.exponent, Form(None).exact
    (Scaled(mantissa=0.75, exponent=3), 2000, None)
    """

    value: float | None
    scaled: Scaled | None

    @property
    def exact(self) -> Scaled | None:
        """The number as a :class:`Scaled`: ``scaled``, or ``value`` split (``None`` without either)."""
        if self.scaled is not None:
            return self.scaled
        return None if self.value is None else Scaled.of(self.value)


def safe_norm(x) -> float:
    """``‖x‖₂`` of a float tensor or array without overflow or underflow of the squares: ``x`` is divided by
    its largest magnitude first (a plain ``x.norm()`` of entries near ``1e-200`` is 0, near ``1e200`` inf).

    >>> import torch
    >>> safe_norm(torch.tensor([3e-200, 4e-200], dtype=torch.float64)), safe_norm(torch.tensor([0.0]))
    (5e-200, 0.0)
    """
    size = x.numel() if hasattr(x, "numel") else x.size
    top = float(abs(x).max()) if size else 0.0
    if top == 0.0 or not math.isfinite(top):
        return top
    y = x / top
    return top * float((y * y).sum()) ** 0.5


def scaled_sum(weights: np.ndarray, evals: np.ndarray, power: int = 1) -> Scaled:
    """``Σ_i c_i / λ_i^power`` (``λ_i ≠ 0``) as a :class:`~.scaled.Scaled`: every term split into mantissa and
    binary exponent (:func:`numpy.frexp`), so no term overflows or underflows however far ``c`` and ``λ``
    are from 1 (a block rescaled by ``10¹⁰⁰`` has ``c ≈ 10²⁰⁰``, ``λ ≈ 10⁻²⁰⁰``); the terms are summed on
    the largest exponent, which loses only what a float64 sum would.

    >>> scaled_sum(np.array([1e200, 1e200]), np.array([1e-200, -2e-200])).value is None  # 5e399
    True
    >>> round(scaled_sum(np.array([1e200, 1e200]), np.array([1e-200, -2e-200])).log10, 6)
    399.69897
    """
    mw, ew = np.frexp(np.asarray(weights, dtype=np.float64))
    ml, el = np.frexp(np.asarray(evals, dtype=np.float64))
    mant = mw / ml**power  # |mw| < 1, 0.5 ≤ |ml| < 1: |mant| < 2^power
    exps = ew.astype(np.int64) - power * el.astype(np.int64)
    live = mw != 0.0
    if not live.any():
        return Scaled(0.0)
    top = int(exps[live].max())
    return Scaled(float(np.ldexp(mant[live], (exps[live] - top).astype(np.int32)).sum()), top).normalized()
