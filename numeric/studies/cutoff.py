"""How much ``D⁺`` depends on the pseudo-inverse cutoff ``pinv_rtol``, on the dense and Krylov paths.

``D⁺(rtol) = (wᵀH⁺_τ w / wᵀw)·‖g‖²`` with ``τ = rtol·max|λ|`` is a step function of
``rtol``: it jumps whenever ``τ`` crosses an eigenvalue carrying weight of ``w``. The
curvature is computed once per block; the dense path eigendecomposes each block once and
re-thresholds the spectrum, the Krylov path runs Lanczos once (at the smallest ``rtol``)
and re-thresholds the Ritz values (:func:`krylov.rethreshold`), with a convergence verdict
per ``rtol``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.hvp import block_curvature, block_krylov
from coupled_curvature.numeric.linalg.krylov_quadrature import rethreshold
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.linalg.pinv import cutoff_sum, symmetric_spectrum

DEFAULT_RTOLS = tuple(float(10.0**e) for e in range(-14, -1))


def cutoff_sensitivity(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    rtols: Sequence[float] = DEFAULT_RTOLS,
    blocks: str | Mapping[str, Sequence[str]] = "tensor",
    method: str = "dense",
    max_dense: int = 4096,
    krylov_max_iter: int = 1000,
    krylov_tol: float = 1e-7,
    allow_train_mode: bool = False,
) -> dict:
    """``D⁺`` of every block at every cutoff in ``rtols`` (float64, model copied, never modified).

    ``D⁺(rtol) = (Σ_{|λ_i| > rtol·max|λ|} (u_iᵀw)²/λ_i) / wᵀw · ‖g‖²``. Returns
    ``{"method", "rtols", "blocks": {name: {"size", "inverse_coupled", "rank", "converged",
    "error"}}}`` with one list entry per ``rtol`` (``converged``/``error`` are ``None`` on
    the dense path; ``inverse_coupled`` is ``None`` where undefined: ``w = 0``, ``g = 0``
    gives 0). With ``method="dense"``, blocks above ``max_dense`` are left out.

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> r = cutoff_sensitivity(net, torch.nn.CrossEntropyLoss(), (X, y), rtols=[1e-12, 1e-2])
    >>> dp = r["blocks"]["0.weight"]["inverse_coupled"]
    >>> len(dp), dp[0] >= dp[1] > 0
    (2, True)
    """
    rtols = _checked_rtols(rtols)
    if method not in ("dense", "krylov"):
        raise InvalidInputError(f"method must be 'dense' or 'krylov', got {method!r}")
    if isinstance(max_dense, bool) or not isinstance(max_dense, int) or max_dense < 0:
        raise InvalidInputError(f"max_dense must be a non-negative int, got {max_dense!r}")
    if not callable(loss_fn):
        raise InvalidInputError("loss_fn must be callable as loss_fn(outputs, targets)")
    net = float64_copy(model, allow_train_mode=allow_train_mode)
    objective = Objective(net, loss_fn, prepare_batches(data, loss_fn))
    if not objective.names:
        raise InvalidInputError("the model has no parameters to diagnose")
    partition = resolve_blocks(objective.names, blocks)
    sizes = {b: sum(objective.values[m].numel() for m in ms) for b, ms in partition.items()}
    dense = {b for b, n in sizes.items() if n <= max_dense} if method == "dense" else set()
    chosen = sorted(dense, key=list(partition).index) if method == "dense" else list(partition)
    retained: list = []
    curv = block_curvature(objective, partition, dense, retain=retained if method == "krylov" else None)
    forms = {}
    if method == "krylov":
        forms = block_krylov(objective, partition, curv, chosen, rtol=rtols[0], max_iter=krylov_max_iter,
                             tol=krylov_tol, graphs=retained)
    del retained
    out: dict = {}
    for block in chosen:
        w = torch.cat([objective.values[m].reshape(-1) for m in partition[block]])
        w_sq, g_sq = float(w @ w), float(curv[block].grad @ curv[block].grad)
        if method == "dense":
            values, ranks = _dense_curve(curv[block].dense, w, rtols)
            converged = error = None
        else:
            cut = [rethreshold(forms[block], r) for r in rtols]
            values, ranks = [f.value for f in cut], [f.rank for f in cut]
            converged, error = [f.converged for f in cut], [f.error_estimate for f in cut]
        dplus = [None if w_sq == 0.0 else v / w_sq * g_sq for v in values]
        out[block] = {"size": sizes[block], "inverse_coupled": dplus, "rank": ranks,
                      "converged": converged, "error": error}
    return {"method": method, "rtols": list(rtols), "blocks": out}


def cutoff_figure(*results: dict) -> Figure:
    """Log-log ``|D⁺|`` against ``pinv_rtol``, one colour per block; dense solid (wide, pale), Krylov dashed.

    Negative ``D⁺`` (indefinite blocks) is drawn at ``|D⁺|`` with open markers; Krylov
    points that did not converge are marked ``x``.

    >>> r = {"method": "dense", "rtols": [1e-12, 1e-6], "blocks": {"a": {"size": 2,
    ...      "inverse_coupled": [3.0, 1.0], "rank": [2, 1], "converged": None, "error": None}}}
    >>> len(cutoff_figure(r).axes[0].lines)
    1
    """
    if not results:
        raise InvalidInputError("cutoff_figure needs at least one cutoff_sensitivity result")
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    names: list[str] = []
    for res in results:
        names += [b for b in res["blocks"] if b not in names]
    colours = {b: f"C{i % 10}" for i, b in enumerate(names)}
    for res in results:
        krylov = res["method"] == "krylov"
        for block, row in res["blocks"].items():
            pts = [(r, v) for r, v in zip(res["rtols"], row["inverse_coupled"]) if v not in (None, 0.0)]
            if not pts:
                continue
            x, y = zip(*pts)
            style = {"ls": "--", "lw": 1.2} if krylov else {"ls": "-", "lw": 2.6, "alpha": 0.45}
            ax.plot(x, [abs(v) for v in y], color=colours[block], label=f"{block} ({'Krylov' if krylov else 'dense'})",
                    **style)
            neg = [(a, abs(b)) for a, b in pts if b < 0]
            if neg:
                ax.plot(*zip(*neg), "o", mfc="none", color=colours[block])
            if krylov and row["converged"] is not None:
                bad = [(r, abs(v)) for r, v, c in zip(res["rtols"], row["inverse_coupled"], row["converged"])
                       if not c and v not in (None, 0.0)]
                if bad:
                    ax.plot(*zip(*bad), "x", color=colours[block])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pinv_rtol (cutoff τ = rtol·max|λ|)")
    ax.set_ylabel("|D⁺|")
    ax.set_title("D⁺ against the pseudo-inverse cutoff (x: Krylov not converged, o: D⁺ < 0)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    if names:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _dense_curve(H: torch.Tensor, w: torch.Tensor, rtols: Sequence[float]) -> tuple[list[float], list[int]]:
    """One spectrum (:func:`pinv.symmetric_spectrum`), then ``Σ_{|λ| > rtol·max|λ|} (u·w)²/λ``
    (:func:`pinv.cutoff_sum`) for every cutoff."""
    evals, coeff2 = symmetric_spectrum(H, w)
    forms = [cutoff_sum(evals, coeff2, r) for r in rtols]
    return [f.value for f in forms], [f.rank for f in forms]


def _checked_rtols(rtols: object) -> list[float]:
    try:
        out = sorted(float(r) for r in rtols)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise InvalidInputError(f"rtols must be a sequence of numbers in [0, 1), got {rtols!r}") from None
    if not out or not all(0.0 <= r < 1.0 for r in out) or not np.isfinite(out).all():
        raise InvalidInputError(f"rtols must be a non-empty sequence of numbers in [0, 1), got {rtols!r}")
    return out
