"""How much ``D⁺`` depends on the pseudo-inverse cutoff ``pinv_rtol``, on every route of the engine.

``D⁺(rtol) = (wᵀH⁺_τ w / wᵀw)·‖g‖²`` with ``τ = rtol·max|λ|`` is a step function of
``rtol``: it jumps whenever ``τ`` crosses an eigenvalue carrying weight of ``w``. The
curvature is computed once per block by the engine; the Gram and dense routes give the
spectrum along ``w``, re-thresholded at every cutoff, the Krylov route runs Lanczos once (at the
smallest ``rtol``) and re-thresholds the Ritz values, with a convergence verdict per ``rtol``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.execution import execute
from coupled_curvature.numeric.core.options import run_options
from coupled_curvature.numeric.core.planning import plan
from coupled_curvature.numeric.core.progress import progress_bar
from coupled_curvature.numeric.core.routes import SpectralRoute
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm
from coupled_curvature.numeric.linalg.pinv import PinvForm
from coupled_curvature.base.run_settings import with_settings

DEFAULT_RTOLS = tuple(float(10.0**e) for e in range(-14, -1))


@with_settings(without=("pinv_rtol",))
def cutoff_sensitivity(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    rtols: Sequence[float] = DEFAULT_RTOLS,
    **settings: Any,
) -> dict:
    """``D⁺`` of every block at every cutoff in ``rtols`` (float64, model copied, never modified).

    ``D⁺(rtol) = (Σ_{|λ_i| > rtol·max|λ|} (u_iᵀw)²/λ_i) / wᵀw · ‖g‖²``. The curvature comes from the
    engine that ``diagnose`` runs, with its run settings (``output=``, ``target=`` too; the cutoffs are ``rtols``) and routes (``method`` ``"gram"`` by default: the exact
    Gram route wherever the network is piecewise affine in the block, dense up to ``max_dense``
    elsewhere): the spectrum of each block is computed once and re-thresholded at every cutoff; a
    Krylov block runs Lanczos once at the smallest ``rtol`` and re-thresholds its Ritz values, with a
    convergence verdict per ``rtol``. Returns ``{"method", "rtols", "blocks": {name: {"size",
    "inverse_coupled", "rank", "converged", "error", "route", "reason"}}, "left_out": {name: reason}}``
    with one list entry per ``rtol`` (``converged``/``error`` are ``None`` on the exact routes;
    ``inverse_coupled`` is ``None`` where undefined: ``w = 0``; ``g = 0`` gives 0). A block that no
    allowed route takes is in ``left_out`` with the reason.

    Args:
        model: the network, as for :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`; copied
            to float64, never modified.
        loss_fn: the scalar loss, as for ``diagnose`` (its ``reduction`` sets the batch weights).
        data: one batch or an iterable of them, as for ``diagnose``.
        rtols: the relative cutoffs, each in ``[0, 1)``.
        **settings: ``diagnose``'s run settings by keyword but ``pinv_rtol`` (the cutoffs are ``rtols``), each
            declared once in :data:`~coupled_curvature.base.run_settings.SETTINGS`: ``method``, ``max_dense``,
            ``krylov_max_iter``, ``krylov_tol`` and ``gram_memory`` choose and bound the routes; ``blocks``, ``frozen``,
            ``gauge``, ``reduction``, ``output``, ``target``, ``allow_train_mode``, ``inverse``, ``process_group``,
            ``progress`` and ``device`` are as for ``diagnose``.

    Returns:
        dict: ``{"method", "rtols", "blocks": {name: {"size", "inverse_coupled", "rank", "converged", "error", "route",
        "reason"}}, "left_out": {name: reason}}``, one list entry per ``rtol``.

    Raises:
        InvalidInputError: a cutoff outside ``[0, 1)``, a setting out of range, or data the model cannot take.

    See also:
        :func:`~coupled_curvature.numeric.core.profile.spectral_profile` (the spectrum itself),
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (one cutoff).

    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> r = cutoff_sensitivity(net, nn.CrossEntropyLoss(), (X, y), rtols=[1e-12, 1e-2])
    >>> dp = r["blocks"]["0.weight"]["inverse_coupled"]
    >>> len(dp), dp[0] >= dp[1] > 0, r["blocks"]["0.weight"]["route"]
    (2, True, 'gram')
    """
    rtols = _checked_rtols(rtols)
    if "pinv_rtol" in settings:
        raise InvalidInputError("cutoff_sensitivity takes its cutoffs as rtols=[...], not pinv_rtol; pass rtols")
    o = run_options(**settings, pinv_rtol=rtols[0])
    p = plan(model, loss_fn, data, o)
    bar = progress_bar("cutoff_sensitivity", len(p.partition), o.progress)
    run = execute(p, bar)
    bar.close()
    out: dict = {}
    left_out: dict = {}
    for c in run.blocks.values():
        if c.spectral is SpectralRoute.NONE:
            left_out[c.name] = c.spectral_reason
            continue
        w_sq, g_sq = float(c.w @ c.w), float(c.grad @ c.grad)
        cut: list[PinvForm | KrylovForm] = []
        for r in rtols:
            form = c.pinv_form(r)
            assert form is not None, c.name  # a block on a spectral route has its spectrum or its Lanczos run
            cut.append(form)
        exact, ranks = [f.exact for f in cut], [f.rank for f in cut]
        converged: list[bool] | None = None
        error: list[float] | None = None
        if c.spectral is SpectralRoute.KRYLOV:
            krylov = [cast(KrylovForm, f) for f in cut]  # the Lanczos run, re-cut: KrylovForms on this route
            converged, error = [f.converged for f in krylov], [f.error_estimate for f in krylov]
        # wᵀH⁺w of a block far from unit scale need not fit float64 while D⁺ does: formed from the scaled value
        dplus = [None if v is None or w_sq == 0.0 or not (math.isfinite(w_sq) and math.isfinite(g_sq))
                 else v.times((w_sq, -1), (g_sq, 1)).value for v in exact]
        out[c.name] = {"size": c.size, "inverse_coupled": dplus, "rank": ranks, "converged": converged,
                       "error": error, "route": str(c.spectral), "reason": c.spectral_reason}
    return {"method": o.method, "rtols": list(rtols), "blocks": out, "left_out": left_out}


def _checked_rtols(rtols: object) -> list[float]:
    try:
        if not isinstance(rtols, Iterable):
            raise TypeError
        out = sorted(float(r) for r in rtols)
    except (TypeError, ValueError):
        raise InvalidInputError(f"rtols must be a sequence of numbers in [0, 1), got {rtols!r}") from None
    if not out or not all(0.0 <= r < 1.0 for r in out) or not np.isfinite(out).all():
        raise InvalidInputError(f"rtols must be a non-empty sequence of numbers in [0, 1), got {rtols!r}")
    return out


# ---------------------------------------------------------------- the report's cutoff section

#: the 1-2-5 grid of pinv_rtol from 1e-14 to 1e-2 the report's section sweeps
GRID = tuple(float(f"{m}e{e}") for e in range(-14, -2) for m in (1, 2, 5)) + (1e-2,)
#: a visible step: relative change above this between two grid points
JUMP = 1e-3
N_SAMPLES = 24
HIDDEN = (6, 5)
EPOCHS = 300


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
