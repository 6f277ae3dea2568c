"""The precision check of T3 in arbitrary precision: the invariance error must fall like ``10^-dps``.

A layer rescaling by a ``c`` that is not a power of two is applied at ``dps`` digits
(:func:`~coupled_curvature.numeric.highprec.engine.invariance_error`): the rescaled weights are
rounded to ``dps`` digits, so the error is not 0 but must fall like ``10^-dps``. The check passes
when ``ΔD ≤ 10^-(dps−4)`` (:func:`within_precision`). ``ccurv check --precision`` and the report's
"Arbitrary precision" section use this rule, each with its own ``c`` (0.3 and 3/7), on the same
small net (:func:`precision_net`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsFloat

from coupled_curvature.base.errors import InvalidInputError

if TYPE_CHECKING:  # torch is imported where a net is built: the pass rule alone costs nothing
    import torch
    from torch import nn

__all__ = ["DIGITS_MARGIN", "DPS", "C", "PrecisionRow", "PrecisionData", "precision_bound", "precision_check",
           "precision_net", "precision_sweep", "within_precision"]

#: digits of ``dps`` the invariance error may lose (rounding of the map, the sums, the pseudo-inverse)
DIGITS_MARGIN = 4


def precision_bound(dps: int) -> float:
    """``10^-(dps − 4)``: the largest invariance error that passes at ``dps`` digits.

    >>> precision_bound(24)
    1e-20
    """
    return 10.0 ** -(dps - DIGITS_MARGIN)


def within_precision(error: SupportsFloat, dps: int) -> bool:
    """``error ≤ 10^-(dps − 4)`` (``error`` a float or an mpmath number).

    >>> within_precision(1e-21, 24), within_precision(1e-3, 20)
    (True, False)
    """
    return float(error) <= precision_bound(dps)


def precision_net(seed: int = 0, *, heavy: bool = False) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor, str]:
    """``(net, X, y, label)``: a ReLU MLP 13-6-5-3 trained 30 epochs on wine, with its first 24
    training samples; ``heavy``: 64-6-6-10 on digits with 200 samples (the net of
    ``bench/bench_highprec.py``)."""
    from torch import nn

    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.models.training import train_mlp

    dataset, hidden, n, label = (("digits", (6, 6), 200, "digits, ReLU MLP 64-6-6-10 (502 parameters), 200 samples")
                                 if heavy else ("wine", (6, 5), 24, "wine, ReLU MLP 13-6-5-3 (137 parameters), 24 samples"))
    data = load(dataset, seed=seed)
    net = train_mlp(data, hidden, seed=seed, epochs=30).model
    assert isinstance(net, nn.Sequential), "train_mlp builds an nn.Sequential"
    return net, data.X_train[:n], data.y_train[:n], label


def precision_check(dps: int, *, c: str, seed: int = 0,
                    progress: Callable[[str], None] | None = None) -> tuple[bool, list[dict]]:
    """Invariance error of ``D`` and ``D⁺`` under a rescaling of layer 0 by ``c`` at 15 digits and at
    ``dps`` digits, on :func:`precision_net`. Returns whether ``ΔD`` at ``dps`` digits is
    :func:`within_precision`, and one row per precision (``dps``, ``D``, ``Dplus`` as floats,
    ``D_str``, ``Dplus_str`` at 3 digits)."""
    import mpmath
    import torch

    from coupled_curvature.numeric.highprec import engine

    if dps < 15:
        raise InvalidInputError(f"--precision must be at least 15 digits, got {dps}")
    net, X, y, _ = precision_net(seed)
    rows = []
    for digits in sorted({15, dps}):
        if progress is not None:
            progress(f"  mpmath at {digits} digits")
        err = engine.invariance_error(net, torch.nn.CrossEntropyLoss(), (X, y), layer=0, c=c, dps=digits)
        rows.append({"dps": digits, "D": float(err["D"]), "Dplus": float(err["Dplus"]),
                     "D_str": mpmath.nstr(err["D"], 3), "Dplus_str": mpmath.nstr(err["Dplus"], 3)})
    return within_precision(rows[-1]["D"], dps), rows


# ---------------------------------------------------------------- the report's precision section

#: the precisions of the report's section, and its (not power-of-two) layer factor
DPS = (15, 30, 50, 100)
C = "3/7"
_SCALES = (0.5, 1.0, 2.0, 4.0, 0.25, 1.0)  # layer 0 of both nets has 6 units; non-uniform, exact in float64


@dataclass(frozen=True)
class PrecisionRow:
    """One precision: max relative changes over blocks (text at 3 digits, and as floats for the plot)."""

    dps: int
    dD: str
    dDplus: str
    control_D: str
    control_Dplus: str
    values: tuple[float, float, float, float]  # dD, dDplus, control_D, control_Dplus

    @property
    def agrees(self) -> bool:
        """``ΔD ≤ 10^-(dps−4)`` (as ``ccurv check --precision``) and the control moves D by > 1e-3."""
        return within_precision(self.values[0], self.dps) and self.values[2] > 1e-3


@dataclass(frozen=True)
class PrecisionData:
    net: str
    c: str
    scales: tuple[float, ...]
    rows: tuple[PrecisionRow, ...]


def _max_change(a, b, field: str):
    import mpmath

    errs = [abs(getattr(b[x.name], field) - getattr(x, field)) / abs(getattr(x, field))
            for x in a if getattr(x, field) not in (None, 0)]
    return max(errs) if errs else mpmath.mpf(0)


@functools.lru_cache(maxsize=4)
def _sweep(seed: int, heavy: bool) -> PrecisionData:
    import mpmath
    import torch

    from coupled_curvature.numeric.highprec import engine as highprec
    from coupled_curvature.numeric.symmetries.homogeneous import neuron_rescale

    net, X, y, label = precision_net(seed, heavy=heavy)
    loss = torch.nn.CrossEntropyLoss()
    moved = neuron_rescale(net, 0, list(_SCALES))
    rows = []
    for dps in DPS:
        err = highprec.invariance_error(net, loss, (X, y), layer=0, c=C, dps=dps)
        a = highprec.diagnose(net, loss, (X, y), dps=dps)
        b = highprec.diagnose(moved, loss, (X, y), dps=dps)
        with mpmath.workdps(dps):
            vals = (err["D"], err["Dplus"], _max_change(a, b, "coupled"), _max_change(a, b, "inverse_coupled"))
            dD, dDplus, control_D, control_Dplus = vals
            rows.append(PrecisionRow(dps, mpmath.nstr(dD, 3), mpmath.nstr(dDplus, 3), mpmath.nstr(control_D, 3),
                                     mpmath.nstr(control_Dplus, 3),
                                     (float(dD), float(dDplus), float(control_D), float(control_Dplus))))
    return PrecisionData(label, C, _SCALES, tuple(rows))


def precision_sweep(seed: int = 0, heavy: bool = False, progress: Callable[[str], None] | None = None) -> PrecisionData:
    """Invariance errors at ``dps`` = 15, 30, 50, 100 (computed once per process and arguments)."""
    if progress is not None:
        progress(f"report: invariance error against precision (mpmath at dps {', '.join(map(str, DPS))})")
    return _sweep(int(seed), bool(heavy))
