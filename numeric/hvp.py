"""Per-block gradients, Hessian quadratic forms and dense Hessian blocks, from one graph per batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from coupled_curvature.numeric.kron import linear_block_hessians, linear_module_of
from coupled_curvature.numeric.objective import Objective

_COLUMN_CHUNK = 256


@dataclass
class BlockCurvature:
    """Sums over the data of ``g_b`` (flat), ``H_bb w_b`` (flat) and optionally dense ``H_bb``."""

    grad: Tensor
    Hw: Tensor
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
    objective: Objective, partition: dict[str, list[str]], dense_blocks: set[str]
) -> dict[str, BlockCurvature]:
    """For every block ``b``: ``g_b``, ``H_bb w_b`` and, for names in ``dense_blocks``, ``H_bb``.

    Per batch the model graph is built once and differentiated once with
    ``create_graph=True``; every block's Hessian-vector product is a backward pass
    through that retained graph restricted to the block (the diagonal block ``H_bb``).
    Dense blocks of ``nn.Linear`` layers come from the exact per-sample Kronecker form
    (:mod:`kron`), accepted only if ``H_bb w`` matches the Hessian-vector product to
    ``1e-9`` relative; other dense blocks are assembled column by column from the
    retained graph, in vmapped chunks.
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
            if dense is not None and not _agrees(dense @ torch.cat([t.reshape(-1) for t in w]), Hw):
                _note(entry, "per-sample Kronecker block disagreed with the Hessian-vector product "
                      "(samples coupled?); assembled from Hessian-vector products instead")
                dense = None
            elif dense is None and block in kron_requests:
                _note(entry, "layer input is not 2-D or the layer runs more than once; dense block "
                      "assembled from Hessian-vector products")
            if dense is None:
                dense = _dense_block(grads, leaves, members)
            entry.dense = dense if entry.dense is None else entry.dense + dense
        del leaves, grads
    return acc


def _agrees(a: Tensor, b: Tensor, rtol: float = 1e-9) -> bool:
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-300)
    return float((a - b).abs().max()) <= rtol * scale


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
