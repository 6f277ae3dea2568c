"""Exact Hessian diagonals and row-pair traces of ``nn.Linear`` tensors from per-sample factors."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.factors.per_sample import per_sample_factors


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
    paths = {p: m for p, m in net.named_modules() if type(m) is nn.Linear}
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
    mine = f.weight_hvp(W).reshape(-1)
    scale = max(float(exact.abs().max()), float(mine.abs().max()), 1e-300)
    return float((exact - mine).abs().max()) <= 1e-9 * scale
