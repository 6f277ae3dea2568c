"""Lanczos with full reorthogonalisation: the one engine behind the top eigenvalue and the
Krylov quadrature of ``wᵀH⁺w``.

For a symmetric ``H`` given by products and a start vector ``q₁``, :class:`Lanczos` builds
``H V_k = V_k T_k + β_k q_{k+1} e_kᵀ`` with ``T_k`` tridiagonal (diagonal ``α``, off-diagonal
``β``), reorthogonalising every new vector twice against all earlier ones (classical
Gram–Schmidt), so ``V_k`` stays orthonormal to rounding. :func:`lanczos_top` drives it from a
random start for the largest eigenvalue; :mod:`coupled_curvature.numeric.linalg.krylov_quadrature` drives it from
``w/‖w‖`` for the quadrature.

>>> A = torch.diag(torch.arange(1.0, 11.0, dtype=torch.float64))
>>> lz = Lanczos(torch.ones(10, dtype=torch.float64), cap=10)
>>> while not lz.step(A @ lz.vector) and len(lz.alphas) < lz.cap: pass
>>> round(float(ritz(lz)[0][-1]), 10)
10.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import eigh_tridiagonal
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.scaled import safe_norm

__all__ = ["Lanczos", "LanczosResult", "lanczos_top", "ritz", "tridiagonal_eig", "breakdown_level"]


def breakdown_level(n: int) -> float:
    """Relative size of ``β_k`` below which the Krylov space counts as invariant (rounding level):
    ``64·ε·√n``.

    >>> breakdown_level(1) == 64 * float(np.finfo(np.float64).eps)
    True
    """
    return 64 * float(np.finfo(np.float64).eps) * math.sqrt(n)


def tridiagonal_eig(d: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric tridiagonal ``(d, e)``.

    >>> tridiagonal_eig(np.array([2.0, 2.0]), np.array([1.0]))[0]
    array([1., 3.])
    """
    if len(d) == 1:
        return np.asarray(d, dtype=np.float64).copy(), np.ones((1, 1))
    return eigh_tridiagonal(d, e)


class Lanczos:
    """Plain Lanczos with full (twice-repeated classical Gram–Schmidt) reorthogonalisation.

    Multiply :attr:`vector` by ``H`` and pass the product to :meth:`step`; at most ``cap`` steps.
    ``scale`` is a known lower bound of ``‖H‖`` for the breakdown test.
    """

    def __init__(self, start: Tensor, cap: int, scale: float = 0.0):
        self.n, self.cap, self.scale = start.numel(), cap, scale
        self.V = torch.empty(cap + 1, self.n, dtype=torch.float64, device=start.device)
        self.V[0] = start / safe_norm(start)  # the squares of a vector near 1e±200 under/overflow
        self.alphas: list[float] = []
        self.betas: list[float] = []
        self.broke = False

    @property
    def vector(self) -> Tensor:
        """The next Lanczos vector ``q_{k+1}`` to multiply by ``H``."""
        return self.V[len(self.alphas)]

    def step(self, Hq: Tensor) -> bool:
        """One step with ``Hq = H q_k``; returns ``True`` when ``β_k`` is at rounding level."""
        k = len(self.alphas)
        q = self.V[k]
        alpha = float(q @ Hq)
        u = Hq - alpha * q
        if k > 0:
            u = u - self.betas[k - 1] * self.V[k - 1]
        V = self.V[: k + 1]
        for _ in range(2):
            u = u - V.T @ (V @ u)
        beta = safe_norm(u)
        self.alphas.append(alpha)
        self.betas.append(beta)
        scale = max(float(np.abs(np.asarray(self.alphas)).max()) + 2 * max(self.betas), self.scale)
        self.broke = beta <= breakdown_level(self.n) * scale
        if not self.broke:
            self.V[k + 1] = u / beta
        return self.broke


def ritz(lz: Lanczos) -> tuple[np.ndarray, np.ndarray]:
    """Ritz values (ascending) and their residuals ``β_k|s_{kj}|`` of a Lanczos run."""
    theta, S = tridiagonal_eig(np.asarray(lz.alphas), np.asarray(lz.betas[:-1]))
    return theta, lz.betas[-1] * np.abs(S[-1])


@dataclass(frozen=True)
class LanczosResult:
    """Top Ritz pair; ``residual = ‖Av − θv‖`` recomputed with one extra product (``‖v‖ = 1``)."""

    value: float
    vector: Tensor
    residual: float
    iterations: int
    converged: bool


def lanczos_top(
    matvec: Callable[[Tensor], Tensor], n: int, *, max_iter: int = 150, tol: float = 1e-9, seed: int = 0,
    device: torch.device | str = "cpu",
) -> LanczosResult:
    """Largest (algebraic) eigenvalue ``θ`` of a symmetric ``A`` given by ``matvec``.

    :class:`Lanczos` from a random unit vector (``seed``); stops when the Ritz residual
    ``β_k |s_k|`` of the top Ritz pair is ``≤ tol·|θ|``, or when the Krylov space is invariant. The
    vectors live on ``device`` (where ``matvec`` computes); the start is drawn on the CPU, so a seed
    gives the same run on every device.

    >>> A = torch.diag(torch.arange(1.0, 11.0, dtype=torch.float64))
    >>> r = lanczos_top(lambda v: A @ v, 10)
    >>> round(r.value, 12), r.converged
    (10.0, True)
    """
    if n < 1 or max_iter < 1 or not tol > 0:
        raise InvalidInputError("lanczos_top needs n ≥ 1, max_iter ≥ 1 and tol > 0")
    gen = torch.Generator().manual_seed(seed)
    start = torch.randn(n, generator=gen, dtype=torch.float64)  # drawn on the CPU: the same start on any device
    lz = Lanczos(start.to(device), min(max_iter, n))
    converged = False
    while len(lz.alphas) < lz.cap:
        broke = lz.step(matvec(lz.vector).to(torch.float64))
        theta, res = ritz(lz)
        if broke or res[-1] <= tol * max(abs(float(theta[-1])), 1e-300):
            converged = True
            break
    theta, S = tridiagonal_eig(np.asarray(lz.alphas), np.asarray(lz.betas[:-1]))
    k = len(lz.alphas)
    y = lz.V[:k].T @ torch.from_numpy(np.ascontiguousarray(S[:, -1])).to(lz.V.device)
    y = y / safe_norm(y)
    value = float(theta[-1])
    residual = safe_norm(matvec(y).to(torch.float64) - value * y)
    return LanczosResult(value, y, residual, k, converged)
