"""Measures of the Hessian itself: top eigenvalue (Lanczos), trace and diagonal (exact from
per-sample factors, dense blocks or Hutchinson), normalized and relative flatness, and the
Laplace log-determinant per block. One signature ``(model, loss_fn, data, **options)`` (see
:mod:`~coupled_curvature.numeric.measures.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.lanczos import lanczos_top
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.measures.context import MeasureContext, measure_context, refuse_unknown_options
from coupled_curvature.numeric.symmetries.homogeneous import weight_layers

__all__ = ["hessian_trace", "laplace_logdet", "normalized_flatness", "relative_flatness", "top_eigenvalue"]


def top_eigenvalue(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Largest eigenvalue ``λ_max(∇²L)`` of the full Hessian, by Lanczos (full reorthogonalisation).

    Options: ``max_iter=150``, ``tol=1e-9`` (stop when the Ritz residual ≤ tol·|λ|), ``seed=0``.
    Returns ``value``, ``residual = ‖Hv − λv‖``, ``iterations``, ``converged``.
    Invariance: orthogonal changes of all coordinates (permutations, orthogonal mixing); moves
    under rescalings (T3: blocks scale by ``c^{∓2}``), general linear maps and loss scaling.

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> r = top_eigenvalue(net, nn.MSELoss(), (torch.eye(2), torch.zeros(2, 2)))
    >>> round(r["value"], 9)  # H = (2/4)·I_2 ⊗ [[1,0,1],[0,1,1],[1,1,2]]: top eigenvalue 3/2
    1.5
    """
    ctx = measure_context(model, loss_fn, data, options)
    max_iter = int(options.pop("max_iter", 150))
    tol = float(options.pop("tol", 1e-9))
    seed = int(options.pop("seed", 0))
    refuse_unknown_options("top_eig", options)
    r = lanczos_top(ctx.flat.hvp, ctx.flat.n, max_iter=max_iter, tol=tol, seed=seed, device=ctx.flat.theta0.device)
    return {"value": r.value, "residual": r.residual, "iterations": r.iterations, "converged": r.converged}


def _hutchinson_block(ctx: MeasureContext, name: str, probes: int, seed: int) -> tuple[Tensor, Tensor]:
    """Rademacher probes supported on one block: ``(E[z⊙H_bb z], samples of zᵀH_bb z)``.

    One block at a time, so a uniform scaling of the block scales every probe term exactly.
    """
    sl = ctx.flat.block(name)
    size = sl.stop - sl.start
    gen = torch.Generator().manual_seed(seed)
    diag = torch.zeros(size, dtype=torch.float64)
    samples = torch.zeros(probes, dtype=torch.float64)
    for k in range(probes):
        z = torch.randint(0, 2, (size,), generator=gen).to(torch.float64) * 2 - 1
        v = torch.zeros(ctx.flat.n, dtype=torch.float64)
        v[sl] = z
        hz = ctx.flat.hvp(v)[sl]
        samples[k] = z @ hz
        diag += z * hz / probes
    return diag, samples


def _hessian_diagonal(ctx: MeasureContext, max_dense: int, probes: int, seed: int) -> tuple[Tensor, float, list[str], list[str]]:
    """The Hessian diagonal: exact from per-sample factors (layer-output factors of ``nn.Linear``,
    verified Gauss–Newton factors of ``nn.Conv2d`` and other Linear tensors) or dense blocks of ≤
    ``max_dense``, Hutchinson per block otherwise. Returns it, the trace's standard error, the
    names of estimated blocks and notes on rejected factorizations."""
    factors = ctx.factors()
    diag = torch.zeros(ctx.flat.n, dtype=torch.float64)
    exact = set()
    for path, f in factors.items():
        for attr, values in (("weight", f.weight_diagonal), ("bias", f.bias_diagonal)):
            name = f"{path}.{attr}"
            if name in ctx.flat.offsets:
                diag[ctx.flat.block(name)] = values().reshape(-1)
                exact.add(name)
    accepted, rejected = ctx.gauss_newton([n for n in ctx.flat.names if n not in exact])
    for n, gn in accepted.items():
        diag[ctx.flat.block(n)] = gn.diagonal
        exact.add(n)
    notes = [f"{n}: Gauss–Newton diagonal rejected ({why}); dense or Hutchinson instead" for n, why in rejected.items()]
    rest = [n for n in ctx.flat.names if n not in exact]
    small = [n for n in rest if n in set(ctx.small_blocks(max_dense))]
    if small:
        dense = ctx.dense_hessians(small)
        for n in small:
            diag[ctx.flat.block(n)] = torch.diagonal(dense[n])
    estimated = [n for n in rest if n not in small]
    var = 0.0
    for n in estimated:
        d, samples = _hutchinson_block(ctx, n, probes, seed)
        diag[ctx.flat.block(n)] = d
        var += float(samples.var()) / probes if probes > 1 else float("nan")
    return diag, math.sqrt(var), estimated, notes


def _diagonal_measure(name: str, model: nn.Module, loss_fn: Callable, data: object, options: dict):
    """The measure context and ``(diag, stderr, estimated blocks)`` from the diagonal options
    ``max_dense`` (default 4096), ``probes`` (64) and ``seed`` (0); unknown options are refused."""
    ctx = measure_context(model, loss_fn, data, options)
    max_dense = int(options.pop("max_dense", 4096))
    probes = int(options.pop("probes", 64))
    seed = int(options.pop("seed", 0))
    refuse_unknown_options(name, options)
    return ctx, _hessian_diagonal(ctx, max_dense, probes, seed)


def hessian_trace(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``tr ∇²L = Σ_i H_ii``: exact for ``nn.Linear`` tensors (per-sample factors
    ``Σ_n G_n[s,s] a_n[i]²``), for ``nn.Conv2d`` tensors whose per-sample Gauss–Newton form
    ``Σ_n J_nᵀΛ_nJ_n`` is verified against exact Hessian-vector products (diagonal
    ``Σ_n Σ_jk Λ_n[j,k] J_n[j,i] J_n[k,i]``, :mod:`~coupled_curvature.numeric.factors.gauss_newton`) and for other blocks of ≤ ``max_dense``
    parameters (dense ``H_bb``); Hutchinson per block (``probes`` Rademacher vectors from
    ``seed``) otherwise, with its standard error.

    Options: ``max_dense=4096``, ``probes=64``, ``seed=0``. Returns ``value``, ``stderr`` (0 when
    exact), ``method``, ``notes`` (rejected factorizations). Invariance: like the top eigenvalue
    (orthogonal maps only).

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> round(hessian_trace(net, nn.MSELoss(), (torch.eye(2), torch.zeros(2, 2)))["value"], 12)
    4.0
    """
    ctx, (diag, se, estimated, notes) = _diagonal_measure("trace", model, loss_fn, data, options)
    method = "exact" if not estimated else f"Hutchinson on {', '.join(estimated)}; exact elsewhere"
    return {"value": float(diag.sum()), "stderr": se, "method": method, "notes": notes}


def normalized_flatness(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``2 Σ_i |θ_i| √(H_ii)`` over all parameters (``H_ii`` clipped at 0 if negative).

    The Hessian diagonal is the one of :func:`hessian_trace` (exact from per-sample factors or
    dense blocks of ≤ ``max_dense`` parameters, default 4096; Hutchinson ``E[z⊙Hz]`` otherwise).
    Invariance: every element-wise scaling
    ``θ_i -> a_iθ_i`` (``H_ii -> H_ii/a_i²``): layer, neuron-wise, BatchNorm scale, and
    permutations; moves under mixing (orthogonal or general), nonlinear maps, loss scaling (√s).

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(3.0)
    >>> r = normalized_flatness(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))
    >>> round(r["value"], 12)  # L = w², H = 2: 2·3·√2
    8.485281374239
    """
    ctx, (diag, _, estimated, notes) = _diagonal_measure("norm_flat", model, loss_fn, data, options)
    negative = int((diag < 0).sum())
    value = float(2.0 * (ctx.flat.theta0.abs() * diag.clamp(min=0.0).sqrt()).sum())
    return {"value": value, "estimated_blocks": estimated, "negative_diagonal": negative, "notes": notes}


def _weight_param_name(net: nn.Module, layer: int) -> str:
    layers = [m for m in net.modules() if "chain" in layer_capabilities(m).symmetry]
    if not layers:
        weight_layers(net)  # raises the clear error for non-Sequential models
    if not -len(layers) <= layer < len(layers):
        raise InvalidInputError(f"layer={layer}: the model has weight layers 0..{len(layers) - 1}")
    target = layers[layer]
    path = next(p for p, m in net.named_modules() if m is target)
    if parametrize.is_parametrized(target, "weight"):
        return f"{path}.parametrizations.weight.original"
    return f"{path}.weight"


def relative_flatness(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``κ = Σ_{s,s'} ⟨w_s, w_s'⟩ Tr H_{s,s'}`` for one weight layer (rows ``w_s``, ``H_{s,s'}`` the
    Hessian sub-block between rows ``s`` and ``s'``).

    Option ``layer=-1`` (weight-layer index; default the last, the classifier on the features).
    Invariance: scaling of the layer's rows (neuron-wise at this layer) and uniform scaling of its
    columns (layer-wise rescaling of the previous layer), permutations and orthogonal mixing of
    rows or columns; moves under non-uniform column scaling (neuron-wise at the previous layer),
    general mixing, nonlinear maps and loss scaling.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(3.0)
    >>> relative_flatness(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))["value"]
    18.0
    """
    ctx = measure_context(model, loss_fn, data, options)
    layer = int(options.pop("layer", -1))
    refuse_unknown_options("rel_flat", options)
    name = _weight_param_name(ctx.flat.net, layer)
    W = ctx.flat.objective.values[name]
    rows = W.shape[0]
    cols = W.numel() // rows
    path = name.rpartition(".")[0]
    if path in ctx.factors() and name.endswith(".weight"):
        traces = ctx.factors()[path].row_traces()
    else:
        H = ctx.dense_hessians([name])[name].reshape(rows, cols, rows, cols)
        traces = torch.einsum("sjtj->st", H)
    Wf = W.reshape(rows, cols)
    return {"value": float(((Wf @ Wf.T) * traces).sum()), "tensor": name}


def laplace_logdet(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Per block ``log|det(H_bb + δI)|`` (Laplace/PAC-Bayes log-volume term, T8), blocks ≤ ``max_dense``.

    Options: ``delta=1e-3``, ``max_dense=4096``. Cholesky when ``H_bb + δI`` is positive
    definite, otherwise ``slogdet`` (``sign`` recorded). Invariance: orthogonal maps of each block
    (permutations, orthogonal mixing); moves under rescalings, general mixing, nonlinear maps and
    loss scaling.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> r = laplace_logdet(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)), delta=1.0)
    >>> round(r["blocks"]["0.weight"], 12)  # log(2 + 1)
    1.098612288668
    """
    ctx = measure_context(model, loss_fn, data, options)
    delta = float(options.pop("delta", 1e-3))
    max_dense = int(options.pop("max_dense", 4096))
    refuse_unknown_options("laplace_logdet", options)
    small = ctx.small_blocks(max_dense)
    dense = ctx.dense_hessians(small) if small else {}
    blocks: dict[str, float | None] = {}
    signs: dict[str, float] = {}
    for n in ctx.flat.names:
        if n not in small:
            blocks[n] = None
            continue
        H = dense[n]
        A = 0.5 * (H + H.T) + delta * torch.eye(H.shape[0], dtype=torch.float64)
        L, info = torch.linalg.cholesky_ex(A)
        if int(info) == 0:
            blocks[n], signs[n] = float(2.0 * torch.log(torch.diagonal(L)).sum()), 1.0
        else:
            sign, logabs = torch.linalg.slogdet(A)
            blocks[n], signs[n] = float(logabs), float(sign)
    total = sum(v for v in blocks.values() if v is not None)
    return {"blocks": blocks, "value": total, "signs": signs, "delta": delta}
