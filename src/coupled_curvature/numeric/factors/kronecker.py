"""The layer-output route for ``nn.Linear`` on 2-D inputs: ``z_n = W a_n + b`` and
``G_n = ∂²L/∂z_n²`` give, for any network above the layer (the loss a sum of per-sample terms),

    ∂²L/∂W_{ai}∂W_{bj} = Σ_n G_n[a,b] a_n[i] a_n[j],      ∂²L/∂b_a∂b_b = Σ_n G_n[a,b],

exactly: dense Kronecker blocks (:func:`kronecker_block`), Hessian diagonals and row-pair traces
(:class:`LinearFactors`). ``G_n`` may be indefinite (it holds the curvature of everything above the
layer), so this is not a ``BᵀB`` factor; :mod:`.gauss_newton` covers the other layers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.linalg.tolerance import agrees
from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.cotangents import shifted_forward
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["LinearFactors", "kronecker_block", "linear_factors", "per_sample_factors"]


def per_sample_factors(
    objective: Objective, batch: int, paths: Iterable[str], params: dict[str, Tensor] | None = None
) -> dict[str, tuple[Tensor, Tensor]]:
    """``(G, A)`` per ``nn.Linear`` path: inputs ``A[n] = a_n`` and ``G[n] = ∂²L/∂z_n²`` for ``z_n = W a_n + b``.

    One forward pass with a zero shift ``δ`` added to each layer's output, then ``out``
    batched Hessian-vector products in ``δ`` (cross-sample blocks of ``∂²L/∂δ²`` vanish when
    the loss is a sum of per-sample terms, so each product yields one column of every
    ``G_n``). Layers that see non-2-D inputs or run more than once are left out.

    >>> net = nn.Sequential(nn.Linear(2, 1)).double()
    >>> data = [(torch.eye(2, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64))]
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> G, A = per_sample_factors(Objective(net, nn.MSELoss(), prepare_batches(data, nn.MSELoss())), 0, ["0"])["0"]
    >>> G.reshape(-1).tolist()  # L = mean_n z_n²: ∂²L/∂z_n² = 2/2
    [1.0, 1.0]
    """
    fw = shifted_forward(objective, batch, paths, params)
    loss = objective.output_loss(batch, fw.out)
    shifts = fw.shifts
    usable = [p for p in fw.once() if shifts[p].dim() == 2]
    if not usable:
        return {}
    grads = torch.autograd.grad(loss, [shifts[p] for p in usable], create_graph=True, allow_unused=True)
    out_factors: dict[str, tuple[Tensor, Tensor]] = {}
    for p, g in zip(usable, grads):
        n, out = shifts[p].shape
        if g is None or not g.requires_grad:  # loss linear in this layer's output
            G = torch.zeros(n, out, out, dtype=torch.float64, device=shifts[p].device)
        else:
            cot = torch.eye(out, dtype=torch.float64, device=shifts[p].device).unsqueeze(1).expand(out, n, out)
            cols = torch.autograd.grad(g, shifts[p], grad_outputs=cot, retain_graph=True, is_grads_batched=True)[0]
            G = cols.permute(1, 2, 0)  # G[n, a, b]
        A = fw.calls[p][0][0]
        assert A is not None, "an nn.Linear's input is a tensor"
        out_factors[p] = (G, A)
    return out_factors


def kronecker_block(G: Tensor, A: Tensor, members: list[str]) -> Tensor:
    """``Σ_n G_n ⊗ ã_n ã_nᵀ`` over the block's coordinates, ``ã = a``, ``[a, 1]`` or ``1`` (``members``:
    the layer's ``weight`` and/or ``bias`` names, in the block's order).

    >>> G, A = torch.ones(2, 1, 1, dtype=torch.float64), torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    >>> kronecker_block(G, A, ["0.weight", "0.bias"]).tolist()  # Σ_n [a_n, 1][a_n, 1]ᵀ
    [[5.0, 3.0], [3.0, 2.0]]
    """
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


@dataclass(frozen=True)
class LinearFactors:
    """``A[n] = a_n`` (layer input) and ``G[n] = ∂²L/∂z_n²`` (``z_n = W a_n + b``) for one layer.

    With per-sample losses, ``∂²L/∂W_{si}∂W_{tj} = Σ_n G_n[s,t] a_n[i] a_n[j]`` and
    ``∂²L/∂b_s∂b_t = Σ_n G_n[s,t]``.
    """

    A: Tensor
    G: Tensor

    def weight_diagonal(self) -> Tensor:
        """``H_{(s,i),(s,i)} = Σ_n G_n[s,s] a_n[i]²`` as an ``(out, in)`` tensor."""
        return torch.einsum("ns,ni->si", torch.diagonal(self.G, dim1=1, dim2=2), self.A * self.A)

    def bias_diagonal(self) -> Tensor:
        return torch.diagonal(self.G, dim1=1, dim2=2).sum(dim=0)

    def row_traces(self) -> Tensor:
        """``Tr H_{s,t} = Σ_i H_{(s,i),(t,i)} = Σ_n G_n[s,t] ‖a_n‖²`` (weight rows ``s``, ``t``)."""
        return torch.einsum("nst,n->st", self.G, (self.A * self.A).sum(dim=1))

    def weight_hvp(self, W: Tensor) -> Tensor:
        """``H_WW vec(W)`` reshaped as ``W``: ``Σ_n G_n (W a_n) a_nᵀ``."""
        return torch.einsum("nst,nt,ni->si", self.G, self.A @ W.T, self.A)


def linear_factors(flat: FlatLoss) -> dict[str, LinearFactors]:
    """Factors of every plain ``nn.Linear`` of ``flat.net`` that runs once on 2-D inputs, keyed by module path.

    Each layer's factors are accepted only if ``Σ_n G_n (W a_n) a_nᵀ`` matches the block
    Hessian-vector product ``H_WW w`` to ``1e-9`` relative (it does not when samples are coupled,
    e.g. BatchNorm with batch statistics); rejected layers are left out.
    """
    net = flat.net
    paths = {p: m for p, m in net.named_modules() if layer_capabilities(m).factor == "linear"}
    if not paths:
        return {}
    complete = {p: True for p in paths}
    per_batch: dict[str, list[tuple[Tensor, Tensor]]] = {p: [] for p in paths}
    for i in range(len(flat.batches)):
        factors = per_sample_factors(flat.objective, i, paths, params=flat.params(flat.theta0))
        for p in paths:
            if p in factors:
                G, A = factors[p]
                per_batch[p].append((A, G.detach()))
            else:
                complete[p] = False
    result = {}
    for p in paths:
        if not complete[p] or not per_batch[p]:
            continue
        A = torch.cat([a for a, _ in per_batch[p]])
        G = torch.cat([g for _, g in per_batch[p]])
        f = LinearFactors(A, 0.5 * (G + G.transpose(1, 2)))
        if _verified(flat, p, f):
            result[p] = f
    return result


def _verified(flat: FlatLoss, path: str, f: LinearFactors) -> bool:
    name = f"{path}.weight"
    if name not in flat.offsets:
        return False
    W = flat.objective.values[name]
    v = torch.zeros(flat.n, dtype=torch.float64)
    v[flat.block(name)] = W.reshape(-1)
    exact = flat.hvp(v)[flat.block(name)]
    return agrees(f.weight_hvp(W).reshape(-1), exact, rtol=1e-9)
