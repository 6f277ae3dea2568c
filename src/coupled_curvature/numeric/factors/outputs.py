"""Per-sample output factors of the loss: the one place that factors ``S_n = ∂²L/∂f_n²``.

For a loss that is a sum of per-sample terms, its Hessian in the network outputs is
block-diagonal over samples, with blocks ``S_n`` (``K × K``, ``K`` outputs per sample); with
``e_n = ∂L/∂f_n`` and ``J_n = ∂f_n/∂w_b``::

    Σ_n J_nᵀ S_n J_n = BᵀB,   Σ_n J_nᵀ e_n = Bᵀs,   rows of B: A_n J_n,   S_n = A_nᵀA_n,   e_n = A_nᵀs_n.

``A_n = diag(√μ) Vᵀ`` over the eigenvalues ``μ`` of ``S_n`` above round-off (``r`` rows: ``C − 1``
for softmax cross-entropy, where ``S = diag(p) − ppᵀ``; ``K`` for MSE, ``S = (2/(NK))·I`` under mean
reduction). Round-off of ``S_n`` is judged against the largest ``|μ|`` over the batch and against the
weight ``ω`` of one sample's term in the loss (``weight/n`` for a mean, ``weight`` for a sum), not
against ``S_n``'s own size: a confident sample's ``S_n = ω(diag(p) − ppᵀ)`` is a difference of terms
of size ``ω``, so its noise is ``~ε·ω`` even when every sample of the batch is confident and
``max|μ| ≪ ω``. An eigenvalue below ``−64·ε·max(max|μ|, ω)`` makes the loss "indefinite"; the rows
kept are those with ``μ > 64·ε·max|μ|`` (the others, down to that negative bound, are round-off).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from coupled_curvature.numeric.linalg.tolerance import EPS64
from coupled_curvature.numeric.core.inputs import Batch
from coupled_curvature.numeric.core.objective import Objective

__all__ = ["MAX_OUTPUTS", "OutputFactors", "output_factors"]

#: outputs per sample the factors accept (one batched backward pass per output)
MAX_OUTPUTS = 512
_CUT = 64 * EPS64  # eigenvalues of S_n at or below this share of max|μ| over the batch are round-off
_RANGE_RTOL = 1e-9  # e_n must lie in range(S_n) to this share of max|e|


@dataclass(frozen=True)
class OutputFactors:
    """One batch: outputs ``F`` ``(N, K)``, ``e`` ``(N, K)``, ``S`` ``(N, K, K)`` (symmetrised), the
    root ``A`` ``(N, r, K)`` (rows below round-off set to zero, ``keep`` ``(N, r)`` marks the others)
    and ``s`` ``(N, r)`` with ``A_nᵀs_n = e_n`` (``None`` when some ``e_n`` leaves ``range(S_n)``)."""

    F: Tensor
    e: Tensor
    S: Tensor
    A: Tensor
    keep: Tensor
    s: Tensor | None

    @property
    def rows(self) -> int:
        """``r``, the rows of ``A_n`` (the same for every sample of the batch)."""
        return self.A.shape[1]


def output_factors(objective: Objective, batch: int, params: dict[str, Tensor] | None = None, *,
                   outputs: Tensor | None = None) -> OutputFactors:
    """:class:`OutputFactors` of batch ``batch``: ``S_n[:, k]`` is the Hessian-vector product of
    ``weight·loss_fn(F, y)`` in ``F`` along output ``k`` of every sample at once; a second product
    with random signs per sample checks that the loss couples no samples.

    ``outputs``: the model's outputs on this batch at these values, when the caller has them (one
    forward pass saved).

    Raises ``ValueError`` when the output is not one tensor with the samples along dimension 0,
    has more than :data:`MAX_OUTPUTS` entries per sample, the loss couples samples or some
    ``S_n`` is indefinite beyond round-off (callers turn it into a reason or a fallback).

    >>> from torch import nn
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> net = nn.Linear(2, 3).double(); X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])
    >>> of = output_factors(Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss())), 0)
    >>> tuple(of.A.shape)  # C − 1 = 2 rows per sample
    (4, 2, 3)
    >>> p = torch.softmax(of.F, 1)[0]; S = (torch.diag(p) - torch.outer(p, p)) / 4
    >>> bool(torch.allclose(of.A[0].T @ of.A[0], S, atol=1e-15)), bool(torch.allclose(of.A[0].T @ of.s[0], of.e[0]))
    (True, True)
    """
    b: Batch = objective.batches[batch]
    values = objective.values if params is None else params
    if outputs is None:
        with torch.no_grad():
            out = objective.forward(values, b.X)
    else:  # the caller's own forward pass of this batch at these values
        out = outputs.detach()
    if not isinstance(out, Tensor) or out.dim() < 1 or out.shape[0] != b.n:
        raise ValueError("the model's output is not one tensor with the samples along dimension 0")
    n, shape = out.shape[0], out.shape
    F = out.detach().to(torch.float64).reshape(n, -1).requires_grad_(True)
    k = F.shape[1]
    if k > MAX_OUTPUTS:
        raise ValueError(f"the model has {k} outputs per sample (more than {MAX_OUTPUTS} backward passes per sample)")
    with torch.enable_grad():
        loss = objective.output_loss(batch, F.reshape(shape))
        (grad,) = torch.autograd.grad(loss, F, create_graph=True)
        eye = torch.eye(k, dtype=F.dtype, device=F.device).unsqueeze(1).expand(k, n, k)
        signs = torch.randint(0, 2, (n, 1), generator=torch.Generator().manual_seed(0)).to(dtype=F.dtype, device=F.device) * 2 - 1
        dirs = torch.cat([eye, eye * signs.unsqueeze(0)])
        (cols,) = torch.autograd.grad(grad, F, dirs, is_grads_batched=True) if grad.requires_grad else (
            torch.zeros(2 * k, n, k, dtype=F.dtype, device=F.device),)
    S, S_signed = cols[:k].permute(1, 2, 0), cols[k:].permute(1, 2, 0)  # S[n, :, j] = S_n e_j
    scale = float(S.abs().max()) or 1.0
    if float((S_signed - S * signs.unsqueeze(2)).abs().max()) > 1e-12 * scale:
        raise ValueError("the loss couples samples (its output Hessian is not block-diagonal over samples)")
    S = (S + S.transpose(1, 2)) / 2
    e = grad.detach()
    A, keep, s = _square_root(S, e, objective.sample_weight(batch))
    return OutputFactors(F.detach(), e, S, A, keep, s)


def _square_root(S: Tensor, e: Tensor, sample_weight: float) -> tuple[Tensor, Tensor, Tensor | None]:
    """``A_n`` over the top ``r`` eigenvalues of every ``S_n`` (``r``: the most kept by any sample),
    the mask of kept rows and ``s_n = diag(1/√μ) Vᵀe_n`` (``None`` if ``e_n ∉ range(S_n)``)."""
    mu, V = torch.linalg.eigh(S)  # ascending
    top = float(mu.abs().max()) if mu.numel() else 0.0
    cut = _CUT * top
    if bool((mu < -_CUT * max(top, sample_weight)).any()):
        raise ValueError("the loss's output Hessian is indefinite, so H_bb is not BᵀB")
    kept = mu > cut
    r = max(1, int(kept.sum(dim=1).max())) if mu.numel() else 1
    mu, V, keep = mu[:, -r:], V[:, :, -r:], kept[:, -r:]
    root = torch.where(keep, mu.clamp(min=0.0).sqrt(), torch.zeros_like(mu))
    A = root.unsqueeze(2) * V.transpose(1, 2)
    coeff = torch.where(keep, torch.einsum("nkj,nk->nj", V, e), torch.zeros_like(mu))
    resid = e - torch.einsum("nkj,nj->nk", V, coeff)
    if e.numel() and float(resid.abs().max()) > _RANGE_RTOL * max(float(e.abs().max()), 1e-300):
        return A, keep, None
    return A, keep, coeff / torch.where(keep, root, torch.ones_like(root))
