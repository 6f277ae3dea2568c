"""The invariance matrix of a tiny transformer: every measure against attention's symmetries (T13).

The maps act on the last attention module of a :class:`~coupled_curvature.numeric.models.tiny_transformers.TinyTransformer`
(``qk_transform``, ``vo_transform``, ``permute_heads``) and on the bias-free Linear before its head's LayerNorm
(``norm_rescale``); the columns, their parameters and the predictions are in
:mod:`~coupled_curvature.numeric.studies.explorer_attention_predictions`. Each cell is the largest relative
change ``|m(T_x) − m|/|m|`` over the sweep and the entries of the measure (its blocks), judged as the
explorer judges (:func:`~coupled_curvature.numeric.studies.explorer_predictions.judge`, per-block
conditioning tolerances for pseudo-inverse measures), with a witness: the map, its sweep point and the block
of the largest change. Every measure runs under :func:`~coupled_curvature.numeric.core.hvp.math_attention`
(the fused attention kernels have no second derivative).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.tolerance import EPS64
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.hvp import math_attention
from coupled_curvature.numeric.measures import registry as M
from coupled_curvature.numeric.studies.explorer import (Cell, Matrix, SweepPoint, block_deviations,
                                                       largest_conditioning, measure_sweep, sweep_values, witness)
from coupled_curvature.numeric.studies.explorer_attention_predictions import (
    ATTENTION_IDENTITY, ATTENTION_PARAMETERS, ATTENTION_PREDICTIONS, ATTENTION_SYMMETRIES, DG, EXTRA_MEASURES, I, MV,
)
from coupled_curvature.numeric.studies.explorer_predictions import judge
from coupled_curvature.numeric.symmetries.attention import norm_rescale, permute_heads, qk_transform, vo_transform
from coupled_curvature.numeric.symmetries.attention_kinds import attention_layout
from coupled_curvature.numeric.symmetries.homogeneous import function_gap
from coupled_curvature.numeric.symmetries.reparam import SymmetryResult, random_invertible, random_orthogonal

__all__ = ["attention_matrix", "attention_measures", "attention_sweep", "evaluate"]

_HEAD_BLOCK = re.compile(r"^(?P<stem>.+)\.(?P<kind>[qkvo])\[(?P<h>\d+)\]$")


def attention_measures(names: Sequence[str] | str = "all", *, token_inputs: bool = True) -> list[str]:
    """The rows: registry measures (``λ`` left out on token inputs, which cannot move) then :data:`EXTRA_MEASURES`.

    >>> attention_measures(["D", "D[gauge]"])
    ['D', 'D[gauge]']
    >>> attention_measures("all")[-2:]
    ['D[gauge]', 'Dplus[gauge]']
    """
    names = [names] if isinstance(names, str) else list(names)
    everything = not names or "all" in names
    extra = [m for m in EXTRA_MEASURES if everything or m in names]
    rest = [m for m in names if m not in EXTRA_MEASURES and m != "all"]
    base = M.select("all" if everything else rest) if everything or rest else []
    if token_inputs and "lambda" in base and not everything:
        raise InvalidInputError("λ moves the inputs along a line, and these models read token ids, which cannot move; "
                                "leave lambda out of --measures")
    return [m for m in base if not (token_inputs and m == "lambda")] + extra


def _diagnosis(model: nn.Module, loss_fn: Callable, data, cache: dict, *, blocks: str, gauge: str | None,
               max_dense: int):
    key = ("_attention_diagnosis", blocks, gauge, max_dense)
    if key not in cache:
        cache[key] = diagnose(model, loss_fn, data, blocks=blocks, gauge=gauge, inverse=True, max_dense=max_dense)
    return cache[key]


def _extra(name: str, model: nn.Module, loss_fn: Callable, data, cache: dict, max_dense: int) -> dict:
    """``D`` or ``D⁺`` per block on ``blocks="head"`` (``[head]``) or gauge-fixed (``[gauge]``), in the
    registry's result format (``None`` and ``degenerate`` on scale-invariant blocks for ``D``)."""
    quantity, _, kind = name.partition("[")
    d = _diagnosis(model, loss_fn, data, cache, blocks="head" if kind == "head]" else "tensor",
                   gauge="balanced" if kind == "gauge]" else None, max_dense=max_dense)
    blocks: dict[str, float | None] = {}
    conditioning: dict[str, float] = {}
    degenerate: list[str] = []
    notes: list[str] = []
    for b in d:
        if quantity == "D" and b.scale_invariant:
            blocks[b.name] = None
            degenerate.append(b.name)
            continue
        blocks[b.name] = b.coupled if quantity == "D" else b.inverse_coupled
        if quantity == "Dplus" and b.min_kept_rel_eig is not None:
            conditioning[b.name] = 1.0 / b.min_kept_rel_eig
        notes.extend(f"{b.name}: {n}" for n in b.notes)
    out = {"blocks": blocks, "degenerate": degenerate, "notes": notes, "sizes": {b.name: b.size for b in d}}
    if quantity == "Dplus":
        out["conditioning"] = conditioning
    return out


def evaluate(model: nn.Module, loss_fn: Callable, data, measures: Sequence[str], options: dict,
             timings: dict[str, float]) -> dict[str, dict]:
    """Every measure on one model under :func:`math_attention`, sharing one cache; ``timings`` accumulates seconds."""
    cache: dict = {}
    out = {}
    with math_attention():
        for name in measures:
            start = time.perf_counter()
            opts = dict(options.get(name, {}))
            if name in EXTRA_MEASURES:
                out[name] = _extra(name, model, loss_fn, data, cache, int(opts.get("max_dense", 1024)))
            else:
                out[name] = M.REGISTRY[name].func(model, loss_fn, data, cache=cache, **opts)
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
    return out


def _point(x: float, label: str, model: nn.Module, new: nn.Module, X, text: str) -> SweepPoint:
    return SweepPoint(x, label, SymmetryResult(new, None, function_gap(model, new, X), text))


def attention_sweep(symmetry: str, model: nn.Module, X, *, attn: str, norm_linear: str, seed: int = 0,
                    quick: bool = False) -> list[SweepPoint]:
    """The sweep of one attention symmetry (:data:`ATTENTION_SYMMETRIES`) on module ``attn`` / Linear ``norm_linear``.

    ``qk_conformal``: ``A = c·R`` on head 0 (``R = exp(S)``, ``S`` seeded skew-symmetric), ``c ∈ {1/4, 4}``;
    ``qk_general`` / ``vo``: ``exp(tG_h/√d)`` per head ``h`` (seed ``seed + h``), ``t ∈ {1/2, 2}``;
    ``head_perm``: the heads reversed; ``norm_scale``: ``c ∈ {1/16, 16}``. ``quick``: the last point only.

    >>> from coupled_curvature.numeric.models.tiny_transformers import tiny_transformer
    >>> t = tiny_transformer("mha", steps=0)
    >>> pts = attention_sweep("qk_conformal", t.model, t.data[0], attn=t.attn, norm_linear=t.norm_linear)
    >>> [p.label for p in pts], max(p.result.function_gap for p in pts) < 1e-12
    (['c=0.25', 'c=4'], True)
    """
    if symmetry not in ATTENTION_SYMMETRIES:
        raise InvalidInputError(f"unknown attention symmetry {symmetry!r}; available: {', '.join(ATTENTION_SYMMETRIES)}")
    lay = attention_layout(model, attn)
    pts: list[SweepPoint] = []
    if symmetry == "qk_conformal":
        R = random_orthogonal(lay.head_dim, 1.0, seed)
        for c in ((4.0,) if quick else (0.25, 4.0)):
            pts.append(_point(c, f"c={c:g}", model, qk_transform(model, attn, c * R, head=0), X,
                              f"qk_transform({attn!r}, A = {c:g}·R, head=0; R = random_orthogonal({lay.head_dim}, 1, "
                              f"seed {seed}))"))
    elif symmetry in ("qk_general", "vo"):
        fn, d = (qk_transform, lay.head_dim) if symmetry == "qk_general" else (vo_transform, lay.value_dim)
        for t in ((2.0,) if quick else (0.5, 2.0)):
            new = model
            for h in range(lay.heads):
                new = fn(new, attn, random_invertible(d, t, seed + h), head=h)
            pts.append(_point(t, f"t={t:g}", model, new, X,
                              f"{fn.__name__}({attn!r}, random_invertible({d}, {t:g}, seed {seed} + h) on each head h)"))
    elif symmetry == "head_perm":
        perm = list(range(lay.heads))[::-1]
        moved = float(sum(i != p for i, p in enumerate(perm)))
        pts.append(_point(moved, f"perm={perm}", model, permute_heads(model, attn, perm), X,
                          f"permute_heads({attn!r}, {perm})"))
    else:
        for c in ((16.0,) if quick else (1 / 16, 16.0)):
            pts.append(_point(c, f"c={c:g}", model, norm_rescale(model, norm_linear, c, X), X,
                              f"norm_rescale({norm_linear!r}, c={c:g})"))
    return pts


def _relabel(result: dict, attn: str, perm: Sequence[int]) -> dict:
    """Per-head blocks of ``attn`` renamed from the permuted model's head ``i`` to the old head ``perm[i]``."""
    if "blocks" not in result:
        return result

    def old(name: str) -> str:
        m = _HEAD_BLOCK.match(name)
        if m is None or not name.startswith(f"{attn}." if attn else ""):
            return name
        return f"{m['stem']}.{m['kind']}[{perm[int(m['h'])]}]"

    out = dict(result)
    for key in ("blocks", "conditioning"):
        if key in result:
            out[key] = {old(k): v for k, v in result[key].items()}
    out["degenerate"] = [old(k) for k in result.get("degenerate", [])]
    return out


def attention_matrix(target, measures: Sequence[str], symmetries: Sequence[str], *, options: dict | None = None,
                     seed: int = 0, quick: bool = False, tol_invariant: float = 1e-9, tol_moves: float = 1e-6,
                     progress: Callable[[str], None] | None = None) -> Matrix:
    """Sweep ``symmetries`` on ``target`` (a ``TinyTransformer``: ``model``, ``loss_fn``, ``data``, ``attn``,
    ``norm_linear``) and fill the matrix of ``measures`` (:func:`attention_measures`).

    A cell predicted to move must change by at least ``tol_moves`` (default ``1e-6``, below the explorer's
    ``1e-3``: a map of one head's columns is a small part of a whole-model scalar such as the top eigenvalue,
    so its change is diluted, yet ``1e-6`` is ten decades above rounding). An invariant cell of a
    pseudo-inverse measure is judged per block against ``max(tol_invariant, 10·n_b·ε₆₄·κ_b)`` (``n_b`` the
    block's size, ``κ_b`` its largest reported condition number): the rounding of a symmetric
    eigendecomposition grows with ``n_b`` and pseudo-inversion multiplies it by ``κ_b``. Entries at
    rounding level on both sides (``|value| ≤ 1e-12·max|value|`` of the measure's blocks, zero in exact
    arithmetic) are not compared, and the cell's note names them."""
    say = progress or (lambda s: None)
    options = options or {}
    unknown = [s for s in symmetries if s not in ATTENTION_SYMMETRIES]
    if unknown:
        raise InvalidInputError(f"unknown attention symmetry(ies) {', '.join(unknown)}; available: "
                                f"{', '.join(ATTENTION_SYMMETRIES)}")
    model, loss_fn, data = target.model, target.loss_fn, target.data
    sizes = {n: p.numel() for n, p in model.named_parameters()}
    start = time.perf_counter()
    timings: dict[str, float] = {}
    say(f"baseline measures on {target.kind}")
    base = evaluate(model, loss_fn, data, measures, options, timings)
    cells, values, gaps = [], {}, {}
    for sym in symmetries:
        points = attention_sweep(sym, model, data[0], attn=target.attn, norm_linear=target.norm_linear, seed=seed,
                                 quick=quick)
        def measure(p: SweepPoint) -> dict[str, dict]:
            r = evaluate(p.result.model, loss_fn, data, measures, options, timings)
            if sym == "head_perm":
                perm = list(range(attention_layout(model, target.attn).heads))[::-1]
                r = {m: _relabel(v, target.attn, perm) if m.endswith("[head]") else v for m, v in r.items()}
            return r

        gaps[sym], results = measure_sweep(sym, points, measure, say)
        values[sym] = sweep_values(base, results, points, measures, ATTENTION_IDENTITY[sym])
        cells += [_cell(m, sym, base[m], [r[m] for r in results], points, seed, tol_invariant, tol_moves, sizes)
                  for m in measures]
    return Matrix(list(measures), list(symmetries), cells, values, gaps, time.perf_counter() - start, timings,
                  parameters={s: ATTENTION_PARAMETERS[s] for s in symmetries})


def _rounding_level(base: dict, new: dict) -> list[str]:
    """Entries ``≤ 1e-12·max|entry|`` on both sides: zero in exact arithmetic, their ratio is rounding noise."""
    if "blocks" not in base:
        return []
    a, b = base["blocks"], new.get("blocks", {})
    top = max((abs(v) for r in (a, b) for v in r.values() if v is not None and math.isfinite(v)), default=0.0)
    return [k for k, v in a.items() if v is not None and b.get(k) is not None
            and max(abs(v), abs(b[k])) <= 1e-12 * top]


def _tolerances(results: Sequence[dict], sizes: dict[str, int], tol_invariant: float) -> dict[str, float] | None:
    """Per block ``max(tol_invariant, 10·n_b·ε₆₄·κ_b)``; ``None`` for measures that report no conditioning."""
    kappa = largest_conditioning(results)
    if kappa is None:
        return None
    every = {**sizes, **{k: v for r in results for k, v in r.get("sizes", {}).items()}}
    return {k: max(tol_invariant, 10 * every.get(k, 1) * EPS64 * v) for k, v in kappa.items()}


def _cell(m: str, sym: str, base: dict, results: list[dict], points: list[SweepPoint], seed: int,
          tol_invariant: float, tol_moves: float, sizes: dict[str, int]) -> Cell:
    skipped = sorted({k for r in results for k in _rounding_level(base, r)})
    per = [{k: d for k, d in block_deviations(base, r).items() if k not in skipped} for r in results]
    known = [d for p in per for d in p.values()]
    dev = max(known) if known else None
    degenerate = bool(base.get("degenerate")) and all(bool(r.get("degenerate")) for r in results)
    predicted, reason = ATTENTION_PREDICTIONS[m][sym]
    ok = judge(predicted, dev, degenerate, tol_invariant=tol_invariant, tol_moves=tol_moves)
    tol, tol_reason = (tol_invariant, "fixed") if predicted == I else (None, "")
    btol = _tolerances([base, *results], sizes, tol_invariant)
    if predicted == I and btol is not None and dev is not None:
        ok = all(d <= btol.get(k, tol_invariant) for p in per for k, d in p.items())
        worst = max(((d / btol.get(k, tol_invariant), k) for p in per for k, d in p.items()), default=(0.0, ""))
        tol = btol.get(worst[1], tol_invariant)
        tol_reason = (f"conditioning: per block max(1e-9, 10·n_b·ε₆₄·κ_b); {worst[1] or 'no block'} is the closest to "
                      "its tolerance (the one shown)")
    elif predicted == MV:
        tol, tol_reason = tol_moves, "moves: deviation ≥ tol"
    note = ("degenerate blocks: " + ", ".join(base["degenerate"])) if degenerate else ""
    if skipped:
        note += " entries at rounding level on both sides, not compared: " + ", ".join(skipped)
    if not ok and base.get("notes"):
        note += " measure notes: " + "; ".join(base["notes"][:3])
    curve = [(p.x, max(d.values()) if d else None) for p, d in zip(points, per)]
    return Cell(m, sym, dev, predicted, reason, ok, note.strip(), tol, tol_reason, curve,
                witness(points, per, base, degenerate and predicted == DG, seed))

