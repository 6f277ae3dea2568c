"""Sharpness and curvature measures with one signature ``(model, loss_fn, data, **options)``.

Every measure takes the model (never modified; a float64 copy is used), the loss, the data
(``(X, y)`` or an iterable of batches) and keyword options; it returns a float-valued dict:
``{"value": x, ...}`` for a scalar measure, or ``{"blocks": {name: x | None}, ...}`` for a
per-block measure (``None`` where the block is undefined or degenerate, listed in
``"degenerate"``). Options common to all measures: ``cache`` (a dict shared by measures
evaluated on the same model, loss and data: the float64 copy, the gradient graph and the dense
Hessian blocks are built once) and ``allow_train_mode`` (see :func:`diagnose`).

``REGISTRY`` maps each name to its function; :func:`select` resolves ``"all"`` or a list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.measures.curvature_rate import curvature_rate as _curvature_rate
from coupled_curvature.numeric.core.diagnostics import Diagnosis, diagnose
from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.core.hvp import BlockCurvature, block_curvature
from coupled_curvature.numeric.core.compare import agrees
from coupled_curvature.numeric.factors.per_sample import GaussNewton, gauss_newton, linear_module_of
from coupled_curvature.numeric.linalg.lanczos import lanczos_top
from coupled_curvature.numeric.factors.linear_diagonal import LinearFactors, linear_factors
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form
from coupled_curvature.numeric.measures.sharpness import adaptive_average, adaptive_worst, sam_sharpness
from coupled_curvature.numeric.symmetries.homogeneous import weight_layers

# ---------------------------------------------------------------------------- shared context


class _Context:
    """Everything the measures share for one (model, loss, data): built lazily, once."""

    def __init__(self, model: nn.Module, loss_fn: Callable, data: object, allow_train_mode: bool):
        self.model, self.loss_fn, self.data = model, loss_fn, data
        self.allow_train_mode = allow_train_mode
        self.flat = FlatLoss(model, loss_fn, data, allow_train_mode=allow_train_mode)
        self._dense: dict[frozenset, dict[str, BlockCurvature]] = {}
        self._diag: dict[tuple, Diagnosis] = {}
        self._factors: dict[str, LinearFactors] | None = None
        self._gn: dict[tuple, tuple[dict[str, GaussNewton], dict[str, str]]] = {}
        self._grad: Tensor | None = None

    @property
    def grad(self) -> Tensor:
        """``∇L(θ₀)`` (flat, cached)."""
        if self._grad is None:
            self._grad = self.flat.grad()
        return self._grad

    def _block_hvp(self, name: str, v: Tensor) -> Tensor:
        full = torch.zeros(self.flat.n, dtype=torch.float64)
        full[self.flat.block(name)] = v
        return self.flat.hvp(full)[self.flat.block(name)]

    def gauss_newton(self, names: Iterable[str], factor: bool = False) -> tuple[dict[str, GaussNewton], dict[str, str]]:
        """Verified per-sample Gauss–Newton sums (:func:`kron.gauss_newton`) of Linear/Conv tensors.

        A tensor is accepted only if ``Σ_n J_nᵀΛ_nJ_n`` times ``w_b`` and times a seeded Rademacher
        vector, and ``Σ_n J_nᵀe_n``, match exact Hessian-vector products and the gradient to
        ``1e-9`` relative (with ``factor``, also ``Bᵀ(Bw_b)`` and ``Bᵀs``). Returns the accepted sums
        and ``{name: reason}`` for the tensors that were tried and rejected.
        """
        names = [n for n in names if linear_module_of(self.flat.net, [n]) is not None]
        key = (frozenset(names), factor)
        for (have, fac), result in self._gn.items():
            if key[0] <= have and (fac or not factor):
                return ({n: g for n, g in result[0].items() if n in key[0]},
                        {n: r for n, r in result[1].items() if n in key[0]})
        if not names:
            return {}, {}
        gen = torch.Generator().manual_seed(0)
        probes = {}
        for n in names:
            size = self.flat.block(n).stop - self.flat.block(n).start
            z = torch.randint(0, 2, (size,), generator=gen).to(torch.float64) * 2 - 1
            probes[n] = torch.stack([self.flat.theta0[self.flat.block(n)], z], dim=1)
        sums = gauss_newton(self.flat.objective, {n: [n] for n in names}, probes=probes, factor=factor)
        accepted, rejected = {}, {}
        for n in names:
            gn = sums.get(n)
            if gn is None:
                rejected[n] = "the layer could not be factored (it runs twice, its input layout is unsupported or samples interact)"
                continue
            exact = [self._block_hvp(n, probes[n][:, j]) for j in range(2)]
            g = self.grad[self.flat.block(n)]
            if not (all(agrees(gn.products[:, j], exact[j], rtol=1e-9) for j in range(2)) and agrees(gn.grad, g, rtol=1e-9)):
                rejected[n] = ("Σ J_nᵀΛ_nJ_n differs from exact Hessian-vector products: the network is not "
                               "piecewise linear above the layer, or samples interact")
            elif factor and gn.B is None:
                rejected[n] = "no per-sample factor Λ_n = C_nᵀC_n with e_n ∈ range(Λ_n)"
            elif factor and not (agrees(gn.B.T @ (gn.B @ probes[n][:, 0]), exact[0], rtol=1e-9) and agrees(gn.B.T @ gn.s, g, rtol=1e-9)):
                rejected[n] = "BᵀB w ≠ H w or Bᵀs ≠ g"
            else:
                accepted[n] = gn
        self._gn[key] = (accepted, rejected)
        return accepted, rejected

    def factors(self) -> dict[str, LinearFactors]:
        """Verified per-sample factors of the plain ``nn.Linear`` layers, keyed by module path."""
        if self._factors is None:
            self._factors = linear_factors(self.flat)
        return self._factors

    def dense(self, blocks: Iterable[str]) -> dict[str, BlockCurvature]:
        """``g_b``, ``H_bb w_b`` and dense ``H_bb`` for the named tensor blocks (cached)."""
        want = frozenset(blocks)
        for have, result in self._dense.items():
            if want <= have:
                return result
        partition = {n: [n] for n in self.flat.names}
        result = block_curvature(self.flat.objective, partition, set(want))
        self._dense[want] = result
        return result

    def small_blocks(self, max_dense: int) -> list[str]:
        return [n for n, s in zip(self.flat.names, self.flat.sizes) if s <= max_dense]

    def diagnosis(self, max_dense: int, pinv_rtol: float, inverse: bool = True,
                  krylov: tuple[str, int, float] = ("dense", 1000, 1e-7)) -> Diagnosis:
        """:func:`diagnose` once per settings; without ``inverse`` any cached run serves (D needs no H⁺).

        ``krylov`` is ``(method, krylov_max_iter, krylov_tol)``, part of the cache key."""
        if not inverse and self._diag:
            return next(iter(self._diag.values()))
        key = (max_dense if inverse else 0, pinv_rtol, krylov if inverse else ("dense", 1000, 1e-7))
        if key not in self._diag:
            method, max_iter, tol = key[2]
            self._diag[key] = diagnose(
                self.model, self.loss_fn, self.data, inverse=inverse, max_dense=max_dense if inverse else 0,
                pinv_rtol=pinv_rtol, allow_train_mode=self.allow_train_mode,
                method=method, krylov_max_iter=max_iter, krylov_tol=tol,
            )
        return self._diag[key]


def _context(model, loss_fn, data, options: dict) -> _Context:
    cache = options.pop("cache", None)
    allow = bool(options.pop("allow_train_mode", False))
    if cache is None:
        return _Context(model, loss_fn, data, allow)
    if not isinstance(cache, dict):
        raise InvalidInputError("cache must be a dict (one per model, loss and data)")
    ctx = cache.get("_context")
    if ctx is None:
        ctx = cache["_context"] = _Context(model, loss_fn, data, allow)
    return ctx


def _no_extra(name: str, options: dict) -> None:
    if options:
        raise InvalidInputError(f"measure {name!r} got unknown option(s): {', '.join(sorted(options))}")


# ---------------------------------------------------------------------------- Hessian spectrum


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
    ctx = _context(model, loss_fn, data, options)
    max_iter = int(options.pop("max_iter", 150))
    tol = float(options.pop("tol", 1e-9))
    seed = int(options.pop("seed", 0))
    _no_extra("top_eig", options)
    r = lanczos_top(ctx.flat.hvp, ctx.flat.n, max_iter=max_iter, tol=tol, seed=seed)
    return {"value": r.value, "residual": r.residual, "iterations": r.iterations, "converged": r.converged}


def _hutchinson_block(ctx: _Context, name: str, probes: int, seed: int) -> tuple[Tensor, Tensor]:
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


def _hessian_diagonal(ctx: _Context, max_dense: int, probes: int, seed: int) -> tuple[Tensor, float, list[str], list[str]]:
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
        dense = ctx.dense(small)
        for n in small:
            diag[ctx.flat.block(n)] = torch.diagonal(dense[n].dense)
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
    ctx = _context(model, loss_fn, data, options)
    max_dense = int(options.pop("max_dense", 4096))
    probes = int(options.pop("probes", 64))
    seed = int(options.pop("seed", 0))
    _no_extra(name, options)
    return ctx, _hessian_diagonal(ctx, max_dense, probes, seed)


def hessian_trace(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``tr ∇²L = Σ_i H_ii``: exact for ``nn.Linear`` tensors (per-sample factors
    ``Σ_n G_n[s,s] a_n[i]²``), for ``nn.Conv2d`` tensors whose per-sample Gauss–Newton form
    ``Σ_n J_nᵀΛ_nJ_n`` is verified against exact Hessian-vector products (diagonal
    ``Σ_n Σ_jk Λ_n[j,k] J_n[j,i] J_n[k,i]``, :mod:`kron`) and for other blocks of ≤ ``max_dense``
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
    layers = [m for m in net.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d))]
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
    ctx = _context(model, loss_fn, data, options)
    layer = int(options.pop("layer", -1))
    _no_extra("rel_flat", options)
    name = _weight_param_name(ctx.flat.net, layer)
    W = ctx.flat.objective.values[name]
    rows = W.shape[0]
    cols = W.numel() // rows
    path = name.rpartition(".")[0]
    if path in ctx.factors() and name.endswith(".weight"):
        traces = ctx.factors()[path].row_traces()
    else:
        H = ctx.dense([name])[name].dense.reshape(rows, cols, rows, cols)
        traces = torch.einsum("sjtj->st", H)
    Wf = W.reshape(rows, cols)
    return {"value": float(((Wf @ Wf.T) * traces).sum()), "tensor": name}


def fisher_rao_norm(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``E_n[(θᵀ∇_θ ℓ_n)²]`` over the samples (``ℓ_n`` the per-sample loss, ``reduction="none"``).

    Invariance: every linear symmetry ``θ -> Tθ`` of the per-sample losses (``θᵀ∇ℓ_n`` is
    unchanged: rescalings, permutations, BatchNorm scale, mixing in linear nets); moves under
    nonlinear maps and loss scaling (``s²``).

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(3.0)
    >>> fisher_rao_norm(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))["value"]
    324.0
    """
    ctx = _context(model, loss_fn, data, options)
    _no_extra("fisher_rao", options)
    r = ctx.flat.per_sample_directional(ctx.flat.theta0)
    return {"value": float((r * r).mean())}


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
    ctx = _context(model, loss_fn, data, options)
    delta = float(options.pop("delta", 1e-3))
    max_dense = int(options.pop("max_dense", 4096))
    _no_extra("laplace_logdet", options)
    small = ctx.small_blocks(max_dense)
    dense = ctx.dense(small) if small else {}
    blocks, signs = {}, {}
    for n in ctx.flat.names:
        if n not in small:
            blocks[n] = None
            continue
        H = dense[n].dense
        A = 0.5 * (H + H.T) + delta * torch.eye(H.shape[0], dtype=torch.float64)
        L, info = torch.linalg.cholesky_ex(A)
        if int(info) == 0:
            blocks[n], signs[n] = float(2.0 * torch.log(torch.diagonal(L)).sum()), 1.0
        else:
            sign, logabs = torch.linalg.slogdet(A)
            blocks[n], signs[n] = float(logabs), float(sign)
    total = sum(v for v in blocks.values() if v is not None)
    return {"blocks": blocks, "value": total, "signs": signs, "delta": delta}


# ---------------------------------------------------------------------------- sharpness


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
    ctx = _context(model, loss_fn, data, options)
    kw = {k: options.pop(k) for k in ("rho", "steps", "lr", "restarts", "seed") if k in options}
    _no_extra("sam", options)
    r = sam_sharpness(ctx.flat.loss, ctx.flat.theta0, **kw)
    return {"value": r.value, "radius": r.radius, "steps": r.steps}


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
    ctx = _context(model, loss_fn, data, options)
    kw = {k: options.pop(k) for k in ("rho", "steps", "lr") if k in options}
    _no_extra("adaptive_worst", options)
    r = adaptive_worst(ctx.flat.loss, ctx.flat.theta0, **kw)
    return {"value": r.value, "radius": r.radius, "steps": r.steps}


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
    ctx = _context(model, loss_fn, data, options)
    kw = {k: options.pop(k) for k in ("rho", "samples", "seed") if k in options}
    _no_extra("adaptive_avg", options)
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
    kw = {k: options.pop(k) for k in ("orders", "points", "near_boundary", "seed") if k in options}
    _no_extra("lambda", options)
    r = _curvature_rate(model, loss_fn, data, allow_train_mode=allow, **kw)
    return {"value": r.value, "points": r.points, "orders": r.orders}


# ---------------------------------------------------------------------------- the package's own


def _diag_blocks(model, loss_fn, data, options, name: str, pick: Callable, default_dense: int) -> dict:
    ctx = _context(model, loss_fn, data, options)
    max_dense = int(options.pop("max_dense", default_dense))
    rtol = float(options.pop("pinv_rtol", 1e-10))
    krylov = ("dense", 1000, 1e-7)
    if name not in ("D", "rho"):
        krylov = (options.pop("method", "dense"), options.pop("krylov_max_iter", 1000), options.pop("krylov_tol", 1e-7))
    _no_extra(name, options)
    d = ctx.diagnosis(max_dense, rtol, inverse=name not in ("D", "rho"), krylov=krylov)
    blocks, degenerate, notes, conditioning = {}, [], [], {}
    for b in d:
        if name != "Dplus" and b.scale_invariant:  # D⁺ stays defined there (T7)
            blocks[b.name] = None
            degenerate.append(b.name)
            continue
        blocks[b.name] = pick(b)
        if name not in ("D", "rho") and b.min_kept_rel_eig is not None:
            conditioning[b.name] = 1.0 / b.min_kept_rel_eig
        notes.extend(f"{b.name}: {n}" for n in b.notes)
    out = {"blocks": blocks, "degenerate": degenerate, "notes": notes, "max_dense": max_dense}
    if name not in ("D", "rho"):
        out["conditioning"] = conditioning
        out["method"] = krylov[0]
        out["krylov"] = {b.name: {"iterations": b.krylov_iterations, "converged": b.krylov_converged,
                                  "error": b.krylov_error} for b in d if b.method == "krylov"}
    return out


def coupled(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``D_b = (wᵀHw/wᵀw)/‖g‖²`` per tensor block (:func:`diagnose`).

    Options: ``max_dense``, ``pinv_rtol`` only select which cached :func:`diagnose` run to share.
    Invariance: block-conformal symmetries (T3, T4: layer rescaling, permutations, orthogonal
    mixing); moves under non-conformal ones (neuron-wise T5, general mixing T4), nonlinear maps (T6)
    and loss scaling (``D/s``, T12). Degenerate (``None``) on scale-invariant blocks (T10).

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> r = coupled(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 2)))
    >>> sorted(r["blocks"])
    ['0.bias', '0.weight']
    """
    return _diag_blocks(model, loss_fn, data, options, "D", lambda b: b.coupled, 0)


def inverse_coupled(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``D⁺_b = (wᵀH⁺w/wᵀw)·‖g‖²`` (relative cutoff ``pinv_rtol``) for blocks ≤ ``max_dense`` (default 4096).

    Options: ``max_dense``, ``pinv_rtol``, and :func:`diagnose`'s ``method`` (``"dense"``,
    ``"krylov"``, ``"auto"``), ``krylov_max_iter``, ``krylov_tol``; Krylov blocks are listed under
    ``krylov`` with their iteration count, convergence flag and error estimate.
    Invariance: block-conformal symmetries (T7), also on scale-invariant blocks; moves under
    non-conformal ones, nonlinear maps and loss scaling (``sD⁺``, T12).

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> r = inverse_coupled(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 2)), method="krylov")
    >>> r["method"], r["krylov"]["0.bias"]["converged"]
    ('krylov', True)
    >>> r = inverse_coupled(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 2)))
    >>> r["blocks"]["0.bias"] > 0
    True
    """
    return _diag_blocks(model, loss_fn, data, options, "Dplus", lambda b: b.inverse_coupled, 4096)


def coupled_product(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``D·D⁺ = (wᵀHw)(wᵀH⁺w)/(wᵀw)²`` per block: invariant under loss scaling (T12) and
    block-conformal symmetries; degenerate where ``D`` is (T10).

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> r = coupled_product(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 2)))
    >>> r["blocks"]["0.bias"] > 0
    True
    """
    def pick(b):
        return None if b.coupled is None or b.inverse_coupled is None else b.coupled * b.inverse_coupled

    return _diag_blocks(model, loss_fn, data, options, "D*D+", pick, 4096)


def radial_ratio(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """``ρ_b = wᵀHw/(wᵀg)²`` per block (T11): invariant under every block-diagonal linear symmetry
    (including neuron-wise scaling and general mixing); ``ρ -> ρ/s`` under loss scaling (T12);
    undefined on scale-invariant blocks (T10).

    >>> net = nn.Sequential(nn.Linear(2, 2))
    >>> r = radial_ratio(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 2)))
    >>> r["blocks"]["0.weight"] is not None
    True
    """
    return _diag_blocks(model, loss_fn, data, options, "rho", lambda b: b.radial_ratio, 0)


def newton_decrement(model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Block Newton decrement ``g_bᵀ H_bb⁺ g_b`` for blocks ≤ ``max_dense`` (default 4096).

    **Factor route** (``nn.Linear``/``nn.Conv2d`` tensors whose per-sample Gauss–Newton factor is
    verified, :meth:`_Context.gauss_newton`): ``H_bb = BᵀB`` and ``g_b = Bᵀs`` with ``B`` stacking
    ``C_nJ_n`` and ``s`` stacking ``s_n`` (``Λ_n = C_nᵀC_n``, ``e_n = C_nᵀs_n``), so ``g_b ∈ range(H_bb)``
    and ``gᵀH⁺g = sᵀB(BᵀB)⁺Bᵀs = ‖P_range(B) s‖² = ‖Bx‖²``, ``x`` the least-squares solution of
    ``Bx ≈ s`` (SVD solver): the Newton step in square-root form. Singular values of ``B`` below
    ``factor_rcond·σ_max`` (default ``2⁻²⁶ = √ε₆₄``, i.e. Hessian eigenvalues below ``ε₆₄·λ_max``,
    which a float64 Hessian does not resolve) count as zero; a direction dropped or kept there
    changes the value by its share ``(u_iᵀs)²`` only, never by ``(u_iᵀg)²/λ_i`` (``rank_gap`` is
    ``σ_r/σ_{r+1}`` at the cut). Round-off is governed by the least-squares sensitivity
    ``κ_LS = 1 + 2‖B‖‖x‖‖s − Bx‖/‖Bx‖²`` (relative error ≲ ``ε₆₄·κ_LS``), not by ``κ(H_bb)``.
    **Pseudo-inverse route** (every other block, or ``route="pinv"``, or when ``R·n·min(R, n)``
    exceeds ``factor_flops``): ``Σ_{|λ_i|>τ}(u_iᵀg)²/λ_i`` with ``τ = pinv_rtol·max|λ|``.

    Invariance (T11): under a block map ``w -> Aw`` (``g -> A⁻ᵀg``, ``H -> A⁻ᵀHA⁻¹``) the exact value
    is unchanged when ``H`` is invertible or ``g ∈ range(H)`` (``g = Hx`` gives ``g' = H'(Ax)`` and
    ``gᵀH⁺g = xᵀHx``); the factor route keeps it exactly (``B -> BA⁻¹`` has the same range, ``s``
    depends on the outputs only). The pseudo-inverse route is invariant only under conformal ``A``:
    for non-conformal ``A`` the eigenvalues move non-uniformly (by up to ``κ(A)²``), so genuine
    eigenvalues near ``τ`` cross it and their terms ``(u_iᵀg)²/λ_i`` are dropped on one side only.
    ``s·`` under loss scaling; moves under nonlinear maps. Degenerate (``None``, in
    ``degenerate``) on scale-invariant blocks (T10, ``|wᵀg| ≤ 1e-12‖w‖‖g‖``): there
    ``H_bb w = −g``, so ``gᵀH⁺g = wᵀHw = −wᵀg = 0`` and only round-off is left to compare.

    Options: ``max_dense``, ``pinv_rtol=1e-10``, ``route="auto"|"pinv"``, ``factor_flops=2e10``,
    ``factor_rcond=2**-26``. Returns per-block ``blocks``, ``routes``, ``conditioning`` (``κ_LS``, or
    ``max|λ|/min kept |λ|``), ``rank``, ``rank_gap``, ``degenerate``, ``notes``.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(3.0)
    >>> r = newton_decrement(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)))
    >>> round(r["blocks"]["0.weight"], 12), r["routes"]["0.weight"]  # L = w²: g²/H = 36/2
    (18.0, 'factor')
    """
    ctx = _context(model, loss_fn, data, options)
    max_dense = int(options.pop("max_dense", 4096))
    rtol = float(options.pop("pinv_rtol", 1e-10))
    route = str(options.pop("route", "auto"))
    budget = float(options.pop("factor_flops", 2e10))
    factor_rcond = float(options.pop("factor_rcond", 2.0**-26))
    _no_extra("newton", options)
    if route not in ("auto", "pinv"):
        raise InvalidInputError(f"route={route!r}; use 'auto' (factor route where verified) or 'pinv'")
    small = ctx.small_blocks(max_dense)
    blocks: dict[str, float | None] = {n: None for n in ctx.flat.names}
    degenerate, conditioning, routes, ranks, gaps, notes = [], {}, {}, {}, {}, []
    live = []
    for n in small:
        w, g = ctx.flat.theta0[ctx.flat.block(n)], ctx.grad[ctx.flat.block(n)]
        w_sq, g_sq = float(w @ w), float(g @ g)
        if w_sq > 0.0 and g_sq > 0.0 and abs(float(w @ g)) <= 1e-12 * math.sqrt(w_sq * g_sq):
            degenerate.append(n)
        else:
            live.append(n)
    factored: dict[str, GaussNewton] = {}
    if route == "auto" and live:
        factored, rejected = ctx.gauss_newton(live, factor=True)
        notes += [f"{n}: factor route rejected ({why}); pseudo-inverse route" for n, why in rejected.items()]
        for n in list(factored):
            R, m = factored[n].B.shape
            if R * m * min(R, m) > budget:
                notes.append(f"{n}: factor route skipped (B is {R}×{m}, above factor_flops={budget:g}); pseudo-inverse route")
                del factored[n]
    for n, gn in factored.items():
        if gn.B.shape[0] == 0 or not bool(gn.s.any()):
            blocks[n], routes[n], ranks[n] = 0.0, "factor", 0
            continue
        sol = torch.linalg.lstsq(gn.B, gn.s.unsqueeze(1), rcond=factor_rcond, driver="gelsd")
        x = sol.solution[:, 0]
        Bx = gn.B @ x
        value = float(Bx @ Bx)
        rank, sv = int(sol.rank), sol.singular_values
        blocks[n], routes[n], ranks[n] = value, "factor", rank
        if 0 < rank < sv.numel():
            gaps[n] = float(sv[rank - 1] / sv[rank]) if float(sv[rank]) > 0.0 else math.inf
        if value > 0.0:  # least-squares sensitivity: |δv| ≤ 2‖δB‖‖x‖‖s − Bx‖, ‖δB‖ ≈ ε₆₄‖B‖
            resid = float((gn.s - Bx).norm())
            conditioning[n] = 1.0 + 2.0 * float(sol.singular_values[0]) * float(x.norm()) * resid / value
    rest = [n for n in live if n not in factored]
    dense = ctx.dense(rest) if rest else {}
    for n in rest:
        form = pinv_quadratic_form(dense[n].dense, dense[n].grad, rtol)
        blocks[n], routes[n], ranks[n] = form.value, "pinv", form.rank
        if form.min_kept_rel_eig is not None:
            conditioning[n] = 1.0 / form.min_kept_rel_eig
    return {"blocks": blocks, "degenerate": degenerate, "conditioning": conditioning, "routes": routes,
            "rank": ranks, "rank_gap": gaps, "notes": notes, "max_dense": max_dense}


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
    """Resolve ``"all"``, a comma-separated string or a list into registry names, in registry order.

    >>> select("D,trace")
    ['trace', 'D']
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    if not names or "all" in names:
        return list(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise InvalidInputError(
            f"unknown measure(s): {', '.join(unknown)}; available: all, {', '.join(REGISTRY)}"
        )
    return [n for n in REGISTRY if n in names]


def evaluate(name: str, model: nn.Module, loss_fn: Callable, data: object, **options) -> dict:
    """Run one registered measure by name."""
    return REGISTRY[select([name])[0]].func(model, loss_fn, data, **options)
