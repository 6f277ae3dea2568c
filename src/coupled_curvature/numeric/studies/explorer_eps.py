"""The BatchNorm column as eps → 0: the ``bn`` cells re-measured at a sequence of eps.

BatchNorm with ``eps > 0`` is a symmetry only in the limit: ``BN(cz) = (z − μ)/√(σ² + eps/c²)``
differs from ``BN(z)`` by ``O(eps·|1/c² − 1|/σ²)``. :func:`eps_sweep` re-runs the ``bn`` column of
:func:`~coupled_curvature.numeric.studies.explorer.invariance_matrix` with every BatchNorm's eps
set to each value (same weights); :func:`judge_bn_as_eps_vanishes` does so at ``eps_run·(1e4, 1e3,
1e2)`` for the cells predicted invariant that fail at the run's eps, and judges each with
:func:`~coupled_curvature.numeric.studies.explorer_predictions.eps_limit` (fitted order ≥ 0.75 and the
run's deviation predicted out of sample), so they read "invariant as eps → 0" or stay a
disagreement.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from coupled_curvature.numeric.studies.explorer import I, Matrix, invariance_matrix
from coupled_curvature.numeric.studies.explorer_predictions import MIN_ORDER, SLACK, eps_limit
from coupled_curvature.numeric.studies.stats import loglog_slope

#: the eps of the re-runs, as multiples of the run's eps (the run itself is the last point)
FACTORS = (1e4, 1e3, 1e2)


@dataclass
class EpsSweep:
    """Deviations of chosen measures under the ``bn`` sweep with every BatchNorm's ``eps`` set to each
    value (same weights), the function gap per value and the log–log slope of deviation against eps."""

    eps: list[float]
    gaps: list[float]
    deviations: dict[str, list[float | None]]
    slopes: dict[str, float | None]


def batchnorm_eps(model: nn.Module) -> float | None:
    """The largest ``eps`` of the model's BatchNorm layers (``None`` without any).

    >>> batchnorm_eps(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2, eps=1e-7))), batchnorm_eps(nn.Linear(2, 2))
    (1e-07, None)
    """
    eps = [m.eps for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    return max(eps) if eps else None


def eps_sweep(model: nn.Module, loss_fn: Callable, data, measures: Sequence[str], eps_values: Sequence[float], *,
              layer: int, options: dict | None = None, seed: int = 0, quick: bool = False) -> EpsSweep:
    """Evidence for the BatchNorm explanation: the ``bn`` column of :func:`invariance_matrix` for
    ``measures`` with every BatchNorm's ``eps`` set to each of ``eps_values`` (the weights unchanged).

    ``BN(cz) = (z − μ)/√(σ² + eps/c²)`` differs from ``BN(z)`` by ``O(eps·|1/c² − 1|/σ²)``, so a
    deviation caused by eps falls in proportion to it (log–log slope 1) down to round-off, while one
    with another cause does not.

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, eps=1e-12), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(16, 3, dtype=torch.float64), torch.randint(0, 2, (16,))
    >>> ev = eps_sweep(net.train(), nn.CrossEntropyLoss(), (X, y), ["fisher_rao"], [1e-4, 1e-6], layer=0, quick=True)
    >>> round(ev.slopes["fisher_rao"], 1)
    1.0
    """
    devs: dict[str, list[float | None]] = {m: [] for m in measures}
    gaps = []
    for eps in eps_values:
        twin = copy.deepcopy(model)
        for mod in twin.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.eps = float(eps)
        mx = invariance_matrix({"bn": (twin, loss_fn, data, True)}, measures, ["bn"], layer=lambda _: layer,
                               options=options, seed=seed, quick=quick)
        gaps.append(max((g for _, g in mx.gaps["bn"]), default=0.0))
        for m in measures:
            devs[m].append(mx.cell(m, "bn").deviation)
    return EpsSweep(list(eps_values), gaps, devs, {m: loglog_slope(eps_values, d) for m, d in devs.items()})


def judge_bn_as_eps_vanishes(mx: Matrix, target: tuple[nn.Module, Callable, object, bool], *, layer: int,
                             options: dict | None = None, seed: int = 0, quick: bool = False,
                             factors: Sequence[float] = FACTORS) -> EpsSweep | None:
    """Judge the ``bn`` cells predicted invariant that fail at the run's eps as eps → 0.

    Re-runs them at ``eps_run·f`` for ``f`` in ``factors`` (same weights), fits ``deviation ∝ eps^p``
    there and predicts the run's deviation (:func:`eps_limit`); each such cell gets ``eps_limit``,
    its ``agrees`` from it and a note. Returns the sweep (``None`` if no cell needed it or the model
    has no BatchNorm); ``mx.eps_sweep`` is set to it.
    """
    bad = [c for c in mx.cells if c.symmetry == "bn" and c.predicted == I and not c.agrees]
    model, loss_fn, data, _ = target
    eps = batchnorm_eps(model)
    if not bad or eps is None:
        return None
    values = [eps * f for f in sorted(factors, reverse=True)]
    ev = eps_sweep(model, loss_fn, data, [c.measure for c in bad], values, layer=layer, options=options,
                   seed=seed, quick=quick)
    run_gap = max((g for _, g in mx.gaps.get("bn", [])), default=0.0)
    ev.eps.append(eps)
    ev.gaps.append(run_gap)
    for c in bad:
        ev.deviations[c.measure].append(c.deviation)
        lim = eps_limit(ev.eps, ev.deviations[c.measure], ev.gaps, tolerance=c.tolerance or 0.0)
        c.eps_limit, c.agrees = lim, lim.agrees
        order = "—" if lim.order is None else f"{lim.order:.2f}"
        pred = "—" if lim.predicted is None else f"{lim.predicted:.1e}"
        c.note = (f"judged as eps -> 0: deviation ∝ eps^{order} over eps {values[0]:.0e}…{values[-1]:.0e} "
                  f"(needs ≥ {MIN_ORDER}); at the run's eps {eps:.0e} that law predicts {pred}, measured "
                  f"{'—' if c.deviation is None else f'{c.deviation:.1e}'} (needs ≤ {SLACK:g}× the law); "
                  + ("so the change is the eps effect and vanishes with eps" if lim.agrees
                     else "so the change is not explained by eps"))
    mx.eps_sweep = ev
    return ev
