"""Fixed-radius (SAM-style ℓ2) and magnitude-adaptive sharpness of a loss at a point."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import check_positive
from coupled_curvature.numeric.linalg.scaled import safe_norm

LossFn = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class SharpnessResult:
    """``value = L(θ+δ*) − L(θ)`` for the best (or mean) perturbation found."""

    value: float
    radius: float
    steps: int
    stderr: float | None = None


def _check(rho: float, steps: int, lr: float | None = None) -> None:
    check_positive(rho, "the radius rho")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidInputError(f"steps must be an int ≥ 1, got {steps!r}")
    if lr is not None:
        check_positive(lr, "lr", hint="; it is the ascent step as a fraction of the radius: pass e.g. 0.5")


def _ascent(loss: LossFn, theta0: Tensor, scale: Tensor, rho: float, steps: int, lr: float,
            start: Tensor) -> float:
    """Projected normalised-gradient ascent on ``ε`` in ``L(θ₀ + scale⊙ε)``, ``‖ε‖ ≤ ρ``; best value."""
    eps = start.clone()
    with torch.no_grad():
        base = float(loss(theta0))
        best = float(loss(theta0 + scale * eps)) - base
    for _ in range(steps):
        e = eps.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(theta0 + scale * e), e, allow_unused=True)
        g_norm = safe_norm(g) if g is not None else 0.0
        if g_norm == 0.0 or not math.isfinite(g_norm):
            break
        eps = eps + (lr * rho) * (g / g_norm)
        norm = safe_norm(eps)  # a plain norm's squares overflow at radii near 1e300 (and ε collapsed to 0)
        if norm > rho:
            eps = eps * (rho / norm)
        with torch.no_grad():
            best = max(best, float(loss(theta0 + scale * eps)) - base)
    return best


def sam_sharpness(loss: LossFn, theta0: Tensor, *, rho: float = 0.05, steps: int = 10, lr: float = 0.5,
                  restarts: int = 0, seed: int = 0) -> SharpnessResult:
    """``max_{‖δ‖₂ ≤ ρ} L(θ₀+δ) − L(θ₀)`` by projected normalised-gradient ascent (a lower bound).

    The first run starts at ``δ = 0`` (so its first step is SAM's ``ρ g/‖g‖`` scaled by ``lr``) and is
    equivariant under orthogonal changes of coordinates; ``restarts`` extra runs start at random
    points of the sphere drawn from ``seed``.

    >>> q = lambda t: (t * t * torch.tensor([1.0, 4.0], dtype=torch.float64)).sum()
    >>> r = sam_sharpness(q, torch.tensor([0.0, 1e-3], dtype=torch.float64), rho=0.1, steps=50)
    >>> abs(r.value - (4 * (0.1 + 1e-3) ** 2 - 4e-6)) < 1e-9
    True
    """
    _check(rho, steps, lr)
    one = torch.ones_like(theta0)
    best = _ascent(loss, theta0, one, rho, steps, lr, torch.zeros_like(theta0))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(restarts):
        z = torch.randn(theta0.shape, generator=gen, dtype=theta0.dtype)
        best = max(best, _ascent(loss, theta0, one, rho, steps, lr, rho * (z / safe_norm(z))))
    return SharpnessResult(best, rho, steps)


def adaptive_worst(loss: LossFn, theta0: Tensor, *, rho: float = 0.5, steps: int = 10, lr: float = 0.5) -> SharpnessResult:
    """``max_{‖δ/|θ₀|‖₂ ≤ ρ} L(θ₀+δ) − L(θ₀)`` (η = 0): ascent on ``ε`` with ``δ = |θ₀|⊙ε``, from ``ε = 0``.

    Element-wise scalings ``θ -> a⊙θ`` (``a > 0``) leave ``ε ↦ L(θ₀ + |θ₀|⊙ε)`` unchanged, and the
    ascent from 0 is permutation-equivariant, so the computed value is invariant under both.

    >>> q = lambda t: (t * t).sum()
    >>> r = adaptive_worst(q, torch.tensor([2.0], dtype=torch.float64), rho=0.1, steps=5)
    >>> round(r.value, 12)  # (2·1.1)² − 2²
    0.84
    """
    _check(rho, steps, lr)
    return SharpnessResult(_ascent(loss, theta0, theta0.abs(), rho, steps, lr, torch.zeros_like(theta0)), rho, steps)


def adaptive_average(loss: LossFn, theta0: Tensor, *, rho: float = 0.5, samples: int = 32, seed: int = 0) -> SharpnessResult:
    """``E_ε[L(θ₀ + |θ₀|⊙ε)] − L(θ₀)`` with ``ε`` uniform on the sphere ``‖ε‖ = ρ``.

    Common random numbers: the same ``samples`` draws of ``ε`` (from ``seed``, in normalised
    coordinates, one per coordinate index) are used for every model, so the estimate is exactly
    invariant under element-wise positive scalings; a permutation re-indexes the coordinates, so
    there the estimate is invariant only in distribution. Returns the mean and its standard error.

    >>> q = lambda t: (t * t).sum()
    >>> r = adaptive_average(q, torch.tensor([1.0, -1.0], dtype=torch.float64), rho=0.1, samples=64)
    >>> abs(r.value - 0.01) < 5 * r.stderr  # E = ρ² here (the linear term averages out)
    True
    """
    _check(rho, max(samples, 1))
    gen = torch.Generator().manual_seed(seed)
    scale = theta0.abs()
    vals = []
    with torch.no_grad():
        base = float(loss(theta0))
        for _ in range(samples):
            z = torch.randn(theta0.shape, generator=gen, dtype=theta0.dtype)
            vals.append(float(loss(theta0 + scale * (rho * (z / safe_norm(z))))) - base)
    t = torch.tensor(vals, dtype=torch.float64)
    stderr = float(t.std() / math.sqrt(len(vals))) if len(vals) > 1 else None
    return SharpnessResult(float(t.mean()), rho, samples, stderr)
