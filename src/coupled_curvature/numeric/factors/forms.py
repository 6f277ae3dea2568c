"""``wᵀHw`` and ``wᵀH⁺_τw`` of a block from its factor ``H = BᵀB``: which side to eigendecompose,
the spectrum, and the check ``‖Bw‖² = wᵀHw`` against autograd.

With ``m`` rows and ``n_b`` columns, ``G = BBᵀ`` (``m × m``) and ``H = BᵀB`` share their non-zero
spectrum (``Bᵀq_i/√λ_i`` are ``H``'s eigenvectors), so with ``u = Bw``::

    wᵀHw = ‖u‖²,    wᵀH⁺_τw = Σ_{λ_i(H) > τ} (v_iᵀw)²/λ_i = Σ_{λ_i(G) > τ} (q_iᵀu)²/λ_i²,

with the same relative cutoff ``τ = rtol·λ_max`` on either side. The ``"factor"`` side
(``H``, ``n_b ≤ m``) or the ``"gram"`` side (``G``) is the smaller matrix; the cutoff sum is
:func:`~coupled_curvature.numeric.linalg.pinv.cutoff_sum`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.numeric.linalg.tolerance import agrees
from coupled_curvature.numeric.linalg.pinv import PinvForm, cutoff_sum, symmetric_spectrum

__all__ = ["WHW_RTOL", "FactorSpectrum", "columns_gram", "factor_side", "factor_spectrum", "reproduces_wHw"]

#: relative tolerance of the check ``‖Bw‖² = wᵀHw`` (the factor against autograd)
WHW_RTOL = 1e-8


def factor_side(n_b: int, m: int) -> str:
    """``"factor"`` (eigendecompose ``BᵀB``, ``n_b × n_b``) when ``n_b ≤ m``, else ``"gram"`` (``BBᵀ``).

    >>> factor_side(12, 5), factor_side(5, 5)
    ('gram', 'factor')
    """
    return "factor" if n_b <= m else "gram"


@dataclass(frozen=True)
class FactorSpectrum:
    """Eigenvalues ``evals`` of the side's matrix and ``weights`` ``(q_iᵀu)²`` (gram) or ``(v_iᵀw)²``
    (factor); ``power`` is 2 on the gram side, 1 on the factor side."""

    evals: np.ndarray
    weights: np.ndarray
    power: int

    def form(self, rtol: float) -> PinvForm:
        """``wᵀH⁺_τw = Σ_{λ_i > τ} c_i/λ_i^power`` at ``τ = rtol·max|λ|``.

        >>> B = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=torch.float64)
        >>> w = torch.ones(3, dtype=torch.float64)
        >>> factor_spectrum("gram", B @ B.T, B @ w, w).form(1e-10).value  # 1/1 + 1/4
        1.25
        """
        return cutoff_sum(self.evals, self.weights, rtol, power=self.power)


def factor_spectrum(side: str, mat: Tensor, u: Tensor, w: Tensor) -> FactorSpectrum:
    """The spectrum of ``mat`` (``G = BBᵀ`` on the gram side, ``H = BᵀB`` on the factor side) with the
    weights of ``u = Bw`` or ``w``.

    >>> B = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]], dtype=torch.float64)
    >>> w = torch.ones(2, dtype=torch.float64)
    >>> factor_spectrum("factor", B.T @ B, B @ w, w).form(1e-10).value  # 1/1 + 1/4
    1.25
    """
    if side == "gram":
        return FactorSpectrum(*symmetric_spectrum(mat, u), 2)
    return FactorSpectrum(*symmetric_spectrum(mat, w), 1)


def reproduces_wHw(u_sq: float, wHw: float) -> bool:
    """``‖Bw‖² = wᵀHw`` to :data:`WHW_RTOL` relative: the factor holds for this block.

    >>> reproduces_wHw(1.0, 1.0 + 1e-12), reproduces_wHw(1.0, 1.0 + 1e-6)
    (True, False)
    """
    return agrees(u_sq, wHw, rtol=WHW_RTOL)


def columns_gram(B: Tensor) -> Tensor:
    """``BᵀB``: BLAS ``dsyrk`` (half the flops of a product) for wide blocks, a product otherwise.

    >>> B = torch.randn(3, 600, dtype=torch.float64)
    >>> bool(torch.allclose(columns_gram(B), B.T @ B))
    True
    """
    if B.shape[1] < 512 or B.device.type != "cpu":  # BLAS dsyrk through scipy runs on the host only
        return B.T @ B
    from scipy.linalg.blas import dsyrk

    low = torch.from_numpy(dsyrk(1.0, B.contiguous().numpy().T, trans=0, lower=1))  # Bᵀ: B's memory read column-major
    return low + torch.tril(low, -1).T
