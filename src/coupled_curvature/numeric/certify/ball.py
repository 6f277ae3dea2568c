"""A closed interval ``[lower, upper]`` with exact dyadic end points: the certified numbers' type."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from flint import arb

__all__ = ["Ball", "fraction_of", "from_arb", "ratio", "scientific"]


@dataclass(frozen=True)
class Ball:
    """``[lower, upper]``, both exact ``Fraction``s (dyadic when they come from arb), ``lower ≤ upper``.

    ``mid = (lower + upper)/2``, ``rad = (upper − lower)/2``, ``relative_width = (upper − lower)/|mid|``
    (``inf`` when ``mid = 0``; never 0 for a ball of nonzero width, see ``relative_width_log2`` below
    ``2^-1074``). ``x in ball`` for a float or Fraction ``x`` tests ``lower ≤ x ≤ upper``
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
        """``(upper − lower)/|mid|`` as a float, never 0 for a ball of nonzero width (see :func:`ratio`)."""
        return ratio(self.width, abs(self.mid))

    @property
    def relative_width_log2(self) -> float:
        """``log2((upper − lower)/|mid|)`` from the exact fractions: readable where ``relative_width``
        is clamped (below ``2^-1074``, e.g. at 2,000 bits); ``-inf`` for a point, ``inf`` when ``mid = 0``.

        >>> Ball(Fraction(1), 1 + Fraction(1, 2**1500)).relative_width_log2
        -1500.0
        """
        m = abs(self.mid)
        if m == 0 or self.width == 0:
            return math.inf if m == 0 else -math.inf
        r = self.width / m
        return math.log2(r.numerator) - math.log2(r.denominator)  # math.log2 takes ints of any size

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
        return f"[{scientific(self.lower)}, {scientific(self.upper)}]"


def ratio(num: Fraction, den: Fraction) -> float:
    """``num/den`` (both ``≥ 0``) as a float: rounded to nearest, except that a positive value below
    the smallest positive float reads as that float (``2^-1074``), never 0, and one above the largest
    reads ``inf``; ``inf`` when ``den = 0``.

    >>> ratio(Fraction(1), Fraction(2**1200)), ratio(Fraction(0), Fraction(3)), ratio(Fraction(2**1100), Fraction(1))
    (5e-324, 0.0, inf)
    """
    if den == 0:
        return math.inf
    if num == 0:
        return 0.0
    try:
        return max(float(num / den), math.ulp(0.0))
    except OverflowError:
        return math.inf


def scientific(x: Fraction, digits: int = 6) -> str:
    """``x`` written like ``format(x, '.6g')``, also beyond the float64 range.

    >>> scientific(Fraction(3, 8)), scientific(Fraction(-10**400)), scientific(Fraction(1, 3 * 10**500))
    ('0.375', '-1e+400', '3.33333e-501')
    """
    if x == 0 or 2.0 ** -1000 < abs(x) < 2.0 ** 1000:
        return f"{float(x):.{digits}g}"
    sign, x = ("-" if x < 0 else ""), abs(x)
    e = len(str(x.numerator)) - len(str(x.denominator))  # 10^e is within a factor 10 of x
    e = e if x >= Fraction(10) ** e else e - 1
    m = x / Fraction(10) ** e  # in [1, 10)
    digits_m = f"{float(m):.{digits - 1}e}"  # may round up to 10.0: the e-notation absorbs it
    mant, _, carry = digits_m.partition("e")
    e += int(carry)
    mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
    return f"{sign}{mant}e{'+' if e >= 0 else '-'}{abs(e):02d}"


def fraction_of(x: arb) -> Fraction:
    """The exact value of an exact (radius 0), finite arb number as a Fraction.

    >>> fraction_of(arb(0.375))
    Fraction(3, 8)
    """
    man, exp = x.man_exp()
    m, e = int(man), int(exp)
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
