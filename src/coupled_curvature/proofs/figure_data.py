"""Measurements behind the report's figures, on the trained nets of a cross-check :class:`~.crosschecks.Lab`
(evidence, never proof): the rescaling sweep of T3's figure and the neuron-scaling changes of T5's.

>>> lab = Lab(seed=0, heavy=False)                  # doctest: +SKIP
>>> rescaling_sweep(lab)["D"]                       # doctest: +SKIP
[...]
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.numeric.linalg.tolerance import relative_change
from coupled_curvature.numeric.core.threads import torch_threads as threads
from coupled_curvature.proofs.crosschecks import Lab

__all__ = ["rescaling_sweep", "neuron_scaling_changes"]


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else value


def rescaling_sweep(lab: Lab, key: str = "bc-16x2", layer: int = 0, exponents=range(-8, 9, 4)) -> dict[str, Any]:
    """``D``, ``D⁺``, RQ and ``‖g‖²`` of block ``{2·layer}.weight`` under ``layer_rescale(c = 2^k)``.

    Powers of two make the rescaled weights exact, so ``D`` and ``D⁺`` are flat to rounding while
    RQ and ‖g‖² move as ``c⁻²`` (T3).
    """
    with threads(1):
        return _sweep(lab, key, layer, exponents)


def _sweep(lab: Lab, key: str, layer: int, exponents) -> dict[str, Any]:
    from coupled_curvature.numeric.core.diagnostics import diagnose
    from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale

    trained, ds = lab.net(key)
    block = f"{2 * layer}.weight"
    out: dict[str, Any] = {"net": key, "block": block, "c": [], "D": [], "Dplus": [], "RQ": [], "g_sq": []}
    for k in exponents:
        c = 2.0**k
        b = diagnose(layer_rescale(trained.model, layer, c), lab.loss, ds.train)[block]
        for name, v in (("c", c), ("D", b.coupled), ("Dplus", b.inverse_coupled), ("RQ", b.rayleigh), ("g_sq", b.g_sq)):
            assert v is not None, f"{name} is undefined on {key}'s block {block}"
            out[name].append(float(v))
    return out


def neuron_scaling_changes(lab: Lab, key: str = "bc-16x2", draws: int = 12) -> dict[str, list[float]]:
    """Relative change of ``D`` per block over ``draws`` random non-uniform scalings of layer 0."""
    out: dict[str, list[float]] = {}
    with threads(1):
        runs = lab.neuron(key, draws)
    for _, b, a in runs:
        for blk in b:
            out.setdefault(blk.name, []).append(_nan_if_none(relative_change(blk.coupled, a[blk.name].coupled)))
    return out
