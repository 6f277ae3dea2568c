"""Gauss–Newton sums ``Σ_n J_nᵀS_nJ_n = BᵀB`` of layer blocks from the rows of ``B``, and dense
Hessian blocks of ``nn.Linear``/``nn.Conv2d`` layers.

``g_b = Σ_n J_nᵀe_n`` always; ``H_bb = Σ_n J_nᵀS_nJ_n`` (``S_n = ∂²L/∂f_n²``, ``e_n = ∂L/∂f_n``)
exactly when ``f`` is affine in the block near ``θ``: true almost everywhere when everything above
the layer is piecewise linear (ReLU, LeakyReLU, max/avg pooling, eval-mode BatchNorm, Linear, Conv),
false for Tanh (negative control) and for batch statistics (samples coupled). The rows ``A_nJ_n``
(and ``e_nᵀJ_n``) come from :func:`~coupled_curvature.numeric.factors.rows.block_rows`; the callers
verify the sums against Hessian-vector products and fall back when they disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.kronecker import kronecker_block, per_sample_factors
from coupled_curvature.numeric.factors.layers import linear_module_of
from coupled_curvature.numeric.factors.outputs import output_factors
from coupled_curvature.numeric.factors.rows import block_rows

__all__ = ["GaussNewton", "gauss_newton", "linear_block_hessians"]

_BUDGET = 1 << 25  # bytes of rows held at once (2²² float64 entries)


@dataclass
class GaussNewton:
    """Sums over the data for one block ``b`` of the Gauss–Newton form ``Σ_n J_nᵀS_nJ_n``.

    ``diagonal``: its diagonal; ``products``: it times the probe columns; ``grad = Σ_n J_nᵀe_n``
    (always ``g_b``); with ``factor=True``, ``B`` and ``s`` stacking the kept rows ``A_nJ_n`` and
    ``s_n`` over the samples (:mod:`.outputs`: ``S_n = A_nᵀA_n``, ``e_n = A_nᵀs_n``), so
    ``Σ J_nᵀS_nJ_n = BᵀB`` and ``Σ J_nᵀe_n = Bᵀs`` (``None`` if some ``e_n ∉ range(S_n)``).
    """

    diagonal: Tensor
    products: Tensor
    grad: Tensor
    B: Tensor | None = None
    s: Tensor | None = None

    def factor(self) -> tuple[Tensor, Tensor]:
        """``(B, s)``; a ``ValueError`` for sums built without ``factor=True`` or where ``s`` does not exist."""
        if self.B is None or self.s is None:
            raise ValueError("no factor (B, s): the sums were built without factor=True, or some e_n ∉ range(S_n)")
        return self.B, self.s


@dataclass
class _Sums:
    """One block's running sums in :func:`gauss_newton`, and the rows of its factor so far."""

    diag: Tensor
    grad: Tensor
    prod: Tensor
    B: list[Tensor] = field(default_factory=list)
    s: list[Tensor] = field(default_factory=list)


def gauss_newton(
    objective: Objective,
    blocks: dict[str, list[str]],
    *,
    probes: dict[str, Tensor] | None = None,
    factor: bool = False,
    params: dict[str, Tensor] | None = None,
) -> dict[str, GaussNewton]:
    """:class:`GaussNewton` sums for every block that is one factorable layer's weight and/or bias
    (others are left out; all are when the loss's output Hessian does not factor, see
    :func:`~coupled_curvature.numeric.factors.outputs.output_factors`). ``probes[b]`` is an
    ``(size, m)`` matrix of vectors to multiply (e.g. ``w_b`` and a random vector, for the caller's
    check against exact Hessian-vector products). Work is chunked over samples.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X, y = torch.randn(5, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1])
    >>> obj = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> gn = gauss_newton(obj, {"2.weight": ["2.weight"]}, factor=True)["2.weight"]
    >>> bool(torch.allclose(gn.B.T @ gn.s, gn.grad, atol=1e-14)), tuple(gn.B.shape)  # rank S_n = k − 1 = 1
    (True, (5, 6))
    """
    probes = probes or {}
    names = [b for b, m in blocks.items() if linear_module_of(objective.model, m) is not None]
    values = objective.values if params is None else params
    sizes = {b: sum(values[m].numel() for m in blocks[b]) for b in names}
    dev = next(iter(values.values())).device if values else None
    acc = {b: _Sums(torch.zeros(sizes[b], dtype=torch.float64, device=dev),
                    torch.zeros(sizes[b], dtype=torch.float64, device=dev),
                    torch.zeros(sizes[b], probes[b].shape[1] if b in probes else 0, dtype=torch.float64, device=dev))
           for b in names}
    for i in range(len(objective.batches)):
        try:
            of = output_factors(objective, i, params)
        except ValueError:
            return {}
        factor = factor and of.s is not None
        s_rows = of.s if factor else None
        r = of.rows
        cot = torch.cat([of.A, of.e.unsqueeze(1)], dim=1)  # the last row gives e_nᵀJ_n
        for samples, rows in block_rows(objective, i, blocks, names, cot, budget=_BUDGET, params=params):
            keep = of.keep[samples]
            for b, R in rows.items():
                a, Bn = acc[b], R[:, :r]
                flat = Bn.reshape(-1, sizes[b])
                a.diag += (flat * flat).sum(dim=0)
                a.grad += R[:, r].sum(dim=0)
                if b in probes:
                    a.prod += flat.T @ (flat @ probes[b])
                if s_rows is not None:  # factor
                    a.B.append(Bn[keep])
                    a.s.append(s_rows[samples][keep])
    out = {}
    for b in names:
        a = acc[b]
        B = torch.cat(a.B) if factor and a.B else None
        s = torch.cat(a.s) if factor and a.s else None
        out[b] = GaussNewton(a.diag, a.prod, a.grad, B, s)
    return out


def linear_block_hessians(
    objective: Objective, batch: int, requests: dict[str, tuple[str, list[str]]]
) -> dict[str, Tensor]:
    """Dense ``H_bb`` of batch ``batch`` for blocks made of one layer's weight and/or bias.

    ``nn.Linear`` on 2-D inputs: the layer-output route (:mod:`.kronecker`), exactly
    ``∂²L/∂W_{ai}∂W_{bj} = Σ_n G_n[a,b] a_n[i] a_n[j]`` and ``∂²L/∂b∂b = Σ_n G_n`` (per-sample
    losses). ``nn.Conv2d`` (``groups=1``, any stride, padding, dilation) and other Linear inputs:
    the Gauss–Newton form ``BᵀB = Σ_n J_nᵀS_nJ_n`` (see the module docstring; exact for networks
    piecewise linear above the layer). The caller verifies ``H_bb w`` against a Hessian-vector
    product and falls back; blocks whose layer cannot be factored are left out of the result.

    >>> net = nn.Sequential(nn.Conv2d(1, 2, 2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X, y = torch.randn(3, 1, 3, 3, dtype=torch.float64), torch.tensor([0, 1, 0])
    >>> obj = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> H = linear_block_hessians(obj, 0, {"c": ("0", ["0.weight", "0.bias"]), "l": ("3", ["3.weight"])})
    >>> tuple(H["c"].shape), tuple(H["l"].shape)
    ((10, 10), (16, 16))
    """
    lin = {p for p, _ in requests.values() if type(objective.model.get_submodule(p)) is nn.Linear}
    factors = per_sample_factors(objective, batch, lin) if lin else {}
    out = {block: kronecker_block(*factors[path], members) for block, (path, members) in requests.items()
           if path in factors}
    rest = {block: members for block, (_, members) in requests.items() if block not in out}
    if not rest:
        return out
    try:
        of = output_factors(objective, batch)
    except ValueError:
        return out
    dense = {b: torch.zeros(sum(objective.values[m].numel() for m in ms), sum(objective.values[m].numel() for m in ms),
                            dtype=torch.float64, device=objective.values[ms[0]].device) for b, ms in rest.items()}
    for samples, rows in block_rows(objective, batch, rest, list(rest), of.A, budget=_BUDGET):
        for b, R in rows.items():
            flat = R.reshape(-1, R.shape[2])
            dense[b] += flat.T @ flat
    return {**out, **{b: 0.5 * (H + H.T) for b, H in dense.items()}}
