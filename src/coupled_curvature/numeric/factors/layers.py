"""Rows ``A_nJ_n`` of ``nn.Linear`` and ``nn.Conv2d`` (``groups=1``) weights in factored form: the
fast provider of :func:`~coupled_curvature.numeric.factors.rows.block_rows`.

A layer's output is linear in its own weights, ``z_n[c,p] = Σ_q W[c,q] U_n[q,p] + b[c]`` with ``U_n``
the input unfolded into patches (``P = 1``, ``U_n = a_n`` for Linear on 2-D inputs). With
``M_n = ∂f_n/∂z_n`` and a cotangent row ``a`` on the outputs, ``(aᵀJ_n)[(c,q)] = Σ_p (aᵀM_n)[c,p] U_n[q,p]``:
one batched forward pass and one backward pass per cotangent row give the rows of every such
layer at once (the generic route needs a forward pass per sample).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.cotangents import cotangent_rows, shifted_forward
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["LayerRows", "is_factorable", "layer_rows", "linear_module_of", "weight_bias_owner"]


def is_factorable(module: nn.Module) -> TypeGuard[nn.Linear | nn.Conv2d]:
    """``nn.Linear``, or ``nn.Conv2d`` with ``groups=1``: the layers whose output is ``Σ_q W[c,q] U_n[q,p] + b[c]``.

    >>> is_factorable(nn.Linear(2, 2)), is_factorable(nn.Conv2d(2, 2, 1, groups=2))
    (True, False)
    """
    factor = layer_capabilities(module).factor  # exact types: a subclass may change forward
    return factor == "linear" or (factor == "conv" and isinstance(module, nn.Conv2d) and module.groups == 1)


def weight_bias_owner(model: nn.Module, members: Sequence[str]) -> tuple[str, nn.Module, tuple[str, ...]] | None:
    """``(path, module, attributes)`` when ``members`` are the ``weight`` and/or ``bias`` (each once) of one
    submodule of ``model``, else ``None``.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
    >>> weight_bias_owner(net, ["0.bias"])[::2], weight_bias_owner(net, ["0.weight", "0.weight"])
    (('0', ('bias',)), None)
    """
    paths = {m.rpartition(".")[0] for m in members}
    attrs = tuple(m.rpartition(".")[2] for m in members)
    if len(paths) != 1 or len(set(attrs)) != len(attrs) or not set(attrs) <= {"weight", "bias"}:
        return None
    path = paths.pop()
    try:
        return path, model.get_submodule(path), attrs
    except AttributeError:
        return None


def linear_module_of(model: nn.Module, members: Sequence[str]) -> str | None:
    """The path of the ``nn.Linear`` or ``nn.Conv2d`` (``groups=1``) whose ``weight``/``bias`` make up
    ``members``, else ``None``.

    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2, 3))
    >>> linear_module_of(net, ["0.weight", "0.bias"]), linear_module_of(net, ["0.weight", "3.bias"])
    ('0', None)
    """
    found = weight_bias_owner(model, members)
    return found[0] if found is not None and is_factorable(found[1]) else None


@dataclass(frozen=True)
class LayerRows:
    """Rows ``a_jᵀJ_n`` of one layer for cotangent rows ``j``, factored: ``P[n, j] = a_jᵀM_n`` as
    ``(N, r, C, P)`` and the (unfolded) input ``U[n]`` as ``(N, Q, P)``."""

    P: Tensor
    U: Tensor

    def rows(self, attrs: Sequence[str], samples: slice = slice(None)) -> Tensor:
        """The rows for samples ``samples``, ``(n, r, size)``, columns in ``attrs`` order
        (``weight``: ``Σ_p P[n,j,c,p] U[n,q,p]`` at ``(c, q)``; ``bias``: ``Σ_p P[n,j,c,p]``)."""
        P = self.P[samples]
        parts = []
        for a in attrs:
            if a == "weight":
                parts.append(torch.einsum("nrcp,nqp->nrcq", P, self.U[samples]).reshape(P.shape[0], P.shape[1], -1))
            else:
                parts.append(P.sum(dim=3))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)


def _unfold(module: nn.Linear | nn.Conv2d, x: Tensor) -> Tensor | None:
    """The layer input as ``(N, Q, P)`` patches, or ``None`` if the layout is not supported."""
    if isinstance(module, nn.Linear):  # exact types only (is_factorable): a Linear, else a Conv2d
        if x.dim() < 2:
            return None
        flat = x.reshape(x.shape[0], -1, x.shape[-1])
        return flat.transpose(1, 2)
    if x.dim() != 4:
        return None
    mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
    padded = F.pad(x, list(module._reversed_padding_repeated_twice), mode=mode)
    return F.unfold(padded, module.kernel_size, dilation=module.dilation, padding=0, stride=module.stride)


def _as_cp(module: nn.Linear | nn.Conv2d, z: Tensor) -> Tensor:
    """The layer output as ``(N, C, P)``."""
    if type(module) is nn.Linear:
        return z.reshape(z.shape[0], -1, z.shape[-1]).transpose(1, 2)
    return z.reshape(z.shape[0], z.shape[1], -1)


def _reconstructs(module: nn.Linear | nn.Conv2d, U: Tensor, z: Tensor) -> bool:
    """``W U_n + b`` equals the recorded output (the unfolding matches the layer)."""
    C = z.shape[1]
    if U.shape[2] != z.shape[2] or module.weight.numel() != C * U.shape[1]:
        return False
    if not z.numel():
        return True
    W = module.weight.detach().reshape(C, -1).to(U.dtype)
    rec = W @ U
    if module.bias is not None:
        rec = rec + module.bias.detach().to(U.dtype).reshape(1, C, 1)
    scale = max(float(z.abs().max()), float(rec.abs().max()), 1e-300)
    return float((rec - z).abs().max()) <= 1e-9 * scale


def layer_rows(objective: Objective, batch: int, paths: Iterable[str], cot: Tensor,
               params: dict[str, Tensor] | None = None) -> dict[str, LayerRows]:
    """:class:`LayerRows` of the factorable layers at ``paths`` for the cotangent rows ``cot``
    ``(N, r, K)`` on the ``K`` outputs of every sample.

    One forward pass with a zero shift added to each layer's output, then ``r`` backward passes
    of ``Σ_n cot[n, j]ᵀf_n`` to the shifts, batched (:mod:`.cotangents`; ``= cot[n, j]ᵀM_n`` when samples do
    not interact; the callers check the result against autograd). Layers that run more than once, see unsupported
    input layouts or whose unfolding does not reproduce their output are left out.

    >>> net = nn.Sequential(nn.Conv2d(1, 1, 2, bias=False), nn.Flatten(), nn.Linear(4, 2)).double()
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X, y = torch.randn(3, 1, 3, 3, dtype=torch.float64), torch.tensor([0, 1, 0])
    >>> obj = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> lr = layer_rows(obj, 0, ["0", "2"], torch.randn(3, 1, 2, dtype=torch.float64))
    >>> tuple(lr["0"].P.shape), tuple(lr["0"].U.shape), tuple(lr["2"].rows(["weight", "bias"]).shape)
    ((3, 1, 1, 4), (3, 4, 4), (3, 1, 10))
    """
    model = objective.model
    found = {p: model.get_submodule(p) for p in paths}
    mods = {p: m for p, m in found.items() if is_factorable(m)}
    fw = shifted_forward(objective, batch, mods, params)
    out = fw.out
    if not isinstance(out, Tensor) or out.dim() == 0 or out.shape[0] != cot.shape[0]:
        return {}
    n = out.shape[0]
    usable = {}
    for p in fw.once():
        x, z = fw.calls[p][0]
        m = mods[p]
        U = _unfold(m, x) if x is not None and x.shape[0] == n else None
        if U is None:
            continue
        U, z = U.to(torch.float64), _as_cp(m, z.to(torch.float64))
        if _reconstructs(m, U, z):
            usable[p] = (U, z.shape)
    if not usable:
        return {}
    names = list(usable)
    Ps = {p: torch.zeros(n, cot.shape[1], usable[p][1][1], usable[p][1][2], dtype=torch.float64,
                         device=cot.device) for p in names}
    for rows, grads in cotangent_rows(fw, names, cot):
        for p, g in grads.items():
            if g is not None:
                k = rows.stop - rows.start
                cp = _as_cp(mods[p], g.detach().to(torch.float64).reshape(k * n, *g.shape[2:]))
                Ps[p][:, rows] = cp.reshape(k, n, *cp.shape[1:]).transpose(0, 1)
    return {p: LayerRows(Ps[p], usable[p][0]) for p in names}
