"""The quantities derived from a block's sums: ``RQ = wᵀHw/wᵀw``, ``D = RQ/‖g‖²``, ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²``,
formed without intermediate overflow (:class:`~coupled_curvature.numeric.linalg.scaled.Scaled`), and the
words that go with them when they are undefined.
"""

from __future__ import annotations

import math

from coupled_curvature.numeric.linalg.scaled import Scaled

__all__ = ["derived_quantities", "fitting_value", "gradient_at_rounding", "missing_note", "rounding_note"]


def derived_quantities(w_sq, g_sq, wHw, wHpinvw, notes: list[str]):
    """``(RQ, D, D⁺)`` from the block sums, ``None`` where undefined (a note says why).

    Works for floats and for mpmath numbers alike (the arbitrary-precision path uses it). With floats
    every quotient is formed by :class:`~coupled_curvature.numeric.linalg.scaled.Scaled` arithmetic, and
    ``wHpinvw`` may be a ``Scaled`` (``wᵀH⁺w`` of a rescaled block need not fit float64 while ``D⁺`` does):
    no intermediate overflows, and a result that does not fit float64 is ``None`` with a note, never
    ``inf`` or ``0.0``.

    >>> from coupled_curvature.numeric.linalg.scaled import Scaled
    >>> derived_quantities(1e200, 1e-200, 2.0, Scaled(1.0, 1330), [])[2]  # wᵀH⁺w = 2¹³³⁰ ≈ 1e400
    2.34365...
    """
    rayleigh = coupled = inverse_coupled = None
    if w_sq == 0:
        notes.append("w = 0: the Rayleigh quotient, D and D⁺ are undefined")
        return rayleigh, coupled, inverse_coupled
    if not _all_floats(w_sq, g_sq, wHw) or not isinstance(wHpinvw, (float, int, Scaled, type(None))):
        rayleigh = wHw / w_sq
        coupled = None if g_sq == 0 else rayleigh / g_sq
        if g_sq == 0:
            notes.append("g = 0: D = RQ/‖g‖² is undefined (stationary block)")
        if wHpinvw is not None:
            inverse_coupled = wHpinvw / w_sq * g_sq
        return rayleigh, coupled, inverse_coupled
    if not all(math.isfinite(x) for x in (w_sq, g_sq, wHw)):
        notes.append(f"wᵀw = {w_sq:g}, ‖g‖² = {g_sq:g} or wᵀHw = {wHw:g} does not fit float64 (the block's scale is "
                     "too extreme): RQ, D and D⁺ are not computed; use a model rescaled towards unit scale")
        return rayleigh, coupled, inverse_coupled
    rq = Scaled.of(wHw).times((w_sq, -1))
    rayleigh = _fitting(rq, "RQ = wᵀHw/wᵀw", notes)
    if g_sq == 0:
        notes.append("g = 0: D = RQ/‖g‖² is undefined (stationary block)")
    else:
        coupled = _fitting(rq.times((g_sq, -1)), "D = RQ/‖g‖²", notes)
    if wHpinvw is not None:
        exact = wHpinvw if isinstance(wHpinvw, Scaled) else Scaled.of(wHpinvw)
        inverse_coupled = _fitting(exact.times((w_sq, -1), (g_sq, 1)), "D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²", notes)
    return rayleigh, coupled, inverse_coupled


def gradient_at_rounding(g_sq: float, g_rounding: float | None) -> bool:
    """``‖g‖ ≤ g_rounding`` (``False`` when no rounding level was computed, and when it is 0: every term of
    ``g`` is exactly 0, as on a dead ReLU layer, so ``g = 0`` exactly, not to rounding).

    >>> gradient_at_rounding(1e-34, 1e-15), gradient_at_rounding(1e-4, 1e-15), gradient_at_rounding(0.0, 0.0)
    (True, False, False)
    """
    return g_rounding is not None and g_rounding > 0.0 and math.sqrt(g_sq) <= g_rounding


def rounding_note(g_sq: float, g_rounding: float) -> str:
    """The note of a block whose gradient is zero to rounding."""
    return (f"the gradient is zero to rounding (‖g‖ = {math.sqrt(g_sq):.1e} ≤ {g_rounding:.1e}: the rounding level of "
            "the terms that make it, or the loss does not move when the block moves along g at its own scale): "
            "D = RQ/‖g‖² and D⁺ are undefined (None); e.g. a shift of every logit under cross-entropy, or a key bias "
            "in attention")


def _all_floats(*xs: object) -> bool:
    return all(isinstance(x, (float, int)) and not isinstance(x, bool) for x in xs)


def _fitting(x: Scaled, what: str, notes: list[str]) -> float | None:
    """``x`` as a float64, or ``None`` with a note when it does not fit (overflow, or below the normal range)."""
    value = x.value
    if value is None:
        notes.append(f"{what} ≈ 1e{x.log10:.0f} does not fit float64: left undefined (None)")
    return value


def fitting_value(x: Scaled | float | None, what: str, notes: list[str]) -> float | None:
    """A ``Scaled`` number (or a float) as a float64 field, ``None`` with a note where it does not fit.

    >>> from coupled_curvature.numeric.linalg.scaled import Scaled
    >>> notes = []; fitting_value(Scaled(1.0, 2000), "wᵀH⁺w", notes), notes
    (None, ['wᵀH⁺w ≈ 1e602 does not fit float64: left undefined (None)'])
    """
    if x is None or not isinstance(x, Scaled):
        return x
    return _fitting(x, what, notes)


def missing_note(reason: str) -> str:
    """The note recorded with ``dplus_missing``: ``"D⁺ not computed: <reason>"``."""
    return f"D⁺ not computed: {reason}"
