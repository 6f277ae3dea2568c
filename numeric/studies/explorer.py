"""The invariance matrix: every measure under every symmetry sweep, against the theory's prediction.

Rows are measures (:mod:`measures`), columns symmetries. A cell holds the maximum relative
deviation ``max_points max_entries |m(T_α) − m| / |m|`` over the sweep, the prediction from
:data:`PREDICTIONS` (a plain table whose reasons cite theorem ids, each checked against the
registry :mod:`coupled_curvature.theorems` at import; numeric/ never imports the proofs package)
and whether they agree: "invariant" needs deviation ≤ ``tol_invariant`` (1e-9),
"moves" needs ≥ ``tol_moves`` (1e-3), "degenerate" needs the measure to flag the block the
symmetry acts on as undefined (T10). Pseudo-inverse measures report a per-block condition number
``κ_b`` (``conditioning``); their float64 values are known only to ``ε₆₄·κ_b``, so an "invariant"
cell of such a measure is judged per block against ``max(tol_invariant, ε₆₄·κ_b)`` (κ_b the largest
over the base and every sweep point) and the tolerance used is recorded in the cell.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.core.compare import EPS64, relative_change
from coupled_curvature.numeric.measures import registry as M
from coupled_curvature.numeric.studies.stats import loglog_slope
from coupled_curvature.numeric.symmetries.reparam import (
    SymmetryResult, bn_rescale, orthogonal_mix, linear_mix, random_invertible, random_orthogonal,
    reparametrize, scale_loss,
)
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, layer_rescale, neuron_rescale, permute_neurons, weight_layers
from coupled_curvature.theorems import check_citations

SYMMETRIES = ("layer", "neuron", "perm", "bn", "orthogonal", "gl", "nonlinear", "loss")

I, MV, DG = "invariant", "moves", "degenerate"
_EW = "element-wise scaling θ_i → a_iθ_i"
_ADAPT = f"the set ‖δ/|w|‖ ≤ ρ follows {_EW}"
_MIX, _CRN, _LS, _INC = "mixing is not element-wise", "common random numbers", "L → sL scales the", "loss increase by s"
_DIAG = "the Hessian diagonal is not preserved by mixing"
_NL_SET = "the set ‖δ/|w|‖ ≤ ρ is not mapped to itself by a nonlinear φ"
# Non-conformal block maps w -> Aw: gᵀH⁺g is invariant iff g ∈ range(H) (or H invertible). For
# Gauss–Newton-exact Linear/Conv blocks H = BᵀB, g = Bᵀs, so it is, and the measure's factor route
# computes ‖P_range(B) s‖² (range(BA⁻¹) = range(B)) instead of cutting H's spectrum at a relative
# τ, which is covariant only under conformal A (genuine eigenvalues near τ cross it).
_NEWTON_RANGE = ("T11: g = Bᵀs ∈ range(H_bb = BᵀB), so gᵀH⁺g = ‖P_range(B) s‖² and range(BA⁻¹) = range(B) "
                 "(factor route; the pseudo-inverse route with a relative cutoff is not covariant here)")
# (prediction, reason) per measure and symmetry; symmetries act on the last hidden layer.
PREDICTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "top_eig": {"layer": (MV, "T3: blocks scale by c^∓2"), "neuron": (MV, "T1: H -> A⁻ᵀHA⁻¹, A non-orthogonal"),
                "perm": (I, "T1: orthogonal T keeps the spectrum"), "bn": (MV, "T1: block scales by c⁻²"),
                "orthogonal": (I, "T1: orthogonal T keeps the spectrum"), "gl": (MV, "T1, A non-orthogonal"),
                "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ"), "loss": (MV, "T12: H -> sH")},
    "trace": {"layer": (MV, "T3"), "neuron": (MV, "T1"), "perm": (I, "T1: orthogonal T"), "bn": (MV, "T1"),
              "orthogonal": (I, "T1: orthogonal T"), "gl": (MV, "T1"), "nonlinear": (MV, "T6"), "loss": (MV, "T12")},
    "sam": {"layer": (MV, "fixed ℓ2 radius while T3 rescales the blocks by c and c⁻ᵏ"),
            "neuron": (MV, "fixed ℓ2 radius: the ball does not follow w → Aw"),
            "perm": (I, "ball and ascent from 0 are orthogonally equivariant"),
            "bn": (MV, "fixed ℓ2 radius: the ball does not follow w → cw"),
            "orthogonal": (I, "ball and ascent from 0 are orthogonally equivariant"),
            "gl": (MV, "fixed ℓ2 radius: A non-orthogonal does not map the ball to itself"),
            "nonlinear": (MV, "T6: a fixed ℓ2 ball in φ is not a fixed ℓ2 ball in θ"),
            "loss": (MV, f"{_LS} worst-case {_INC}")},
    "adaptive_worst": {"layer": (I, _ADAPT), "neuron": (I, _ADAPT), "perm": (I, "ascent from 0 is permutation-equivariant"),
                       "bn": (I, _ADAPT), "orthogonal": (MV, _MIX), "gl": (MV, _MIX), "nonlinear": (MV, _NL_SET),
                       "loss": (MV, f"{_LS} worst-case {_INC}")},
    "adaptive_avg": {"layer": (I, f"{_CRN}: {_ADAPT}"), "neuron": (I, f"{_CRN}: {_ADAPT}"),
                     "perm": (MV, f"{_CRN} are tied to coordinate indices: invariant only in distribution"),
                     "bn": (I, f"{_CRN}: {_ADAPT}"), "orthogonal": (MV, _MIX), "gl": (MV, _MIX), "nonlinear": (MV, _NL_SET),
                     "loss": (MV, f"{_LS} average {_INC}")},
    "norm_flat": {"layer": (I, f"{_EW}, H_ii → H_ii/a_i²"), "neuron": (I, _EW), "perm": (I, "re-indexing of Σ_i"),
                  "bn": (I, _EW), "orthogonal": (MV, _DIAG), "gl": (MV, _DIAG),
                  "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ, and |φ_i| is not proportional to |θ_i|"),
                  "loss": (MV, "2Σ_i |w_i|√H_ii scales by √s")},
    "rel_flat": {"layer": (I, "uniform column scaling of the last layer"), "neuron": (MV, "non-uniform column scaling"),
                 "perm": (I, "column permutation"), "bn": (I, "last layer untouched"),
                 "orthogonal": (I, "orthogonal column mixing"), "gl": (MV, "non-orthogonal column mixing"),
                 "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ is not a congruence of H"), "loss": (MV, "κ scales by s")},
    "fisher_rao": {"layer": (I, "T1: θᵀ∇ℓ_n under linear symmetries"), "neuron": (I, "T1"), "perm": (I, "T1"), "bn": (I, "T1"),
                   "orthogonal": (I, "T1"), "gl": (I, "T1"), "nonlinear": (MV, "T6: φᵀ(h'⊙∇ℓ) ≠ θᵀ∇ℓ"), "loss": (MV, "T12: s²")},
    "laplace_logdet": {"layer": (MV, "T3/T8: det(c⁻²H+δI)"), "neuron": (MV, "T1"), "perm": (I, "T1: orthogonal per block"),
                       "bn": (MV, "T8"), "orthogonal": (I, "T1: orthogonal per block"), "gl": (MV, "T1"),
                       "nonlinear": (MV, "T6"), "loss": (MV, "T8/T12")},
    "lambda": {s: (I, "depends on the function only") for s in SYMMETRIES[:-1]}
    | {"loss": (I, "log|s d_n| = log s + log|d_n|: slope unchanged")},
    "D": {"layer": (I, "T3"), "neuron": (MV, "T5: non-uniform scaling is not conformal"), "perm": (I, "T5: orthogonal"),
          "bn": (DG, "T10: scale-invariant block, wᵀg = 0, D ≡ 0"), "orthogonal": (I, "T4: CO(n)"),
          "gl": (MV, "T4: A ∉ CO(n)"), "nonlinear": (MV, "T6"), "loss": (MV, "T12: D/s")},
    "Dplus": {"layer": (I, "T3/T7"), "neuron": (MV, "T7"), "perm": (I, "T7"), "bn": (I, "T7: conformal cI"),
              "orthogonal": (I, "T7"), "gl": (MV, "T7"), "nonlinear": (MV, "T6"), "loss": (MV, "T12: sD⁺")},
    "D*Dplus": {"layer": (I, "T3/T7"), "neuron": (MV, "T5/T7"), "perm": (I, "T7"), "bn": (DG, "T10: D ≡ 0"),
                "orthogonal": (I, "T4/T7"), "gl": (MV, "T4/T7"), "nonlinear": (MV, "T6"), "loss": (I, "T12: D·D⁺ invariant")},
    "rho": {"layer": (I, "T11"), "neuron": (I, "T11: block-diagonal linear"), "perm": (I, "T11"),
            "bn": (DG, "T10/T11: wᵀg = 0, ρ undefined"), "orthogonal": (I, "T11"), "gl": (I, "T11: block-diagonal linear"),
            "nonlinear": (MV, "T6"), "loss": (MV, "T12: ρ/s")},
    "newton": {"layer": (I, "T11"), "neuron": (I, _NEWTON_RANGE), "perm": (I, "T11"),
               "bn": (DG, "T10/T11: scale-invariant block, Hw = −g so gᵀH⁺g = wᵀHw = −wᵀg = 0"),
               "orthogonal": (I, "T11"), "gl": (I, _NEWTON_RANGE), "nonlinear": (MV, "T6"), "loss": (MV, "T12: s·gᵀH⁺g")},
}

#: a prediction may cite only registered theorems (checked at import)
check_citations(reason for row in PREDICTIONS.values() for _, reason in row.values())


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

    def to_dict(self) -> dict:
        return {"measure": self.measure, "symmetry": self.symmetry, "deviation": self.deviation,
                "predicted": self.predicted, "agrees": self.agrees, "reason": self.reason, "note": self.note,
                "tolerance": self.tolerance, "tolerance_reason": self.tolerance_reason}


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


def _conditioning(result: dict) -> dict[str, float]:
    return {k.replace(".parametrizations.", ".").removesuffix(".original"): v
            for k, v in result.get("conditioning", {}).items()}


def block_tolerances(results: Sequence[dict], tol_invariant: float) -> dict[str, float] | None:
    """Per block ``max(tol_invariant, ε₆₄·κ_b)``, ``κ_b`` the largest over ``results``; ``None`` for
    measures that report no conditioning."""
    if not any("conditioning" in r for r in results):
        return None
    kappa: dict[str, float] = {}
    for r in results:
        for k, v in _conditioning(r).items():
            kappa[k] = max(kappa.get(k, 0.0), v)
    return {k: max(tol_invariant, EPS64 * v) for k, v in kappa.items()}


def judge(predicted: str, deviation: float | None, degenerate: bool, *, tol_invariant: float = 1e-9,
          tol_moves: float = 1e-3) -> bool:
    """Agreement of one cell with its prediction."""
    if predicted == DG:
        return degenerate
    if deviation is None:
        return False
    return deviation <= tol_invariant if predicted == I else deviation >= tol_moves


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

    Scale parameters are powers of two (exact in floating point); neuron-wise scales are
    ``2^{m_i}``, integers ``m_i ∈ [−t, t]``; mixing uses ``exp(tS)`` (orthogonal) or ``exp(tG/√n)``.
    """
    gen = torch.Generator().manual_seed(seed)
    pts: list[SweepPoint] = []
    if symmetry == "layer":
        for c in ((2.0**-4, 2.0**4) if quick else (2.0**-4, 2.0**-2, 2.0**2, 2.0**4)):
            m = layer_rescale(model, layer, c)
            pts.append(SweepPoint(c, f"c={c:g}", SymmetryResult(m, None, function_gap(model, m, X), f"layer_rescale(c={c:g})")))
    elif symmetry == "neuron":
        units = weight_layers(model)[layer].weight.shape[0]
        u = torch.rand(units, generator=gen, dtype=torch.float64) * 2 - 1
        for t in ((2,) if quick else (1, 3)):
            a = 2.0 ** torch.round(t * u)
            m = neuron_rescale(model, layer, a)
            pts.append(SweepPoint(2.0**t, f"max ratio 2^{2 * t}", SymmetryResult(m, None, function_gap(model, m, X), f"neuron_rescale(2^m, |m|≤{t})")))
    elif symmetry == "perm":
        units = weight_layers(model)[layer].weight.shape[0]
        for k in range(1 if quick else 2):
            p = torch.randperm(units, generator=gen)
            m = permute_neurons(model, layer, p)
            pts.append(SweepPoint(float(k + 1), f"draw {k + 1}", SymmetryResult(m, None, function_gap(model, m, X), "permute_neurons")))
    elif symmetry == "bn":
        for c in ((2.0**4,) if quick else (2.0**-4, 2.0**4)):
            pts.append(SweepPoint(c, f"c={c:g}", bn_rescale(model, layer, c, X)))
    elif symmetry in ("orthogonal", "gl"):
        n = weight_layers(model)[layer].weight.shape[0]
        s = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        for t in ((1.0,) if quick else (0.5, 2.0)):
            if symmetry == "orthogonal":
                pts.append(SweepPoint(t, f"t={t:g}", orthogonal_mix(model, layer, random_orthogonal(n, t, s), X)))
            else:
                pts.append(SweepPoint(t, f"t={t:g}", linear_mix(model, layer, random_invertible(n, t, s), X)))
    elif symmetry == "nonlinear":
        # θ = s·sinh(φ) with s = 1 is nearly the identity map on weights of size ~0.1 (sinh φ ≈ φ);
        # s = 0.05 makes the Jacobian cosh(φ) far from 1, so the sweep tests a genuinely nonlinear map.
        kinds = (("sinh", 0.05),) if quick else (("sinh", 0.05), ("cube", 1.0))
        for k, (kind, scale) in enumerate(kinds):
            pts.append(SweepPoint(float(k + 1), f"{scale:g}·{kind}", reparametrize(model, kind, X, scale=scale)))
    elif symmetry == "loss":
        for s in ((2.0**4,) if quick else (2.0**-4, 2.0**4)):
            pts.append(SweepPoint(s, f"s={s:g}", scale_loss(model, loss_fn, s, X)))
    else:
        raise InvalidInputError(f"unknown symmetry {symmetry!r}; available: {', '.join(SYMMETRIES)}")
    return pts


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
    cells, values, gaps = [], {}, {}
    for sym in symmetries:
        tkey = sym if sym in targets else "*"
        model, loss_fn, data, allow = targets[tkey]
        opts = (target_options or {}).get(tkey, options)
        X = data[0]
        key = id(model)
        if key not in baselines:
            say(f"baseline measures on {'the BatchNorm twin' if sym == 'bn' else 'the model'}")
            baselines[key] = evaluate_all(model, loss_fn, data, measures, opts, allow, timings)
        base = baselines[key]
        points = sweep(sym, model, loss_fn, X, layer=layer(model), seed=seed, quick=quick)
        gaps[sym] = [(p.label, p.result.function_gap) for p in points]
        results = []
        for p in points:
            say(f"  {sym}: {p.label} (function gap {p.result.function_gap:.2e})")
            lf = p.result.loss_fn or loss_fn
            results.append(evaluate_all(p.result.model, lf, data, measures, opts, allow, timings))
        values[sym] = {m: [(1.0, summary(base[m]))] + [(p.x, summary(r[m])) for p, r in zip(points, results)]
                       for m in measures}
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
            cells.append(Cell(m, sym, dev, predicted, reason, ok, note.strip(), tol, tol_reason))
    return Matrix(list(measures), list(symmetries), cells, values, gaps, time.perf_counter() - start, timings)


@dataclass
class EpsSweep:
    """Deviations of chosen measures under the ``bn`` sweep with every BatchNorm's ``eps`` set to each
    value (same weights), the function gap per value and the log–log slope of deviation against eps."""

    eps: list[float]
    gaps: list[float]
    deviations: dict[str, list[float | None]]
    slopes: dict[str, float | None]


def batchnorm_eps(model: nn.Module) -> float | None:
    """The largest ``eps`` of the model's BatchNorm layers (``None`` without any)."""
    eps = [m.eps for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    return max(eps) if eps else None


def eps_sweep(model: nn.Module, loss_fn: Callable, data, measures: Sequence[str], eps_values: Sequence[float], *,
              layer: int, options: dict | None = None, seed: int = 0, quick: bool = False) -> EpsSweep:
    """Evidence for the BatchNorm explanation: the ``bn`` column of :func:`invariance_matrix` for
    ``measures`` with every BatchNorm's ``eps`` set to each of ``eps_values`` (the weights unchanged).

    ``BN(cz) = (z − μ)/√(σ² + eps/c²)`` differs from ``BN(z)`` by ``O(eps·|1/c² − 1|/σ²)``, so a
    deviation caused by eps falls in proportion to it (log–log slope 1) down to round-off, while one
    with another cause does not.

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
