"""Gradients the loss cannot resolve: a block along which the loss does not move.

The cotangent bound (``BlockDiagnosis.g_rounding``, ``m·ε·‖Σ_n J_nᵀ|r_n|‖``) sees the rounding of the
final sum over samples and outputs, not a cancellation inside the backward pass of one sample. A key
bias in attention is the standard case: it adds the same number to every logit of a query row, the
softmax ignores it, so its gradient is exactly 0 in exact arithmetic; but the softmax backward computes
``p ⊙ (v − pᵀv)``, whose cancellation leaves ``‖g‖ ≈ 1e-19`` of rounding, far above the cotangent bound
(the bound itself cancels the same way).

The check here reads the loss instead. For a block with value ``w`` and gradient ``g``, at step
``t = max(‖w‖, 1)`` along ``û = g/‖g‖``: if the first-order change ``t‖g‖`` is at most ``10³·ε·|L|``
(a candidate) and the loss at ``w ± tû`` equals ``L`` to ``8·ε·|L|``, the loss does not move along
the block at its own scale, and ``g`` is rounding relative to the loss's scale. A real gradient of that
size would move the loss by ``t‖g‖`` on one side (the second-order term cannot cancel it on both). The
two extra loss evaluations run only for candidates, which ordinary blocks never are.

>>> import torch
>>> from torch import nn
>>> from coupled_curvature.numeric.core.inputs import prepare_batches
>>> from coupled_curvature.numeric.core.objective import Objective
>>> class Shift(nn.Module):  # a scalar added to every logit: cross-entropy cannot see it
...     def __init__(self):
...         super().__init__()
...         self.lin, self.s = nn.Linear(3, 4).double(), nn.Parameter(torch.tensor([0.7], dtype=torch.float64))
...     def forward(self, x):
...         return self.lin(x) + self.s
>>> torch.manual_seed(0) and None
>>> net, loss_fn = Shift(), nn.CrossEntropyLoss()
>>> X, y = torch.randn(16, 3, dtype=torch.float64), torch.randint(0, 4, (16,))
>>> obj = Objective(net, loss_fn, prepare_batches((X, y), loss_fn))
>>> grads = dict(zip(obj.names, torch.autograd.grad(loss_fn(net(X), y), list(net.parameters()))))
>>> parts = {n: [n] for n in obj.names}
>>> sorted(unresolved_gradients(obj, parts, grads, obj.loss()))
['s']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from coupled_curvature.numeric.core.objective import Objective

__all__ = ["unresolved_gradients", "CANDIDATE", "RESOLUTION"]

_EPS = float(torch.finfo(torch.float64).eps)
#: a block is a candidate when its first-order change ``t‖g‖`` is at most this many ``ε·|L|``
CANDIDATE = 1e3
#: the loss "does not move" when both perturbed losses equal ``L`` to this many ``ε·|L|``
RESOLUTION = 8.0


def unresolved_gradients(objective: Objective, partition: Mapping[str, Sequence[str]],
                         grads: Mapping[str, Tensor], loss: float) -> dict[str, float]:
    """Per block whose gradient the loss does not resolve, the level to report: ``‖g‖`` itself (``D`` and
    ``D⁺`` are then undefined). Blocks with ``g = 0`` exactly, or whose loss moves, are left out."""
    scale = abs(float(loss))
    if scale == 0.0 or not torch.isfinite(torch.tensor(scale)):
        return {}
    out: dict[str, float] = {}
    for block, members in partition.items():
        g = grads[block].detach().reshape(-1).to(torch.float64)
        g_norm = float(g.norm())
        if g_norm == 0.0 or not torch.isfinite(g).all():
            continue
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        t = max(float(w.norm()), 1.0)
        if t * g_norm > CANDIDATE * _EPS * scale:
            continue
        step = (g / g_norm) * t
        moved = [abs(_loss_at(objective, members, step * sign) - loss) for sign in (1.0, -1.0)]
        if max(moved) <= RESOLUTION * _EPS * scale:
            out[block] = g_norm
    return out


def _loss_at(objective: Objective, members: Sequence[str], step: Tensor) -> float:
    """``L`` with the block's tensors moved by ``step`` (their concatenation order), the rest as they are."""
    params = dict(objective.values)
    start = 0
    for m in members:
        v = objective.values[m]
        params[m] = v + step[start:start + v.numel()].reshape(v.shape).to(v)
        start += v.numel()
    with torch.no_grad():
        return float(sum(objective.batch_loss(i, params) for i in range(len(objective.batches))))
