"""Per-block gradients, Hessian quadratic forms and dense Hessian blocks, from one graph per batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from coupled_curvature.numeric.core.compare import agrees
from coupled_curvature.numeric.factors.gauss_newton import linear_block_hessians
from coupled_curvature.numeric.factors.layers import linear_module_of
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm, LanczosRun
from coupled_curvature.numeric.core.objective import Objective

_COLUMN_CHUNK = 256


@dataclass
class BlockCurvature:
    """Sums over the data of ``g_b`` (flat), ``H_bb w_b`` (flat) and optionally dense ``H_bb``.

    ``Hw`` is ``None`` where :func:`diagnose` took the tangent route (only ``wᵀH_bb w`` is known)."""

    grad: Tensor
    Hw: Tensor | None
    dense: Tensor | None
    notes: list[str] = field(default_factory=list)


def _block_vjp(
    grads: dict[str, Tensor],
    leaves: dict[str, Tensor],
    members: Sequence[str],
    cotangents: Sequence[Tensor],
    batched: bool,
) -> list[Tensor]:
    """``(∂g_b/∂θ_b)ᵀ v = H_bb v`` for cotangent(s) ``v`` on the block's own gradient outputs."""
    live = [i for i, m in enumerate(members) if grads[m].requires_grad]
    shape0 = (cotangents[0].shape[0],) if batched else ()
    out = [torch.zeros(shape0 + leaves[m].shape, dtype=leaves[m].dtype) for m in members]
    if not live:  # the loss is at most linear in this block: H_bb = 0
        return out
    res = torch.autograd.grad(
        [grads[members[i]] for i in live],
        [leaves[m] for m in members],
        grad_outputs=[cotangents[i] for i in live],
        retain_graph=True,
        allow_unused=True,
        is_grads_batched=batched,
    )
    return [o if r is None else r for o, r in zip(out, res)]


def block_curvature(
    objective: Objective,
    partition: dict[str, list[str]],
    dense_blocks: set[str],
    retain: list | None = None,
) -> dict[str, BlockCurvature]:
    """For every block ``b``: ``g_b``, ``H_bb w_b`` and, for names in ``dense_blocks``, ``H_bb``.

    Per batch the model graph is built once and differentiated once with
    ``create_graph=True``; every block's Hessian-vector product is a backward pass
    through that retained graph restricted to the block (the diagonal block ``H_bb``).
    Dense blocks of ``nn.Linear`` and ``nn.Conv2d`` (groups=1) layers come from per-sample
    factors (:func:`linear_block_hessians`: the exact Kronecker form for Linear on 2-D inputs, the Gauss–Newton
    form ``Σ_n J_nᵀΛ_nJ_n`` otherwise), accepted only if ``H_bb w`` matches the Hessian-vector product to
    ``1e-9`` relative; other dense blocks are assembled column by column from the
    retained graph, in vmapped chunks. When ``retain`` is a list, every batch's
    ``(leaves, grads)`` graph is appended to it for later products (:func:`block_krylov`).
    """
    kron_requests = {}
    for block in dense_blocks:
        path = linear_module_of(objective.model, partition[block])
        if path is not None:
            kron_requests[block] = (path, partition[block])
    acc: dict[str, BlockCurvature] = {}
    for i, (leaves, grads) in enumerate(objective.graphs()):
        kron = linear_block_hessians(objective, i, kron_requests) if kron_requests else {}
        for block, members in partition.items():
            w = [objective.values[m] for m in members]
            g = torch.cat([grads[m].detach().reshape(-1) for m in members])
            Hw = torch.cat([t.reshape(-1) for t in _block_vjp(grads, leaves, members, w, False)])
            entry = acc.setdefault(block, BlockCurvature(torch.zeros_like(g), torch.zeros_like(Hw), None))
            entry.grad += g
            entry.Hw += Hw
            if block not in dense_blocks:
                continue
            dense = kron.get(block)
            if dense is not None and not agrees(dense @ torch.cat([t.reshape(-1) for t in w]), Hw, rtol=1e-9):
                _note(entry, "per-sample factored block disagreed with the Hessian-vector product (samples "
                      "coupled, or a Conv/sequence layer with a network not piecewise linear above it); "
                      "assembled from Hessian-vector products instead")
                dense = None
            elif dense is None and block in kron_requests:
                _note(entry, "no per-sample factor (the loss couples samples, its output Hessian is indefinite "
                      "or the model has too many outputs); dense block "
                      "assembled from Hessian-vector products")
            if dense is None:
                dense = _dense_block(grads, leaves, members)
            entry.dense = dense if entry.dense is None else entry.dense + dense
        if retain is not None:
            retain.append((leaves, grads))
        del leaves, grads
    return acc


def block_krylov(
    objective: Objective,
    partition: dict[str, list[str]],
    curv: dict[str, BlockCurvature],
    blocks: Iterable[str],
    *,
    rtol: float,
    max_iter: int,
    tol: float,
    graphs: Sequence[tuple[dict[str, Tensor], dict[str, Tensor]]] | None = None,
    reduce: Callable[[Tensor], Tensor] | None = None,
) -> dict[str, KrylovForm]:
    """``wᵀH_bb⁺w`` by Lanczos quadrature (:mod:`krylov`) for each of ``blocks``.

    All runs advance in lockstep: one pass over the batches per Lanczos step computes
    ``H_bb q_b = Σ_batches ∂(g_bᵀq_b)/∂w_b`` for every unfinished block, on ``graphs``
    (retained by :func:`block_curvature`) or, when ``None``, on graphs rebuilt per step.
    The first step of each ``w`` run reuses ``curv[b].Hw``. ``reduce`` (e.g. a sum over data-parallel
    ranks) is applied to every summed product before Lanczos sees it.
    """
    runs: dict[str, LanczosRun] = {}
    for block in blocks:
        members = partition[block]
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        runs[block] = LanczosRun(w, rtol=rtol, max_iter=max_iter, tol=tol, Hw=curv[block].Hw)
    while True:
        active = [b for b, r in runs.items() if r.vector is not None]
        if not active:
            break
        sums = {b: torch.zeros(runs[b].n, dtype=torch.float64) for b in active}
        for leaves, grads in graphs if graphs is not None else objective.graphs():
            for b in active:
                members = partition[b]
                sizes = [leaves[m].numel() for m in members]
                cot = [p.reshape(leaves[m].shape) for p, m in zip(torch.split(runs[b].vector, sizes), members)]
                sums[b] += torch.cat([t.reshape(-1) for t in _block_vjp(grads, leaves, members, cot, False)])
        for b in active:
            runs[b].feed(sums[b] if reduce is None else reduce(sums[b]))
    return {b: r.result() for b, r in runs.items()}


def _note(entry: BlockCurvature, text: str) -> None:
    if text not in entry.notes:
        entry.notes.append(text)


def _dense_block(grads: dict[str, Tensor], leaves: dict[str, Tensor], members: Sequence[str]) -> Tensor:
    sizes = [leaves[m].numel() for m in members]
    n = sum(sizes)
    H = torch.empty(n, n, dtype=torch.float64)
    for start in range(0, n, _COLUMN_CHUNK):
        stop = min(n, start + _COLUMN_CHUNK)
        eye = torch.zeros(stop - start, n, dtype=torch.float64)
        eye[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        parts = torch.split(eye, sizes, dim=1)
        cot = [p.reshape((stop - start,) + leaves[m].shape) for p, m in zip(parts, members)]
        cols = _block_vjp(grads, leaves, members, cot, True)
        H[start:stop] = torch.cat([c.reshape(stop - start, -1) for c in cols], dim=1)
    return H
