"""Lanczos iteration with full reorthogonalisation for the largest eigenvalue of a symmetric operator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from coupled_curvature.errors import InvalidInputError


@dataclass(frozen=True)
class LanczosResult:
    """Top Ritz pair; ``residual = ‖Av − θv‖`` recomputed with one extra product (``‖v‖ = 1``)."""

    value: float
    vector: Tensor
    residual: float
    iterations: int
    converged: bool


def lanczos_top(
    matvec: Callable[[Tensor], Tensor], n: int, *, max_iter: int = 150, tol: float = 1e-9, seed: int = 0
) -> LanczosResult:
    """Largest (algebraic) eigenvalue of a symmetric ``A`` given by ``matvec``.

    Builds the Krylov basis ``V`` with full (twice-repeated Gram–Schmidt) reorthogonalisation
    and the tridiagonal ``T = VᵀAV``; stops when the Ritz residual ``β_k |s_k|`` of the top
    Ritz pair is ``≤ tol·|θ|`` (Ritz residual = ‖Ay − θy‖ in exact arithmetic).

    >>> A = torch.diag(torch.arange(1.0, 11.0, dtype=torch.float64))
    >>> r = lanczos_top(lambda v: A @ v, 10)
    >>> round(r.value, 12), r.converged
    (10.0, True)
    """
    if n < 1 or max_iter < 1 or not tol > 0:
        raise InvalidInputError("lanczos_top needs n ≥ 1, max_iter ≥ 1 and tol > 0")
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(n, generator=gen, dtype=torch.float64)
    v /= v.norm()
    V = [v]
    alphas: list[float] = []
    betas: list[float] = []
    k_max = min(max_iter, n)
    theta, y_coeff, converged = 0.0, torch.ones(1, dtype=torch.float64), False
    for k in range(k_max):
        w = matvec(V[k]).to(torch.float64)
        alpha = float(V[k] @ w)
        alphas.append(alpha)
        Vm = torch.stack(V)
        for _ in range(2):
            w = w - Vm.T @ (Vm @ w)
        beta = float(w.norm())
        T = torch.diag(torch.tensor(alphas, dtype=torch.float64))
        if betas:
            off = torch.tensor(betas, dtype=torch.float64)
            T = T + torch.diag(off, 1) + torch.diag(off, -1)
        evals, evecs = torch.linalg.eigh(T)
        theta, y_coeff = float(evals[-1]), evecs[:, -1]
        ritz_res = beta * abs(float(y_coeff[-1]))
        if ritz_res <= tol * max(abs(theta), 1e-300) or beta <= 1e-14 * max(abs(theta), 1e-300):
            converged = True
            break
        if k + 1 < k_max:
            betas.append(beta)
            V.append(w / beta)
    Vm = torch.stack(V[: len(alphas)])
    y = Vm.T @ y_coeff
    y = y / y.norm()
    residual = float((matvec(y).to(torch.float64) - theta * y).norm())
    return LanczosResult(theta, y, residual, len(alphas), converged)
