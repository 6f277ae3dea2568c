"""Per-sample Jacobians of ``nn.Linear`` and ``nn.Conv2d`` (``groups=1``) weights, through the
network outputs: a layer's output is linear in its own weights, ``z_n[c,p] = Σ_q W[c,q] U_n[q,p] + b[c]``
with ``U_n`` the input unfolded into patches (``P = 1``, ``U_n = a_n`` for Linear), and with
``M_n = ∂f_n/∂z_n`` (back-propagated from the ``k`` network outputs) the per-sample Jacobian is
``J_n[j,(c,q)] = Σ_p M_n[j,c,p] U_n[q,p]``. :mod:`.per_sample` builds Hessian blocks and
Gauss–Newton sums from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

from coupled_curvature.numeric.core.inputs import checked_loss
from coupled_curvature.numeric.core.objective import Objective

__all__ = ["LayerJacobian", "SampleJacobians", "is_factorable", "linear_module_of", "sample_jacobians"]

_MAX_OUTPUTS = 256  # network outputs per sample (one backward pass each)


def is_factorable(module: nn.Module) -> bool:
    """``nn.Linear``, or ``nn.Conv2d`` with ``groups=1``: the layers whose output is ``Σ_q W[c,q] U_n[q,p] + b[c]``.

    >>> is_factorable(nn.Linear(2, 2)), is_factorable(nn.Conv2d(2, 2, 1, groups=2))
    (True, False)
    """
    return type(module) is nn.Linear or (type(module) is nn.Conv2d and module.groups == 1)


def linear_module_of(model: nn.Module, members: Sequence[str]) -> str | None:
    """The path of the ``nn.Linear`` or ``nn.Conv2d`` (``groups=1``) whose ``weight``/``bias`` make up
    ``members``, else ``None``.

    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2, 3))
    >>> linear_module_of(net, ["0.weight", "0.bias"]), linear_module_of(net, ["0.weight", "3.bias"])
    ('0', None)
    """
    prefixes = {m.rpartition(".")[0] for m in members}
    attrs = [m.rpartition(".")[2] for m in members]
    if len(prefixes) != 1 or len(set(attrs)) != len(attrs) or not set(attrs) <= {"weight", "bias"}:
        return None
    path = prefixes.pop()
    try:
        module = model.get_submodule(path)
    except AttributeError:
        return None
    return path if is_factorable(module) else None



@dataclass(frozen=True)
class LayerJacobian:
    """``∂f_n/∂(W, b)`` of one layer in factored form: ``M[n] = ∂f_n/∂z_n`` as ``(k, C, P)`` and the
    (unfolded) input ``U[n]`` as ``(Q, P)``, so ``z_n[c,p] = Σ_q W[c,q] U_n[q,p] + b[c]``."""

    M: Tensor
    U: Tensor

    def jacobian(self, attrs: Sequence[str], rows: slice = slice(None)) -> Tensor:
        """``J_n`` for samples ``rows``, shape ``(n, k, size)``, columns in ``attrs`` order
        (``weight``: ``Σ_p M_n[j,c,p] U_n[q,p]`` at ``(c, q)``; ``bias``: ``Σ_p M_n[j,c,p]``)."""
        M = self.M[rows]
        parts = []
        for a in attrs:
            if a == "weight":
                parts.append(torch.einsum("nkcp,nqp->nkcq", M, self.U[rows]).reshape(M.shape[0], M.shape[1], -1))
            else:
                parts.append(M.sum(dim=3))
        return torch.cat(parts, dim=2)


@dataclass(frozen=True)
class SampleJacobians:
    """One batch: ``e[n] = ∂L/∂f_n`` ``(N, k)``, ``Λ[n] = ∂²L/∂f_n²`` ``(N, k, k)`` (symmetrised) and the
    usable layers' :class:`LayerJacobian` by module path."""

    e: Tensor
    hess: Tensor
    layers: dict[str, LayerJacobian]


def _unfold(module: nn.Module, x: Tensor) -> Tensor | None:
    """The layer input as ``(N, Q, P)`` patches, or ``None`` if the layout is not supported."""
    if type(module) is nn.Linear:
        if x.dim() < 2:
            return None
        flat = x.reshape(x.shape[0], -1, x.shape[-1])
        return flat.transpose(1, 2)
    if x.dim() != 4:
        return None
    mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
    padded = F.pad(x, list(module._reversed_padding_repeated_twice), mode=mode)
    return F.unfold(padded, module.kernel_size, dilation=module.dilation, padding=0, stride=module.stride)


def _as_cp(module: nn.Module, z: Tensor) -> Tensor:
    """The layer output as ``(N, C, P)``."""
    if type(module) is nn.Linear:
        return z.reshape(z.shape[0], -1, z.shape[-1]).transpose(1, 2)
    return z.reshape(z.shape[0], z.shape[1], -1)


def _reconstructs(module: nn.Module, U: Tensor, z: Tensor) -> bool:
    """``W U_n + b`` equals the recorded output (the unfolding matches the layer)."""
    C = z.shape[1]
    if U.shape[2] != z.shape[2] or module.weight.numel() != C * U.shape[1]:
        return False
    W = module.weight.detach().reshape(C, -1).to(U.dtype)
    rec = W @ U
    if module.bias is not None:
        rec = rec + module.bias.detach().to(U.dtype).reshape(1, C, 1)
    scale = max(float(z.abs().max()), float(rec.abs().max()), 1e-300) if z.numel() else 1.0
    return float((rec - z).abs().max()) <= 1e-9 * scale if z.numel() else True


def sample_jacobians(
    objective: Objective, batch: int, paths: Iterable[str], params: dict[str, Tensor] | None = None
) -> SampleJacobians | None:
    """Per-sample output derivatives of the loss and factored Jacobians of the layers at ``paths``.

    One forward pass with a zero shift added to each layer's output; ``e`` and ``Λ`` by ``k``
    backward passes through the loss, ``M`` by ``k`` backward passes from the outputs
    ``Σ_n f_n[j]`` to the shifts (``= ∂f_n[j]/∂z_n`` when samples do not interact). Layers that
    run more than once, see unsupported input layouts or whose unfolding does not reproduce
    their output are left out; ``None`` when the output has more than 256 entries per sample.

    >>> net = nn.Sequential(nn.Conv2d(1, 1, 2, bias=False), nn.Flatten(), nn.Linear(4, 2)).double()
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X, y = torch.randn(3, 1, 3, 3, dtype=torch.float64), torch.tensor([0, 1, 0])
    >>> obj = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> sj = sample_jacobians(obj, 0, ["0", "2"])
    >>> tuple(sj.layers["0"].M.shape), tuple(sj.layers["0"].U.shape), tuple(sj.hess.shape)
    ((3, 2, 1, 4), (3, 4, 4), (3, 2, 2))
    """
    model = objective.model
    values = objective.values if params is None else params
    mods = {p: model.get_submodule(p) for p in paths}
    mods = {p: m for p, m in mods.items() if is_factorable(m)}
    seen: dict[str, list[tuple[Tensor, Tensor]]] = {p: [] for p in mods}
    shifts: dict[str, Tensor] = {}

    def hook(path: str):
        def add_shift(module, inputs, output):
            seen[path].append((inputs[0].detach(), output.detach()))
            if len(seen[path]) > 1:
                return None
            shifts[path] = torch.zeros_like(output, requires_grad=True)
            return output + shifts[path]

        return add_shift

    b = objective.batches[batch]
    handles = [m.register_forward_hook(hook(p)) for p, m in mods.items()]
    try:
        out = functional_call(model, {**values, **objective.buffers}, (b.X,))
    finally:
        for h in handles:
            h.remove()
    if not isinstance(out, Tensor) or out.dim() == 0:
        return None
    n = out.shape[0]
    k = out[0].numel()
    if k > _MAX_OUTPUTS:
        return None
    loss = b.weight * checked_loss(objective.loss_fn(out, b.y), batch)
    f = out.reshape(n, k)
    (e,) = torch.autograd.grad(loss, out, create_graph=True, allow_unused=True)
    e = torch.zeros_like(out) if e is None else e
    hess = torch.zeros(n, k, k, dtype=torch.float64)
    ef = e.reshape(n, k)
    if ef.requires_grad:
        for j in range(k):
            (col,) = torch.autograd.grad(ef[:, j].sum(), out, retain_graph=True, allow_unused=True)
            if col is not None:
                hess[:, :, j] = col.reshape(n, k).detach()
    hess = 0.5 * (hess + hess.transpose(1, 2))
    usable = {}
    for p, m in mods.items():
        if len(seen[p]) != 1 or p not in shifts:
            continue
        x, z = seen[p][0]
        U = _unfold(m, x) if x.shape[0] == n else None
        if U is None:
            continue
        U = U.to(torch.float64)
        z = _as_cp(m, z.to(torch.float64))
        if _reconstructs(m, U, z):
            usable[p] = (U, z.shape)
    layers: dict[str, LayerJacobian] = {}
    if usable:
        names = list(usable)
        Ms = {p: torch.zeros(n, k, usable[p][1][1], usable[p][1][2], dtype=torch.float64) for p in names}
        for j in range(k):
            grads = torch.autograd.grad(f[:, j].sum(), [shifts[p] for p in names], retain_graph=True, allow_unused=True)
            for p, g in zip(names, grads):
                if g is not None:
                    Ms[p][:, j] = _as_cp(mods[p], g.detach().to(torch.float64))
        layers = {p: LayerJacobian(Ms[p], usable[p][0]) for p in names}
    return SampleJacobians(ef.detach().to(torch.float64), hess, layers)
