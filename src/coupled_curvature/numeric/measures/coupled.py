"""The package's own per-block measures: ``D``, ``D⁺``, ``D·D⁺``, the radial ratio ``ρ`` and the
block Newton decrement ``gᵀH⁺g``. One signature ``(model, loss_fn, data, **options)`` (see
:mod:`~coupled_curvature.numeric.measures.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.tolerance import looks_scale_invariant
from coupled_curvature.numeric.core.options import check_pinv_rtol
from coupled_curvature.numeric.factors.gauss_newton import GaussNewton
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form
from coupled_curvature.numeric.measures.context import measure_context, refuse_unknown_options
from coupled_curvature.base.run_settings import DEFAULTS

__all__ = ["coupled", "coupled_product", "inverse_coupled", "newton_decrement", "radial_ratio"]


def _diag_blocks(model, loss_fn, data, options, name: str, pick: Callable, default_dense: int) -> dict:
    ctx = measure_context(model, loss_fn, data, options)
    inverse = name not in ("D", "rho")
    routes_of_hplus = ("method", "krylov_max_iter", "krylov_tol", "gram_memory")  # D needs no H⁺: refused for D, ρ
    run = {k: options.pop(k) for k in list(options)
           if k in DEFAULTS and k != "inverse" and (inverse or k not in routes_of_hplus)}
    run.setdefault("max_dense", default_dense)
    refuse_unknown_options(name, options)
    d = ctx.diagnosis({**run, "inverse": inverse})
    max_dense, method = d.meta["max_dense"], run.get("method") or DEFAULTS["method"]
    blocks: dict[str, float | None] = {}
    degenerate: list[str] = []
    notes: list[str] = []
    conditioning: dict[str, float] = {}
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
        out["method"] = method
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
    verified, :meth:`MeasureContext.gauss_newton`): ``H_bb = BᵀB`` and ``g_b = Bᵀs`` with ``B`` stacking
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
    ctx = measure_context(model, loss_fn, data, options)
    max_dense = int(options.pop("max_dense", 4096))
    rtol = check_pinv_rtol(options.pop("pinv_rtol", 1e-10))
    route = str(options.pop("route", "auto"))
    budget = float(options.pop("factor_flops", 2e10))
    factor_rcond = float(options.pop("factor_rcond", 2.0**-26))
    refuse_unknown_options("newton", options)
    if route not in ("auto", "pinv"):
        raise InvalidInputError(f"route={route!r}; use 'auto' (factor route where verified) or 'pinv'")
    small = ctx.small_blocks(max_dense)
    blocks: dict[str, float | None] = {n: None for n in ctx.flat.names}
    degenerate, conditioning, routes, ranks, gaps, notes = [], {}, {}, {}, {}, []
    live = []
    for n in small:
        w, g = ctx.flat.theta0[ctx.flat.block(n)], ctx.grad[ctx.flat.block(n)]
        w_sq, g_sq = float(w @ w), float(g @ g)
        if looks_scale_invariant(float(w @ g), w_sq, g_sq):
            degenerate.append(n)
        else:
            live.append(n)
    factored: dict[str, GaussNewton] = {}
    if route == "auto" and live:
        factored, rejected = ctx.gauss_newton(live, factor=True)
        notes += [f"{n}: factor route rejected ({why}); pseudo-inverse route" for n, why in rejected.items()]
        for n in list(factored):
            R, m = factored[n].factor()[0].shape
            if R * m * min(R, m) > budget:
                notes.append(f"{n}: factor route skipped (B is {R}×{m}, above factor_flops={budget:g}); pseudo-inverse route")
                del factored[n]
    for n, gn in factored.items():
        B, s = gn.factor()
        if B.shape[0] == 0 or not bool(s.any()):
            blocks[n], routes[n], ranks[n] = 0.0, "factor", 0
            continue
        sol = torch.linalg.lstsq(B, s.unsqueeze(1), rcond=factor_rcond, driver="gelsd")
        x = sol.solution[:, 0]
        Bx = B @ x
        value = float(Bx @ Bx)
        rank, sv = int(sol.rank), sol.singular_values
        blocks[n], routes[n], ranks[n] = value, "factor", rank
        if 0 < rank < sv.numel():
            gaps[n] = float(sv[rank - 1] / sv[rank]) if float(sv[rank]) > 0.0 else math.inf
        if value > 0.0:  # least-squares sensitivity: |δv| ≤ 2‖δB‖‖x‖‖s − Bx‖, ‖δB‖ ≈ ε₆₄‖B‖
            resid = float((s - Bx).norm())
            conditioning[n] = 1.0 + 2.0 * float(sol.singular_values[0]) * float(x.norm()) * resid / value
    rest = [n for n in live if n not in factored]
    dense = ctx.dense(rest) if rest else {}
    hessians = ctx.dense_hessians(rest) if rest else {}
    for n in rest:
        form = pinv_quadratic_form(hessians[n], dense[n].grad, rtol)
        blocks[n], routes[n], ranks[n] = form.value, "pinv", form.rank
        if form.value is None:
            exact = form.exact
            assert exact is not None, "a value that does not fit float64 comes as a Scaled"
            notes.append(f"{n}: gᵀH⁺g ≈ 1e{exact.log10:.0f} does not fit float64 (the block's scale is too "
                         "extreme): left undefined (None)")
        if form.min_kept_rel_eig is not None:
            conditioning[n] = 1.0 / form.min_kept_rel_eig
    return {"blocks": blocks, "degenerate": degenerate, "conditioning": conditioning, "routes": routes,
            "rank": ranks, "rank_gap": gaps, "notes": notes, "max_dense": max_dense}
