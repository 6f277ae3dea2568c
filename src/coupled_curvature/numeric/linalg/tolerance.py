"""Tolerances of float64 comparisons: do two numbers agree, how much did one change, is a block scale-invariant.

* :func:`agrees`: ``max|a − b| ≤ rtol·max(max|a|, max|b|)`` for floats or tensors, the tolerance
  explicit at every call site (the factor checks, the Hessian-vector-product check, the reports);
* :func:`relative_change`: ``|after − before| / |before|``;
* :func:`looks_scale_invariant`: T10's test ``|wᵀg| ≤ 1e-12·‖w‖·‖g‖`` (both non-zero);
* :data:`EPS64`: float64 machine epsilon ``2⁻⁵²`` (the spacing of floats at 1), the ``ε`` of
  every float64 conditioning bound quoted beside a measurement (``ε/λ_min_rel`` for ``D⁺``).

The rounding level of an eigenvalue cutoff (``n·ε``) is :func:`~.pinv.rounding_level`.
"""

from __future__ import annotations

import math
from typing import overload

import torch
from torch import Tensor

__all__ = ["EPS64", "agrees", "looks_scale_invariant", "relative_change"]

#: float64 machine epsilon ``2⁻⁵²`` (``numpy.finfo(float64).eps``), not the unit roundoff ``2⁻⁵³``
EPS64 = 2.0**-52
_TINY = 1e-300  # floor of the scale, so that two zeros agree


def agrees(a: float | Tensor, b: float | Tensor, *, rtol: float) -> bool:
    """``max|a − b| ≤ rtol·max(max|a|, max|b|)`` (two zeros agree; tensors of other shapes do not).

    >>> agrees(1.0, 1.0 + 1e-12, rtol=1e-8), agrees(1.0, 1.001, rtol=1e-8)
    (True, False)
    >>> agrees(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-12]), rtol=1e-9)
    True
    >>> agrees(torch.zeros(2), torch.zeros(3), rtol=1e-9), agrees(torch.zeros(0), torch.zeros(0), rtol=1e-9)
    (False, True)
    """
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if a.shape != b.shape:
            return False
        if a.numel() == 0:
            return True
        scale = max(float(a.abs().max()), float(b.abs().max()), _TINY)
        return float((a - b).abs().max()) <= rtol * scale
    return abs(a - b) <= rtol * max(abs(a), abs(b), _TINY)


@overload
def relative_change(before: float, after: float) -> float: ...


@overload
def relative_change(before: float | None, after: float | None) -> float | None: ...


def relative_change(before: float | None, after: float | None) -> float | None:
    """``|after − before| / |before|`` (``None`` if either is undefined; ``inf`` if only ``before`` is 0).

    >>> relative_change(2.0, 2.5), relative_change(0.0, 0.0), relative_change(0.0, 1.0), relative_change(None, 1.0)
    (0.25, 0.0, inf, None)
    """
    if before is None or after is None:
        return None
    if before == 0.0:
        return 0.0 if after == 0.0 else float("inf")
    return abs(after - before) / abs(before)


def looks_scale_invariant(w_dot_g: float, w_sq: float, g_sq: float) -> bool:
    """T10: ``|wᵀg| ≤ 1e-12·‖w‖·‖g‖`` with ``w ≠ 0`` and ``g ≠ 0`` (the loss looks unchanged along ``w``,
    so ``wᵀg = wᵀHw = D = 0`` up to rounding).

    >>> looks_scale_invariant(1e-20, 1.0, 1.0), looks_scale_invariant(0.5, 1.0, 1.0), looks_scale_invariant(0.0, 0.0, 1.0)
    (True, False, False)
    """
    return w_sq != 0.0 and g_sq != 0.0 and abs(w_dot_g) <= 1e-12 * math.sqrt(w_sq * g_sq)
