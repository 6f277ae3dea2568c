"""Exact dense Hessian blocks of ``nn.Linear`` layers from per-sample Kronecker factors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.objective import Objective


def linear_module_of(model: nn.Module, members: Sequence[str]) -> str | None:
    """The path of the ``nn.Linear`` whose ``weight``/``bias`` make up ``members``, else ``None``."""
    prefixes = {m.rpartition(".")[0] for m in members}
    attrs = [m.rpartition(".")[2] for m in members]
    if len(prefixes) != 1 or len(set(attrs)) != len(attrs) or not set(attrs) <= {"weight", "bias"}:
        return None
    path = prefixes.pop()
    try:
        module = model.get_submodule(path)
    except AttributeError:
        return None
    return path if type(module) is nn.Linear else None


def per_sample_factors(
    objective: Objective, batch: int, paths: Iterable[str], params: dict[str, Tensor] | None = None
) -> dict[str, tuple[Tensor, Tensor]]:
    """``(G, A)`` per ``nn.Linear`` path: inputs ``A[n] = a_n`` and ``G[n] = ∂²L/∂z_n²`` for ``z_n = W a_n + b``.

    One forward pass with a zero shift ``δ`` added to each layer's output, then ``out``
    batched Hessian-vector products in ``δ`` (cross-sample blocks of ``∂²L/∂δ²`` vanish when
    the loss is a sum of per-sample terms, so each product yields one column of every
    ``G_n``). Layers that see non-2-D inputs or run more than once are left out.
    """
    model = objective.model
    seen: dict[str, list[Tensor]] = {path: [] for path in paths}
    shifts: dict[str, Tensor] = {}

    def hook(path: str):
        def add_shift(module, inputs, output):
            seen[path].append(inputs[0].detach())
            if output.dim() != 2 or len(seen[path]) > 1:
                return None
            shifts[path] = torch.zeros_like(output, requires_grad=True)
            return output + shifts[path]

        return add_shift

    handles = [model.get_submodule(p).register_forward_hook(hook(p)) for p in seen]
    try:
        loss = objective.batch_loss(batch, objective.values if params is None else params)
    finally:
        for h in handles:
            h.remove()
    usable = [p for p in seen if len(seen[p]) == 1 and p in shifts]
    if not usable:
        return {}
    grads = torch.autograd.grad(loss, [shifts[p] for p in usable], create_graph=True, allow_unused=True)
    out_factors: dict[str, tuple[Tensor, Tensor]] = {}
    for p, g in zip(usable, grads):
        n, out = shifts[p].shape
        if g is None or not g.requires_grad:  # loss linear in this layer's output
            G = torch.zeros(n, out, out, dtype=torch.float64)
        else:
            cot = torch.eye(out, dtype=torch.float64).unsqueeze(1).expand(out, n, out)
            cols = torch.autograd.grad(g, shifts[p], grad_outputs=cot, retain_graph=True, is_grads_batched=True)[0]
            G = cols.permute(1, 2, 0)  # G[n, a, b]
        out_factors[p] = (G, seen[p][0])
    return out_factors


def linear_block_hessians(
    objective: Objective, batch: int, requests: dict[str, tuple[str, list[str]]]
) -> dict[str, Tensor]:
    """Dense ``H_bb`` for blocks made of one ``nn.Linear``'s weight and/or bias.

    With ``z_n = W a_n + b`` for sample ``n`` and ``G_n = ∂²L/∂z_n²``, exactly
    ``∂²L/∂W_{ai}∂W_{bj} = Σ_n G_n[a,b] a_n[i] a_n[j]`` and ``∂²L/∂b∂b = Σ_n G_n``, when the
    loss is a sum of per-sample terms (no coupling between samples; the caller verifies
    ``H_bb w`` against a Hessian-vector product). Blocks whose layer is left out by
    :func:`per_sample_factors` are left out of the result (the caller falls back).
    """
    factors = per_sample_factors(objective, batch, {path for path, _ in requests.values()})
    return {
        block: _assemble(*factors[path], members)
        for block, (path, members) in requests.items()
        if path in factors
    }


def _assemble(G: Tensor, A: Tensor, members: list[str]) -> Tensor:
    """``Σ_n G_n ⊗ ã_n ã_nᵀ`` over the block's coordinates, ``ã = a``, ``[a, 1]`` or ``1``."""
    attrs = [m.rpartition(".")[2] for m in members]
    if attrs == ["bias"]:
        return G.sum(dim=0)
    n, out = G.shape[0], G.shape[1]
    with_bias = "bias" in attrs
    At = torch.cat([A, torch.ones(n, 1, dtype=A.dtype)], dim=1) if with_bias else A
    k = At.shape[1]
    outer = (At.unsqueeze(2) * At.unsqueeze(1)).reshape(n, k * k)
    H = (G.reshape(n, out * out).T @ outer).reshape(out, out, k, k)
    H = H.permute(0, 2, 1, 3).reshape(out * k, out * k)
    if not with_bias:
        return H
    grid = torch.arange(out * k).reshape(out, k)
    index = {"weight": grid[:, : k - 1].reshape(-1), "bias": grid[:, k - 1]}
    idx = torch.cat([index[a] for a in attrs])
    return H[idx][:, idx]
