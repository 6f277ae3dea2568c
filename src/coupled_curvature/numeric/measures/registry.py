"""Sharpness and curvature measures with one signature ``(model, loss_fn, data, **options)``.

Every measure takes the model (never modified; a float64 copy is used), the loss, the data
(``(X, y)`` or an iterable of batches) and keyword options; it returns a float-valued dict:
``{"value": x, ...}`` for a scalar measure, or ``{"blocks": {name: x | None}, ...}`` for a
per-block measure (``None`` where the block is undefined or degenerate, listed in
``"degenerate"``). Options common to all measures: ``cache`` (a dict shared by measures
evaluated on the same model, loss and data: the float64 copy, the gradient graph and the dense
Hessian blocks are built once) and ``allow_train_mode`` (see :func:`diagnose`).

``REGISTRY`` maps each name to its function; :func:`select` resolves ``"all"`` or a list. The
Hessian measures live in :mod:`.hessian`, the package's own (``D``, ``D⁺``, ``ρ``, Newton
decrement) in :mod:`.coupled`, the shared context in :mod:`.context`; the measures from loss
values and gradients (sharpness, Fisher–Rao, λ) are adapted to the one signature here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.hvp import math_attention
from coupled_curvature.numeric.measures.context import measure_context, refuse_unknown_options
from coupled_curvature.numeric.measures.coupled import (
    coupled,
    coupled_product,
    inverse_coupled,
    newton_decrement,
    radial_ratio,
)
from coupled_curvature.numeric.measures.curvature_rate import curvature_rate
from coupled_curvature.numeric.measures.hessian import (
    hessian_trace,
    laplace_logdet,
    normalized_flatness,
    relative_flatness,
    top_eigenvalue,
)
from coupled_curvature.numeric.measures.sharpness import adaptive_average, adaptive_worst, sam_sharpness

__all__ = [
    "REGISTRY", "Measure", "adaptive_average_measure", "adaptive_worst_measure", "coupled", "coupled_product",
    "curvature_rate_measure", "evaluate", "fisher_rao_norm", "hessian_trace", "inverse_coupled", "laplace_logdet",
    "measure_context", "newton_decrement", "normalized_flatness", "radial_ratio", "relative_flatness",
    "sam_sharpness_measure", "select", "top_eigenvalue",
]


# ---------------------------------------------------------------------------- loss values and gradients


def fisher_rao_norm(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``E_n[(θᵀ∇_θ ℓ_n)²]`` over the samples (``ℓ_n`` the per-sample loss, ``reduction="none"``).

    Invariance: every linear symmetry ``θ -> Tθ`` of the per-sample losses (``θᵀ∇ℓ_n`` is
    unchanged: rescalings, permutations, BatchNorm scale, mixing in linear nets); moves under
    nonlinear maps and loss scaling (``s²``).

    >>> net = nn.Linear(1, 1, bias=False)
    >>> with torch.no_grad(): _ = net.weight.fill_(3.0)
    >>> fisher_rao_norm(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))["value"]
    324.0
    """
    ctx = measure_context(model, loss_fn, data, options)
    refuse_unknown_options("fisher_rao", options)
    r = ctx.flat.per_sample_directional(ctx.flat.theta0)
    return {"value": float((r * r).mean())}




def sam_sharpness_measure(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``max_{‖δ‖₂ ≤ ρ} L(θ+δ) − L(θ)`` by projected ascent (:func:`sharpness.sam_sharpness`).

    Options: ``rho=0.05``, ``steps=10``, ``lr=0.5``, ``restarts=0``, ``seed=0``. Invariance: orthogonal
    maps (the ball and the ascent from 0 are equivariant); moves under rescalings (Dinh et al.'s
    α-scale map makes it arbitrarily large), mixing, nonlinear maps and loss scaling.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> r = sam_sharpness_measure(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)), rho=0.1)
    >>> r["value"] > 0
    True
    """
    return _ascent("sam", sam_sharpness, ("rho", "steps", "lr", "restarts", "seed"), model, loss_fn, data, options)


def adaptive_worst_measure(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``max_{‖δ/|θ|‖₂ ≤ ρ} L(θ+δ) − L(θ)`` (η = 0, every parameter), by projected ascent from 0.

    Options: ``rho=0.5``, ``steps=10``, ``lr=0.5``. Invariance: every element-wise positive scaling
    and permutation (exactly, not only in distribution); moves under mixing, nonlinear maps, loss
    scaling.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(2.0)
    >>> r = adaptive_worst_measure(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)), rho=0.1)
    >>> round(r["value"], 12)
    0.84
    """
    return _ascent("adaptive_worst", adaptive_worst, ("rho", "steps", "lr"), model, loss_fn, data, options)


def adaptive_average_measure(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``E_ε[L(θ + |θ|⊙ε)] − L(θ)``, ``ε`` uniform on ``‖ε‖ = ρ``, common random numbers.

    Options: ``rho=0.5``, ``samples=32``, ``seed=0``. Invariance: exactly invariant under element-wise
    positive scalings (the same normalised draws for every model); under permutations only in
    distribution (the draws are tied to coordinate indices), so the computed value moves.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> r = adaptive_average_measure(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))
    >>> sorted(r)
    ['radius', 'samples', 'stderr', 'value']
    """
    ctx = measure_context(model, loss_fn, data, options)
    kw = _options("adaptive_avg", options, ("rho", "samples", "seed"))
    r = adaptive_average(ctx.flat.loss, ctx.flat.theta0, **kw)
    return {"value": r.value, "stderr": r.stderr, "radius": r.radius, "samples": r.steps}


def curvature_rate_measure(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Input-space curvature rate λ (:func:`curvature_rate.curvature_rate`): mean least-squares slope
    of ``log|∂ⁿ_u ℓ|`` against ``n = 1..orders`` at fixed points and unit directions.

    Options: ``orders=6``, ``points=32``, ``near_boundary=False``, ``seed=0``. Invariance: every
    function-preserving reparameterization and loss scaling (a shift of ``log|d_n|``); **not**
    invariant to input scaling (``x -> sx`` shifts λ by ``−log s``).

    >>> net = nn.Sequential(nn.Linear(2, 3))
    >>> X, y = torch.randn(8, 2, dtype=torch.float64), torch.randint(0, 3, (8,))
    >>> isinstance(curvature_rate_measure(net, nn.CrossEntropyLoss(), (X, y))["value"], float)
    True
    """
    cache = options.pop("cache", None)  # λ needs no parameter-space context
    del cache
    allow = bool(options.pop("allow_train_mode", False))
    kw = _options("lambda", options, ("orders", "points", "near_boundary", "seed", "output", "target"))
    r = curvature_rate(model, loss_fn, data, allow_train_mode=allow, **kw)
    return {"value": r.value, "points": r.points, "orders": r.orders}


def _options(name: str, options: dict, keys: tuple[str, ...]) -> dict:
    """The options ``keys`` of measure ``name``, taken out of ``options``; any other left is refused."""
    kw = {k: options.pop(k) for k in keys if k in options}
    refuse_unknown_options(name, options)
    return kw


def _ascent(name: str, ascend: Callable, keys: tuple[str, ...], model: nn.Module, loss_fn: Callable, data: object,
            options: dict) -> dict:
    """A worst-case loss increase found by ``ascend`` on the flat loss (with the options ``keys``)."""
    ctx = measure_context(model, loss_fn, data, options)
    r = ascend(ctx.flat.loss, ctx.flat.theta0, **_options(name, options, keys))
    return {"value": r.value, "radius": r.radius, "steps": r.steps}


# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Measure:
    name: str
    func: Callable[..., dict]
    label: str


REGISTRY: dict[str, Measure] = {
    m.name: m
    for m in [
        Measure("top_eig", top_eigenvalue, "Hessian top eigenvalue (Lanczos)"),
        Measure("trace", hessian_trace, "Hessian trace"),
        Measure("sam", sam_sharpness_measure, "ℓ2 ε-sharpness (SAM-style)"),
        Measure("adaptive_worst", adaptive_worst_measure, "adaptive sharpness, worst case"),
        Measure("adaptive_avg", adaptive_average_measure, "adaptive sharpness, average (CRN)"),
        Measure("norm_flat", normalized_flatness, "normalized flatness 2Σ|w|√H_ii"),
        Measure("rel_flat", relative_flatness, "relative flatness κ (last layer)"),
        Measure("fisher_rao", fisher_rao_norm, "Fisher–Rao norm"),
        Measure("laplace_logdet", laplace_logdet, "Laplace log det(H_bb+δI)"),
        Measure("lambda", curvature_rate_measure, "curvature rate λ (input space)"),
        Measure("D", coupled, "coupled diagnostic D"),
        Measure("Dplus", inverse_coupled, "inverse-coupled D⁺"),
        Measure("D*Dplus", coupled_product, "product D·D⁺"),
        Measure("rho", radial_ratio, "radial ratio ρ"),
        Measure("newton", newton_decrement, "block Newton decrement gᵀH⁺g"),
    ]
}


def select(names: str | Iterable[str]) -> list[str]:
    """Resolve ``"all"``, one name or a list of names into registry names, in registry order (a
    comma-separated list is split by the command line, :func:`coupled_curvature.base.choices.split_list`).

    >>> select(["D", "trace"]), select("rho")
    (['trace', 'D'], ['rho'])
    """
    names = [names] if isinstance(names, str) else list(names)
    if not names or "all" in names:
        return list(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise InvalidInputError(
            f"unknown measure(s): {', '.join(unknown)}; available: all, {', '.join(REGISTRY)}"
        )
    return [n for n in REGISTRY if n in names]


def evaluate(name: str, model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Run one registered measure by name, with attention on its math kernel (:func:`math_attention`: the fused
    kernels have no second derivative, so a Hessian measure of a transformer would fail inside torch).

    Args:
        name: a measure's name in :data:`MEASURES`.
        model: the network to measure, as for :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`.
        loss_fn: ``loss_fn(output, target)``, as for ``diagnose``.
        data: a batch, a mapping batch or an iterable of batches, as for ``diagnose``.
        **options: that measure's own options.

    Returns:
        The measure's result, a ``dict`` (its keys are the measure's).

    Raises:
        InvalidInputError: an unknown measure name, or options the measure refuses.

    See also:
        :data:`MEASURES` (the registry), :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.tensor([0, 1] * 4)
    >>> sorted(evaluate("D", net, torch.nn.CrossEntropyLoss(), (X, y)))
    ['blocks', 'degenerate', 'max_dense', 'notes']
    """
    measure = REGISTRY[select([name])[0]]
    with math_attention():
        return measure.func(model, loss_fn, data, **options)
