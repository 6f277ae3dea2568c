"""A closed interval ``[lower, upper]`` with exact dyadic end points: the certified numbers' type."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from flint import arb

__all__ = ["Ball", "fraction_of", "from_arb"]


@dataclass(frozen=True)
class Ball:
    """``[lower, upper]``, both exact ``Fraction``s (dyadic when they come from arb), ``lower ≤ upper``.

    ``mid = (lower + upper)/2``, ``rad = (upper − lower)/2``, ``relative_width = (upper − lower)/|mid|``
    (``inf`` when ``mid = 0``). ``x in ball`` for a float or Fraction ``x`` tests ``lower ≤ x ≤ upper``
    exactly (a float is the dyadic rational it stores).

    >>> b = Ball(Fraction(1, 4), Fraction(3, 4))
    >>> 0.5 in b, 0.8 in b, b.mid, b.rad, b.relative_width
    (True, False, Fraction(1, 2), Fraction(1, 4), 1.0)
    """

    lower: Fraction
    upper: Fraction

    def __post_init__(self) -> None:
        if not (isinstance(self.lower, Fraction) and isinstance(self.upper, Fraction)):
            raise TypeError("Ball end points must be fractions.Fraction")
        if self.lower > self.upper:
            raise ValueError(f"Ball needs lower ≤ upper, got [{self.lower}, {self.upper}]")

    @property
    def mid(self) -> Fraction:
        return (self.lower + self.upper) / 2

    @property
    def rad(self) -> Fraction:
        return (self.upper - self.lower) / 2

    @property
    def width(self) -> Fraction:
        return self.upper - self.lower

    @property
    def relative_width(self) -> float:
        m = abs(self.mid)
        return math.inf if m == 0 else float(self.width / m)

    def excludes_zero(self) -> bool:
        """``0 ∉ [lower, upper]``: the sign is certified."""
        return self.lower > 0 or self.upper < 0

    def __contains__(self, x: object) -> bool:
        if isinstance(x, bool) or not isinstance(x, (int, float, Fraction)):
            raise TypeError(f"a Ball contains real numbers (int, float, Fraction), not {type(x).__name__}")
        if isinstance(x, float) and not math.isfinite(x):
            return False
        return self.lower <= Fraction(x) <= self.upper

    def __float__(self) -> float:
        return float(self.mid)

    def __str__(self) -> str:
        return f"[{float(self.lower):.6g}, {float(self.upper):.6g}]"


def fraction_of(x: arb) -> Fraction:
    """The exact value of an exact (radius 0), finite arb number as a Fraction.

    >>> fraction_of(arb(0.375))
    Fraction(3, 8)
    """
    m, e = x.man_exp()
    m, e = int(m), int(e)
    return Fraction(m * 2**e) if e >= 0 else Fraction(m, 2**-e)


def from_arb(x: arb) -> Ball:
    """The closed interval of an arb ball ``[m ± r]``, end points ``m − r`` and ``m + r`` exactly.

    >>> b = from_arb(arb(1) / 3)
    >>> Fraction(1, 3) in b, b.relative_width < 1e-15
    (True, True)
    """
    if not x.is_finite():
        raise ArithmeticError(f"the ball {x.str(5)} is not finite: no certified enclosure")
    mid, rad = fraction_of(x.mid()), fraction_of(x.rad())  # both exact, whatever the working precision
    return Ball(mid - rad, mid + rad)
