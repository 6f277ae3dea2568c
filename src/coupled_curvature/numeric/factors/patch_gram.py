"""``G = BBᵀ`` of a Linear or Conv2d block without forming ``B``: from the factored rows of :mod:`.layers`.

A row of ``B`` is ``R[a] = Σ_p P[a, :, p] ⊗ U[n(a), :, p]`` (``a = (n, j)``: sample and cotangent row;
``P`` the cotangents at the layer's output, ``C`` channels by ``P`` positions; ``U`` the unfolded input,
``Q`` by ``P``), plus ``Σ_p P[a, :, p]`` for a bias. Their inner products factor over the positions::

    G[a, b] = Σ_{p, p'} ⟨P[a, :, p], P[b, :, p']⟩ · ⟨U[n(a), :, p], U[n(b), :, p']⟩  (+ ⟨ΣP[a], ΣP[b]⟩)
    u[a] = (Bw)[a] = Σ_p ⟨P[a, :, p], (W·U[n(a)])[:, p]⟩  (+ ⟨ΣP[a], bias⟩)

about ``(m·P)²·(C + 1) + (N·P)²·Q`` multiply-adds, against ``m·n_b·P + m²·n_b`` to form ``B`` and
``BBᵀ`` (``n_b = C·Q``): far less where the layer has few positions and many parameters (the last
stage of a ResNet: 16 positions, 2.4 million parameters per block, 18× fewer).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from coupled_curvature.numeric.factors.layers import LayerRows

__all__ = ["patch_gram", "patch_gram_cost", "rows_cost"]


def patch_gram_cost(m: int, n: int, channels: int, inputs: int, positions: int) -> float:
    """Multiply-adds of :func:`patch_gram` for ``m`` rows over ``n`` samples."""
    return (m * positions) ** 2 * (channels + 1) + (n * positions) ** 2 * inputs


def rows_cost(m: int, n_b: int, positions: int) -> float:
    """Multiply-adds of forming ``B`` (``m × n_b``) from the factored rows and then ``BBᵀ``."""
    return m * n_b * positions + m * m * n_b


def patch_gram(parts: Sequence[LayerRows], attrs: Sequence[str], weight: Tensor,
               bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(G, u)`` of the block ``attrs`` (``"weight"`` and/or ``"bias"``, in the block's column order) over
    the batches' factored rows ``parts`` (rows stacked batch after batch, as ``B`` stacks them); ``weight``
    ``(C, Q)`` and ``bias`` ``(C,)`` are the block's values.

    >>> g = torch.Generator().manual_seed(0)
    >>> P, U = torch.randn(3, 2, 4, 5, generator=g, dtype=torch.float64), torch.randn(3, 6, 5, generator=g, dtype=torch.float64)
    >>> lr = LayerRows(P, U); W, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    >>> B = lr.rows(["weight", "bias"]).reshape(6, -1)
    >>> G, u = patch_gram([lr], ["weight", "bias"], W, b)
    >>> bool(torch.allclose(G, B @ B.T)), bool(torch.allclose(u, B @ torch.cat([W.reshape(-1), b])))
    (True, True)
    """
    P = torch.cat([lr.P.reshape(-1, lr.P.shape[2], lr.P.shape[3]) for lr in parts])  # (m, C, pos)
    U = torch.cat([lr.U for lr in parts])  # (N, Q, pos)
    r = parts[0].P.shape[1]
    m, C, pos = P.shape
    G = torch.zeros(m, m, dtype=P.dtype, device=P.device)
    u = torch.zeros(m, dtype=P.dtype, device=P.device)
    if "weight" in attrs:
        PP = torch.einsum("acp,bcq->apbq", P, P)  # (m, pos, m, pos)
        UU = torch.einsum("nkp,lkq->nplq", U, U)  # (N, pos, N, pos)
        UU = UU.repeat_interleave(r, dim=0).repeat_interleave(r, dim=2)  # to the rows (n, j)
        G += (PP * UU).sum(dim=(1, 3))
        WU = torch.einsum("ck,nkp->ncp", weight, U).repeat_interleave(r, dim=0)  # (m, C, pos)
        u += (P * WU).sum(dim=(1, 2))
    if "bias" in attrs:
        assert bias is not None, "a block with a bias is given the bias's values"
        S = P.sum(dim=2)  # (m, C)
        G += S @ S.T
        u += S @ bias
    return G, u
