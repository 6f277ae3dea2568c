"""Pseudo-inverse quadratic forms ``wᵀH⁺w`` with a cutoff relative to the spectrum."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PinvForm:
    """``value = wᵀH⁺_τ w`` with ``τ = rtol·max|λ|``; ``rank`` eigenvalues kept."""

    value: float
    rank: int
    cutoff: float
    max_abs_eig: float
    min_kept_rel_eig: float | None


def pinv_quadratic_form(H: Tensor, w: Tensor, rtol: float) -> PinvForm:
    """``wᵀH⁺_τ w = Σ_{|λ_i| > τ} (u_iᵀw)² / λ_i`` for symmetric ``H``, ``τ = rtol·max_i|λ_i|``.

    The cutoff is relative, so ``H -> c⁻²QHQᵀ`` keeps the same eigen-directions (SPEC §2).
    ``H`` may be indefinite; negative eigenvalues contribute negative terms.

    >>> H = torch.diag(torch.tensor([4.0, -2.0, 0.0], dtype=torch.float64))
    >>> pinv_quadratic_form(H, torch.ones(3, dtype=torch.float64), 1e-10).value
    -0.25
    """
    H = 0.5 * (H + H.T)
    evals, evecs = torch.linalg.eigh(H)
    max_abs = float(evals.abs().max()) if evals.numel() else 0.0
    cutoff = rtol * max_abs
    keep = evals.abs() > cutoff
    if max_abs == 0.0 or not bool(keep.any()):
        return PinvForm(0.0, 0, cutoff, max_abs, None)
    coeff = evecs[:, keep].T @ w
    kept = evals[keep]
    value = float((coeff * coeff / kept).sum())
    return PinvForm(value, int(keep.sum()), cutoff, max_abs, float(kept.abs().min()) / max_abs)
