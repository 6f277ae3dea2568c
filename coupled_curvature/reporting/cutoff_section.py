"""The report's "Cutoff sensitivity" section: ``D⁺`` against ``pinv_rtol``, dense and Krylov paths.

``D⁺_b(τ) = (wᵀH⁺_τ w / wᵀw)·‖g‖²`` with ``τ = pinv_rtol·max|λ|`` keeps exactly the
eigenvalues ``|λ| > τ`` of the block, so it is piecewise constant in the cutoff and jumps
where an eigenvalue (with weight of ``w`` on its eigenvector) crosses it. The curve comes
from :func:`coupled_curvature.numeric.studies.cutoff.cutoff_sensitivity` on a 1-2-5 grid of
``pinv_rtol`` from 1e-14 to 1e-2, on the net of the "Arbitrary precision" section (wine, ReLU
13-6-5-3, report seed, 24 samples) trained for 300 epochs instead of 30: near zero training
loss the softmax saturates and the block spectra spread over ten and more decades, so the
curve has steps throughout the plotted range, around the default cutoff too. The two tensor
blocks whose dense curve changes most often on the grid are plotted; the Krylov path is run
on those two only. Deterministic under the seed; about two seconds of CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["GRID", "TABLE_RTOLS", "DEFAULT_RTOL", "FORMULA_TEXT", "FORMULA_TEX", "CAPTION", "CutoffData",
           "cutoff_net", "cutoff_data", "cutoff_table", "cutoff_text", "jumps",
           "max_converged_gap", "fmt_rtol"]

#: the plotted ``pinv_rtol`` values: 1, 2, 5 per decade, 1e-14 … 1e-2 (exact decimal literals)
GRID = tuple(float(f"{m}e{e}") for e in range(-14, -2) for m in (1, 2, 5)) + (1e-2,)
#: the rows of the table (all on the grid), including the default
TABLE_RTOLS = (1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
DEFAULT_RTOL = 1e-10
#: a visible jump of the curve: relative change above this between adjacent grid points
JUMP = 1e-3
N_SAMPLES = 24
HIDDEN = (6, 5)
EPOCHS = 300

FORMULA_TEXT = "D⁺_b(τ) = (wᵀH⁺_τ w / wᵀw)·‖g‖², τ = pinv_rtol·max|λ|"
FORMULA_TEX = (r"D^+_b(\tau) = \frac{w^\top H^+_\tau w}{w^\top w}\,\|g\|^2,\quad "
               r"\tau = \mathtt{pinv\_rtol}\cdot\max|\lambda|")
CAPTION = ("D⁺ against the pseudo-inverse cutoff pinv_rtol (log-log), dense path (wide, pale) and Krylov path "
           "(dashed) on the same axes, held constant between grid points; the dotted line marks the default "
           "pinv_rtol = 1e-10.")


@dataclass(frozen=True)
class CutoffData:
    """The section's data: the two ``cutoff_sensitivity`` results restricted to the plotted blocks.

    ``dense``/``krylov`` are the dicts returned by ``cutoff_sensitivity`` (``method`` "dense" and
    "krylov"); ``scores`` counts visible jumps per tensor block of the whole net (dense path).
    """

    net: str
    blocks: tuple[str, ...]
    dense: dict
    krylov: dict
    scores: dict


def cutoff_net(seed: int = 0) -> tuple[Any, Any, Any, str]:
    """The section's net and data: wine, ReLU MLP 13-6-5-3 (Adam, 300 epochs, ``seed``), first 24 samples.

    >>> net, X, y, label = cutoff_net(0)
    >>> tuple(X.shape), label.startswith("wine")
    ((24, 13), True)
    """
    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.models.training import train_mlp

    data = load("wine", seed=seed)
    fit = train_mlp(data, HIDDEN, seed=seed, epochs=EPOCHS)
    label = (f"wine, ReLU MLP 13-6-5-3 (137 parameters, Adam {EPOCHS} epochs to training loss "
             f"{fit.train_loss:.1e}), {N_SAMPLES} samples, seed {seed}")
    return fit.model, data.X_train[:N_SAMPLES], data.y_train[:N_SAMPLES], label


def jumps(values: list, rel: float = JUMP) -> list[int]:
    """Indices ``i`` where ``|v_{i+1} − v_i| > rel·max(|v_i|, |v_{i+1}|)`` (a visible step).

    >>> jumps([3.0, 3.0, 1.0, 1.0000001])
    [1]
    """
    out = []
    for i, (a, b) in enumerate(zip(values, values[1:])):
        if a is None or b is None:
            continue
        if abs(b - a) > rel * max(abs(a), abs(b)):
            out.append(i)
    return out


@functools.lru_cache(maxsize=4)
def _compute(seed: int) -> CutoffData:
    import torch

    from coupled_curvature.numeric.studies.cutoff import cutoff_sensitivity

    net, X, y, label = cutoff_net(seed)
    loss = torch.nn.CrossEntropyLoss()
    every = cutoff_sensitivity(net, loss, (X, y), rtols=GRID, method="dense")
    scores = {b: len(jumps(r["inverse_coupled"])) for b, r in every["blocks"].items()}
    order = sorted(scores, key=lambda b: -scores[b])  # stable: ties keep the net's order
    chosen = tuple(b for b in order[:2] if scores[b] > 0) or tuple(order[:1])
    dense = {**every, "blocks": {b: every["blocks"][b] for b in chosen}}
    krylov = cutoff_sensitivity(net, loss, (X, y), rtols=GRID, method="krylov", blocks={b: [b] for b in chosen})
    return CutoffData(label, chosen, dense, krylov, scores)


def cutoff_data(seed: int = 0, progress: Callable[[str], None] | None = None) -> CutoffData:
    """``D⁺`` of the plotted blocks at every ``pinv_rtol`` of :data:`GRID`, dense and Krylov (cached per seed).

    ``D⁺(rtol) = (Σ_{|λ_i| > rtol·max|λ|} (u_iᵀw)²/λ_i) / wᵀw · ‖g‖²`` per block.

    >>> c = cutoff_data(0)
    >>> c.dense["method"], c.krylov["method"], len(c.dense["rtols"]) == len(GRID)
    ('dense', 'krylov', True)
    """
    if progress is not None:
        progress("report: D⁺ against pinv_rtol on the dense and Krylov paths (cutoff sensitivity)")
    return _compute(int(seed))


def max_converged_gap(c: CutoffData) -> float | None:
    """``max |D⁺_Krylov − D⁺_dense| / |D⁺_dense|`` over the converged Krylov points (``None`` if none)."""
    gaps = []
    for b in c.blocks:
        d, k = c.dense["blocks"][b], c.krylov["blocks"][b]
        for x, y, ok in zip(d["inverse_coupled"], k["inverse_coupled"], k["converged"]):
            if ok and x is not None and y is not None:
                gaps.append(abs(y - x) / abs(x) if x != 0 else abs(y))
    return max(gaps) if gaps else None


def fmt_rtol(r: float) -> str:
    """A grid ``pinv_rtol`` as a short literal.

    >>> fmt_rtol(1e-10), fmt_rtol(5e-3)
    ('1e-10', '5e-3')
    """
    return f"{r:.0e}".replace("e-0", "e-")


def _fmt(v: float | None) -> str:
    return "undefined" if v is None else f"{v:.3e}"


def cutoff_table(c: CutoffData) -> list[list[str]]:
    """Header + one row per plotted block and ``rtol`` of :data:`TABLE_RTOLS` (plain text)."""
    rows = [["block", "pinv_rtol", "D⁺ dense", "D⁺ Krylov", "Krylov converged", "rank kept"]]
    at = {r: i for i, r in enumerate(c.dense["rtols"])}
    for b in c.blocks:
        d, k = c.dense["blocks"][b], c.krylov["blocks"][b]
        for r in TABLE_RTOLS:
            i = at[r]
            rows.append([b, fmt_rtol(r) + (" (default)" if r == DEFAULT_RTOL else ""), _fmt(d["inverse_coupled"][i]),
                         _fmt(k["inverse_coupled"][i]), "yes" if k["converged"][i] else "no",
                         f"{d['rank'][i]} / {d['size']}"])
    return rows


def cutoff_text(c: CutoffData) -> list[str]:
    """The section's paragraphs (plain text); the first holds :data:`FORMULA_TEXT` once."""
    lo, hi = fmt_rtol(GRID[0]), fmt_rtol(GRID[-1])
    first = (
        f"The curve is {FORMULA_TEXT}, where λ runs over the eigenvalues of the diagonal block H of block b: the "
        "pseudo-inverse keeps exactly the eigenvalues with |λ| > τ. As a function of pinv_rtol it is piecewise "
        "constant and discontinuous: each jump is an eigenvalue, with weight of w on its eigenvector, crossing the "
        "cutoff, and the rank kept drops there. The value at one cutoff is therefore a choice, not a limit; the "
        "default pinv_rtol = 1e-10 is marked on the plot."
    )
    parts = []
    for b in c.blocks:
        d = c.dense["blocks"][b]
        v, rk = d["inverse_coupled"], d["rank"]
        parts.append(f"{b} ({d['size']} parameters): {len(jumps(v))} visible jumps, D⁺ from {_fmt(v[0])} "
                     f"(rank {rk[0]}) to {_fmt(v[-1])} (rank {rk[-1]})")
    ok = sum(bool(x) for b in c.blocks for x in c.krylov["blocks"][b]["converged"])
    total = sum(len(c.krylov["blocks"][b]["converged"]) for b in c.blocks)
    at_default = sum(bool(c.krylov["blocks"][b]["converged"][GRID.index(DEFAULT_RTOL)]) for b in c.blocks)
    gap = max_converged_gap(c)
    agree = ("" if gap is None else
             f" Where it converged, its largest relative difference to the dense path is {gap:.1e}.")
    second = (
        f"On {c.net}, pinv_rtol from {lo} to {hi} ({len(GRID)} values, 1-2-5 per decade). Plotted are the "
        f"{len(c.blocks)} tensor block{'s' if len(c.blocks) > 1 else ''} whose dense curve jumps most often on this grid, out of "
        f"{len(c.scores)}: " + "; ".join(parts) + ". Dense path: one eigendecomposition of the assembled block, "
        "re-thresholded at every cutoff. Krylov path: one Lanczos run per block at the smallest cutoff, its "
        "Ritz values re-thresholded at every cutoff with a convergence verdict each (x on the plot: not "
        f"converged); {ok} of {total} Krylov points converged, {at_default} of {len(c.blocks)} at the default "
        f"pinv_rtol = {fmt_rtol(DEFAULT_RTOL)}." + agree
    )
    return [first, second]
