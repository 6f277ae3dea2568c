"""``wᵀH_bb w`` of every single-layer block of a Linear/(leaky) ReLU ``Sequential`` in one forward pass.

Such a net is linear in each layer's parameters for a fixed activation pattern, so the diagonal
block of one layer is its Gauss–Newton block: ``w_bᵀH_bb w_b = Σ_batches t_bᵀ ∇²_f ℓ t_b`` with
``t_b = J_b w_b`` the output tangent of the block's own direction. For a Linear layer ``z = Wa + b``
the weight's tangent at ``z`` is ``Wa = z − b`` and the bias's is ``b``; both are pushed forward
through the layers above (ReLU masks, weight products) together, one stacked matrix product per
layer. ``∇²_f ℓ`` acts on all tangents at once through one batched double backward on the loss
alone, so any twice-differentiable loss of ``(outputs, targets)`` works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.inputs import Batch, checked_loss

_ACTIVATIONS = (nn.ReLU, nn.LeakyReLU, nn.Identity)


def single_layer_blocks(model: nn.Module, partition: Mapping[str, Sequence[str]]) -> dict[str, tuple[int, list[str]]] | None:
    """``{block: (layer index, members)}`` when ``model`` is a ``Sequential`` of Linear and (leaky)
    ReLU layers and every block holds parameters of one Linear only; otherwise ``None``.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> single_layer_blocks(net, {"a": ["0.weight", "0.bias"], "b": ["2.weight"], "c": ["2.bias"]})
    {'a': (0, ['0.weight', '0.bias']), 'b': (2, ['2.weight']), 'c': (2, ['2.bias'])}
    >>> single_layer_blocks(net, {"all": ["0.weight", "2.weight"]}) is None  # two layers: cross terms
    True
    """
    if not isinstance(model, nn.Sequential) or any(type(m) not in (nn.Linear, *_ACTIVATIONS) for m in model):
        return None  # exact types: a subclass may change the forward
    out = {}
    for block, members in partition.items():
        layers = {m.rpartition(".")[0] for m in members}
        if len(layers) != 1:
            return None
        (layer,) = layers
        if not layer.isdigit() or not isinstance(model[int(layer)], nn.Linear):
            return None
        out[block] = (int(layer), list(members))
    return out


def block_quadratic_forms(
    model: nn.Sequential,
    loss_fn,
    batches: Sequence[Batch],
    blocks: Mapping[str, tuple[int, Sequence[str]]],
) -> tuple[dict[str, float], dict[str, Tensor], float]:
    """``({block: w_bᵀH_bb w_b}, {param: ∇L}, L)`` for ``L = Σ_batches weight·loss_fn(model(X), y)``.

    ``blocks`` comes from :func:`single_layer_blocks`. Gradients come from one ordinary backward
    pass per batch; the quadratic forms from the tangent pass described in the module docstring.

    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1])
    >>> blocks = single_layer_blocks(net, {"0.weight": ["0.weight"], "2.bias": ["2.bias"]})
    >>> q, g, L = block_quadratic_forms(net, nn.CrossEntropyLoss(), [Batch(X, y, 1.0)], blocks)
    >>> w = net[0].weight.detach().reshape(-1)
    >>> f = lambda v: nn.CrossEntropyLoss()(net[2](torch.relu(X @ v.reshape(4, 3).T + net[0].bias)), y)
    >>> abs(q["0.weight"] - float(w @ torch.autograd.functional.hessian(f, w) @ w)) < 1e-12
    True
    """
    params = dict(model.named_parameters())
    by_layer: dict[int, list[tuple[str, str]]] = {}
    for block, (layer, members) in blocks.items():
        for m in members:
            by_layer.setdefault(layer, []).append((block, m.rpartition(".")[2]))
    forms = {b: 0.0 for b in blocks}
    grads = {n: torch.zeros_like(p) for n, p in params.items()}
    total = 0.0
    for i, batch in enumerate(batches):
        leaves = {n: p.detach().requires_grad_(True) for n, p in params.items()}
        h, T, names = batch.X, None, []  # T: (tangents, N, width), one per block in `names`, never in the graph
        for idx, module in enumerate(model):  # the forward pass of the loss, with the tangents alongside
            if isinstance(module, nn.Linear):
                weight = leaves[f"{idx}.weight"]
                z = h @ weight.T
                if T is not None:
                    T = T @ weight.detach().T
                new: dict[str, Tensor] = {}
                for block, kind in by_layer.get(idx, []):
                    t = z.detach() if kind == "weight" else leaves[f"{idx}.bias"].detach().expand_as(z)
                    new[block] = new[block] + t if block in new else t
                if module.bias is not None:
                    z = z + leaves[f"{idx}.bias"]
                if new:
                    stacked = torch.stack(list(new.values()))
                    T = stacked if T is None else torch.cat([T, stacked])
                    names += list(new)
                h = z
            elif isinstance(module, (nn.ReLU, nn.LeakyReLU)):
                negative = 0.0 if isinstance(module, nn.ReLU) else module.negative_slope
                slope = torch.where(h.detach() > 0, torch.ones_like(h), torch.full_like(h, negative)).detach()
                h = h * slope
                T = None if T is None else T * slope
        loss = batch.weight * checked_loss(loss_fn(h, batch.y), i)
        if T is not None:  # ∇²_f ℓ t for every tangent at once: one batched double backward on the loss alone
            f = h.detach().requires_grad_(True)
            (g_f,) = torch.autograd.grad(batch.weight * loss_fn(f, batch.y), f, create_graph=True)
            (HT,) = torch.autograd.grad(g_f, f, grad_outputs=T, is_grads_batched=True)
            for name, value in zip(names, (T * HT).reshape(len(names), -1).sum(dim=1).tolist()):
                forms[name] += value
        for (n, _), g in zip(leaves.items(), torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)):
            if g is not None:
                grads[n] += g
        total += float(loss.detach())
    return forms, grads, total


__all__ = ["block_quadratic_forms", "single_layer_blocks"]
