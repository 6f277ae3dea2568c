"""The invariance matrix: every measure under every symmetry sweep, against the theory's prediction.

Rows are measures (:mod:`measures`), columns symmetries. A cell holds the maximum relative
deviation ``max_points max_entries |m(T_α) − m| / |m|`` over the sweep, the prediction from
:data:`PREDICTIONS` (in :mod:`coupled_curvature.numeric.studies.explorer_predictions`, its reasons
citing theorem ids) and whether they agree: "invariant" needs deviation ≤ ``tol_invariant`` (1e-9),
"moves" needs ≥ ``tol_moves`` (1e-3), "degenerate" needs the measure to flag the block the
symmetry acts on as undefined (T10). Pseudo-inverse measures report a per-block condition number
``κ_b`` (``conditioning``); their float64 values are known only to ``ε₆₄·κ_b``, so an "invariant"
cell of such a measure is judged per block against ``max(tol_invariant, ε₆₄·κ_b)`` (κ_b the largest
over the base and every sweep point) and the tolerance used is recorded in the cell. Each cell also
keeps its deviation at every sweep point against the symmetry's own parameter (:data:`PARAMETERS`)
and a witness: the map, sweep point and block of its largest deviation. BatchNorm cells that fail
at the run's eps are judged as eps → 0 by :mod:`coupled_curvature.numeric.studies.explorer_eps`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import is_pair
from coupled_curvature.numeric.linalg.tolerance import EPS64, relative_change
from coupled_curvature.numeric.measures import registry as M
from coupled_curvature.numeric.studies.explorer_predictions import (  # noqa: F401  (re-exported)
    DG, I, MV, PREDICTIONS, SYMMETRIES, EpsLimit, judge,
)
from coupled_curvature.numeric.symmetries.reparam import (
    SymmetryResult, bn_rescale, orthogonal_mix, linear_mix, random_invertible, random_orthogonal,
    reparametrize, scale_loss,
)
from coupled_curvature.numeric.symmetries.homogeneous import (
    function_gap, layer_rescale, layer_weight, neuron_rescale, permute_neurons, weight_layers,
)

if TYPE_CHECKING:
    from coupled_curvature.numeric.studies.explorer_eps import EpsSweep

#: the quantity on each sweep's x axis (the symmetry's own parameter)
PARAMETERS = {
    "layer": "layer scale c (W_l → cW_l, W_(l+1) → W_(l+1)/c)",
    "neuron": "neuron-scale bound b (a_i = 2^m_i, integer |m_i| ≤ log₂ b)",
    "perm": "swapped unit pairs k (‖P − I‖_F = 2√k)",
    "bn": "scale c of the weights before BatchNorm (W_l → cW_l)",
    "orthogonal": "rotation size t (Q = exp(tS), S skew-symmetric)",
    "gl": "mixing strength t (M = exp(tG/√n))",
    "nonlinear": "scale s of θ = s·sinh(φ) (nearly linear for s ≫ |θ|)",
    "loss": "loss scale s (L → sL)",
}


@dataclass
class SweepPoint:
    x: float
    label: str
    result: SymmetryResult


@dataclass
class Cell:
    measure: str
    symmetry: str
    deviation: float | None
    predicted: str
    reason: str
    agrees: bool
    note: str = ""
    tolerance: float | None = None
    tolerance_reason: str = ""
    points: list[tuple[float, float | None]] = field(default_factory=list)  # (x, max deviation) per point
    witness: str = ""  # the sweep point and block of the largest deviation, re-runnable
    eps_limit: EpsLimit | None = None  # set when the cell is judged as BatchNorm eps -> 0

    def to_dict(self) -> dict:
        return {"measure": self.measure, "symmetry": self.symmetry, "deviation": self.deviation,
                "predicted": self.predicted, "agrees": self.agrees, "reason": self.reason, "note": self.note,
                "tolerance": self.tolerance, "tolerance_reason": self.tolerance_reason,
                "points": [list(p) for p in self.points], "witness": self.witness,
                "eps_limit": None if self.eps_limit is None else self.eps_limit.to_dict()}


@dataclass
class Matrix:
    """Cells, the measured values per sweep point (for the figures) and timings."""

    measures: list[str]
    symmetries: list[str]
    cells: list[Cell]
    values: dict[str, dict[str, list[tuple[float, float | None]]]]  # symmetry -> measure -> (x, summary)
    gaps: dict[str, list[tuple[str, float]]]
    seconds: float
    measure_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    eps_sweep: EpsSweep | None = None
    parameters: dict[str, str] = field(default_factory=dict)  # symmetry -> x-axis quantity
    sharpness_twin: Any = None  # studies.sharpness_twin.TwinCurves of the net and its layer-rescaled twin

    def cell(self, measure: str, symmetry: str) -> Cell:
        return next(c for c in self.cells if c.measure == measure and c.symmetry == symmetry)

    @property
    def disagreements(self) -> list[Cell]:
        return [c for c in self.cells if not c.agrees]


def entries(result: dict) -> dict[str, float | None]:
    """Comparable numbers of a measure result: its per-block values, or ``{"value": v}``."""
    if "blocks" in result:  # parametrized tensors compare with their plain names
        return {k.replace(".parametrizations.", ".").removesuffix(".original"): v for k, v in result["blocks"].items()}
    return {"value": result["value"]}


def summary(result: dict) -> float | None:
    """One number per result for plots: the value, or the mean |entry| over defined blocks."""
    if "blocks" not in result:
        return result["value"]
    vals = [abs(v) for v in result["blocks"].values() if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def block_deviations(base: dict, new: dict) -> dict[str, float]:
    """``|new_k − base_k| / |base_k|`` per entry defined in both."""
    a, b = entries(base), entries(new)
    devs = {}
    for k, v in a.items():
        w = b.get(k)
        if v is None or w is None or not (math.isfinite(v) and math.isfinite(w)):
            continue
        devs[k] = relative_change(v, w)
    return devs


def relative_deviation(base: dict, new: dict) -> float | None:
    """``max_k |new_k − base_k| / |base_k|`` over entries defined in both (``None`` if none are)."""
    devs = block_deviations(base, new)
    return max(devs.values()) if devs else None

#: the symmetry parameter at which each map is the identity (None: the family does not contain it)
IDENTITY: dict[str, float | None] = {"layer": 1.0, "neuron": 1.0, "perm": 0.0, "bn": 1.0, "orthogonal": 0.0,
                                     "gl": 0.0, "nonlinear": None, "loss": 1.0}


def largest_conditioning(results: Sequence[dict]) -> dict[str, float] | None:
    """Per block the largest condition number ``κ_b`` that ``results`` report (block names as :func:`entries`
    gives them); ``None`` for measures that report no conditioning.

    >>> largest_conditioning([{"conditioning": {"a": 2.0}}, {"conditioning": {"a": 5.0, "b": 1.0}}, {}])
    {'a': 5.0, 'b': 1.0}
    >>> largest_conditioning([{"value": 1.0}]) is None
    True
    """
    if not any("conditioning" in r for r in results):
        return None
    kappa: dict[str, float] = {}
    for r in results:
        for k, v in r.get("conditioning", {}).items():
            k = k.replace(".parametrizations.", ".").removesuffix(".original")
            kappa[k] = max(kappa.get(k, 0.0), v)
    return kappa


def measure_sweep(symmetry: str, points: Sequence[SweepPoint], measure: Callable[[SweepPoint], dict[str, dict]],
                  say: Callable[[str], None]) -> tuple[list[tuple[str, float]], list[dict[str, dict]]]:
    """The function gap and the measures (``measure(point)``) at every point of ``symmetry``'s sweep, each point
    announced through ``say``."""
    results = []
    for p in points:
        say(f"  {symmetry}: {p.label} (function gap {p.result.function_gap:.2e})")
        results.append(measure(p))
    return [(p.label, p.result.function_gap) for p in points], results


def sweep_values(base: dict[str, dict], results: Sequence[dict[str, dict]], points: Sequence[SweepPoint],
                 measures: Sequence[str], identity: float | None) -> dict[str, list[tuple[float, float | None]]]:
    """Each measure's :func:`summary` along a sweep, for the figures: at the ``identity`` parameter (the base
    model's; left out when the family does not hold the identity) and at every point."""
    return {m: ([] if identity is None else [(identity, summary(base[m]))])
            + [(p.x, summary(r[m])) for p, r in zip(points, results)] for m in measures}


def block_tolerances(results: Sequence[dict], tol_invariant: float) -> dict[str, float] | None:
    """Per block ``max(tol_invariant, ε₆₄·κ_b)``, ``κ_b`` the largest over ``results``; ``None`` for
    measures that report no conditioning."""
    kappa = largest_conditioning(results)
    return None if kappa is None else {k: max(tol_invariant, EPS64 * v) for k, v in kappa.items()}


def evaluate_all(model: nn.Module, loss_fn: Callable, data, measures: Sequence[str], options: dict,
                 allow_train_mode: bool, timings: dict[str, float]) -> dict[str, dict]:
    """Every measure on one model, sharing one cache."""
    cache: dict = {}
    out = {}
    for name in measures:
        start = time.perf_counter()
        out[name] = M.REGISTRY[name].func(model, loss_fn, data, cache=cache, allow_train_mode=allow_train_mode,
                                          **options.get(name, {}))
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
    return out


def sweep(symmetry: str, model: nn.Module, loss_fn: Callable, X: torch.Tensor, *, layer: int, seed: int = 0,
          quick: bool = False) -> list[SweepPoint]:
    """The default sweep of one symmetry acting on weight layer ``layer`` (and ``layer + 1``).

    Each point's ``x`` is the symmetry's own parameter (:data:`PARAMETERS`). Scale parameters are
    powers of two (exact in floating point); neuron-wise scales are ``2^{m_i}``, integers
    ``m_i ∈ [−t, t]``; a permutation swaps ``k`` disjoint pairs of units (``‖P − I‖_F = 2√k``);
    mixing uses ``exp(tS)`` (orthogonal) or ``exp(tG/√n)``; the nonlinear map is ``θ = s·sinh(φ)``.
    """
    gen = torch.Generator().manual_seed(seed)
    pts: list[SweepPoint] = []
    at = f"layer={layer}, generator seed {seed}"
    if symmetry == "layer":
        for c in ((2.0**-4, 2.0**4) if quick else (2.0**-4, 2.0**-2, 2.0**2, 2.0**4)):
            m = layer_rescale(model, layer, c)
            pts.append(SweepPoint(c, f"c={c:g}", SymmetryResult(m, None, function_gap(model, m, X),
                                                                f"layer_rescale(layer={layer}, c={c:g})")))
    elif symmetry == "neuron":
        u = torch.rand(_units(model, layer), generator=gen, dtype=torch.float64) * 2 - 1
        for bound in ((2,) if quick else (1, 3)):
            a = 2.0 ** torch.round(bound * u)
            m = neuron_rescale(model, layer, a)
            pts.append(SweepPoint(2.0**bound, f"b=2^{bound}", SymmetryResult(
                m, None, function_gap(model, m, X), f"neuron_rescale(a_i = 2^round({bound}·U_i), U ~ U(−1, 1); {at})")))
    elif symmetry == "perm":
        units = _units(model, layer)
        for k in ((max(1, units // 2),) if quick else (1, max(1, units // 2))):
            pick = torch.randperm(units, generator=gen)[: 2 * k]
            p = torch.arange(units)
            p[pick[0::2]], p[pick[1::2]] = pick[1::2], pick[0::2]
            m = permute_neurons(model, layer, p)
            pts.append(SweepPoint(float(k), f"k={k}", SymmetryResult(
                m, None, function_gap(model, m, X), f"permute_neurons({k} random disjoint swaps; {at})")))
    elif symmetry == "bn":
        for c in ((2.0**4,) if quick else (2.0**-4, 2.0**4)):
            pts.append(SweepPoint(c, f"c={c:g}", bn_rescale(model, layer, c, X)))
    elif symmetry in ("orthogonal", "gl"):
        n = _units(model, layer)
        mix_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        for t in ((1.0,) if quick else (0.5, 2.0)):
            if symmetry == "orthogonal":
                pts.append(SweepPoint(t, f"t={t:g}", orthogonal_mix(model, layer, random_orthogonal(n, t, mix_seed), X)))
            else:
                pts.append(SweepPoint(t, f"t={t:g}", linear_mix(model, layer, random_invertible(n, t, mix_seed), X)))
    elif symmetry == "nonlinear":
        # θ = s·sinh(φ) is nearly linear (θ ≈ sφ, conformal) where s ≫ |θ|: s = 1 on weights of size
        # ~0.1 is close to the linear limit; s = 0.05 makes the Jacobian cosh(φ) far from constant.
        for scale in ((0.05,) if quick else (0.05, 1.0)):
            pts.append(SweepPoint(scale, f"s={scale:g}", reparametrize(model, "sinh", X, scale=scale)))
    elif symmetry == "loss":
        for s in ((2.0**4,) if quick else (2.0**-4, 2.0**4)):
            pts.append(SweepPoint(s, f"s={s:g}", scale_loss(model, loss_fn, s, X)))
    else:
        raise InvalidInputError(f"unknown symmetry {symmetry!r}; available: {', '.join(SYMMETRIES)}")
    return pts


def _units(model: nn.Module, layer: int) -> int:
    """The output units of weight layer ``layer``."""
    return int(layer_weight(weight_layers(model)[layer]).shape[0])


def invariance_matrix(
    targets: dict[str, tuple[nn.Module, Callable, object, bool]],
    measures: Sequence[str],
    symmetries: Sequence[str],
    *,
    layer: Callable[[nn.Module], int] | None = None,
    options: dict | None = None,
    seed: int = 0,
    quick: bool = False,
    tol_invariant: float = 1e-9,
    tol_moves: float = 1e-3,
    progress: Callable[[str], None] | None = None,
    target_options: dict[str, dict] | None = None,
) -> Matrix:
    """Run the sweeps and fill the matrix.

    ``targets`` maps each symmetry (or ``"*"`` for the default) to ``(model, loss_fn, data,
    allow_train_mode)`` — e.g. the ``bn`` column runs on a BatchNorm twin; ``target_options`` (same
    keys) replaces ``options`` for that target. Symmetries act on weight layer ``layer(model)``
    (default: the last hidden layer).
    """
    say = progress or (lambda s: None)
    options = options or {}
    layer = layer or (lambda m: len(weight_layers(m)) - 2)
    measures = M.select(list(measures))
    start = time.perf_counter()
    timings: dict[str, float] = {}
    baselines: dict[int, dict] = {}
    cells: list[Cell] = []
    values: dict[str, dict[str, list[tuple[float, float | None]]]] = {}
    gaps: dict[str, list[tuple[str, float]]] = {}
    for sym in symmetries:
        tkey = sym if sym in targets else "*"
        model, loss_fn, data, allow = targets[tkey]
        opts = (target_options or {}).get(tkey, options)
        if not is_pair(data):
            raise InvalidInputError(f"the explorer sweeps the inputs X of an (X, y) pair; the data for {tkey!r} is "
                                    f"{type(data).__name__}: pass (X, y)")
        X = data[0]
        key = id(model)
        if key not in baselines:
            say(f"baseline measures on {'the BatchNorm twin' if sym == 'bn' else 'the model'}")
            baselines[key] = evaluate_all(model, loss_fn, data, measures, opts, allow, timings)
        base = baselines[key]
        points = sweep(sym, model, loss_fn, X, layer=layer(model), seed=seed, quick=quick)
        gaps[sym], results = measure_sweep(sym, points, lambda p: evaluate_all(
            p.result.model, p.result.loss_fn or loss_fn, data, measures, opts, allow, timings), say)
        values[sym] = sweep_values(base, results, points, measures, IDENTITY[sym])
        for m in measures:
            per = [block_deviations(base[m], r[m]) for r in results]
            known = [d for p in per for d in p.values()]
            dev = max(known) if known else None
            degenerate = bool(base[m].get("degenerate")) and all(bool(r[m].get("degenerate")) for r in results)
            predicted, reason = PREDICTIONS[m][sym]
            ok = judge(predicted, dev, degenerate, tol_invariant=tol_invariant, tol_moves=tol_moves)
            tol, tol_reason = (tol_invariant, "fixed") if predicted == I else (None, "")
            btol = block_tolerances([base[m]] + [r[m] for r in results], tol_invariant)
            if predicted == I and btol is not None and dev is not None:
                ok = all(d <= btol.get(k, tol_invariant) for p in per for k, d in p.items())
                tol = max(btol.values(), default=tol_invariant)
                tol_reason = ("conditioning: per block max(1e-9, ε₆₄·κ_b), κ_b the block's reported condition "
                              "number (max|λ|/min kept |λ| on the pseudo-inverse route, κ_LS on the Newton factor "
                              f"route; largest over blocks and sweep {max(btol.values(), default=0.0) / EPS64:.2g})")
            elif predicted == MV:
                tol, tol_reason = tol_moves, "moves: deviation ≥ tol"
            note = ""
            if degenerate:
                note = "degenerate blocks: " + ", ".join(base[m]["degenerate"])
            if sym == "bn" and not ok:
                note += " BatchNorm eps > 0 makes the scale symmetry inexact (exact only as eps -> 0)"
            pinv = sorted({b for r in [base[m]] + [r[m] for r in results]
                           for b, route in r.get("routes", {}).items() if route == "pinv"})
            if not ok and base[m].get("notes"):
                note += " measure notes: " + "; ".join(base[m]["notes"][:3])
            if pinv and not ok:
                note += (" blocks on the pseudo-inverse route (relative cutoff, covariant only under conformal "
                         "maps): " + ", ".join(pinv))
            curve = [(p.x, max(d.values()) if d else None) for p, d in zip(points, per)]
            cells.append(Cell(m, sym, dev, predicted, reason, ok, note.strip(), tol, tol_reason, curve,
                              witness(points, per, base[m], degenerate, seed)))
    return Matrix(list(measures), list(symmetries), cells, values, gaps, time.perf_counter() - start, timings,
                  parameters={s: PARAMETERS[s] for s in symmetries})


def witness(points: Sequence[SweepPoint], per: Sequence[dict[str, float]], base: dict, degenerate: bool,
            seed: int) -> str:
    """The map, sweep point and block of the largest deviation (``per``: per sweep point, the deviation of each
    block), with what re-creates it; ``degenerate``: the blocks ``base`` flags undefined stand instead.

    >>> from types import SimpleNamespace as NS
    >>> pt = SweepPoint(2.0, "c=2", NS(description="layer rescaling", function_gap=1e-16))
    >>> witness([pt], [{"0.weight": 3e-15, "0.bias": 1e-15}], {}, False, 7)
    'layer rescaling at c=2 (function gap 1.0e-16): block 0.weight changes by 3.00e-15 (relative); seed 7'
    """
    if degenerate:
        return "blocks the measure flags undefined at the base and every sweep point: " + ", ".join(base["degenerate"])
    best = max(((d, i, k) for i, p in enumerate(per) for k, d in p.items()), default=None)
    if best is None:
        return "no block is defined both at the base and at a sweep point"
    d, i, k = best
    pt = points[i]
    return (f"{pt.result.description} at {pt.label} (function gap {pt.result.function_gap:.1e}): block {k} "
            f"changes by {d:.2e} (relative); seed {seed}")
