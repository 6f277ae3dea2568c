"""λ's meaning for a band-limited signal: the growth rate of ``‖Dⁿf‖`` is ``log Ω``.

``f(t) = Σ_{k=1}^{Ω} cos(k t + φ_k)`` on one period ``[0, 2π)`` (``samples`` points, ``Ω < samples/2``), phases
``φ_k`` drawn from ``seed``, given by its spectrum ``F`` (zero above ``Ω``); ``Dⁿf = F⁻¹[(ik)ⁿ F]`` by the
inverse FFT, and the norm is taken over the samples. By
Parseval ``‖Dⁿf‖² = ½ Σ_k k^{2n}`` (mean square over the period), independent of the phases. Two facts
bound the fitted rate without fitting anything:

* Bernstein: every ``k ≤ Ω``, so the local slope ``s_n = log‖D^{n+1}f‖ − log‖Dⁿf‖ ≤ log Ω``;
* log-convexity (Cauchy–Schwarz on the Parseval sums): ``s_n`` is non-decreasing in ``n``.

For consecutive orders the least-squares slope is a positive weighted mean of the local slopes, so
``s_{n₁} ≤ λ ≤ log Ω``: the stated error bound is ``log Ω − s_{n₁}`` (it shrinks like ``1/(2n₁)`` for this flat
spectrum), up to float64 round-off. A numeric result: evidence, not proof.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["BandLimitedRate", "band_limited_rate"]


@dataclass(frozen=True)
class BandLimitedRate:
    """The fitted growth rate of ``log‖Dⁿf‖`` (``rate``) against ``log Ω`` with its stated bound."""

    omega: int
    orders: tuple[int, ...]
    log_norms: tuple[float, ...]
    rate: float
    bound: float  # log Ω − s_{n₁}: the theory puts log Ω − rate in [0, bound]
    samples: int
    seed: int

    @property
    def target(self) -> float:
        """``log Ω``."""
        return math.log(self.omega)

    @property
    def error(self) -> float:
        """``|rate − log Ω|``."""
        return abs(self.rate - self.target)

    @property
    def within_bound(self) -> bool:
        """``0 ≤ log Ω − rate ≤ bound`` up to a round-off allowance of ``1e-9``."""
        gap = self.target - self.rate
        return -1e-9 <= gap <= self.bound + 1e-9


def band_limited_rate(omega: int = 50, *, orders: Sequence[int] = tuple(range(10, 31)), samples: int = 1024,
                      seed: int = 0) -> BandLimitedRate:
    """``λ`` = least-squares slope of ``log‖Dⁿf‖`` against ``n`` over consecutive ``orders`` for the random-phase
    signal of cutoff ``omega`` (module docstring), with the bound ``log Ω − s_{n₁}``.

    >>> r = band_limited_rate(20, orders=range(8, 16))
    >>> r.within_bound, r.error <= r.bound
    (True, True)
    """
    orders = tuple(orders)
    if len(orders) < 2 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in orders) or \
            any(b != a + 1 for a, b in zip(orders, orders[1:])):
        raise InvalidInputError(f"orders must be at least two consecutive positive ints, got {orders!r}")
    if isinstance(omega, bool) or not isinstance(omega, int) or omega < 1:
        raise InvalidInputError(f"omega must be an int ≥ 1 (the highest frequency), got {omega!r}")
    if not isinstance(samples, int) or samples <= 2 * omega:
        raise InvalidInputError(f"samples must exceed 2·omega = {2 * omega} (no aliasing), got {samples!r}")
    gen = torch.Generator().manual_seed(seed)
    phases = 2 * math.pi * torch.rand(omega, generator=gen, dtype=torch.float64)
    # the signal is defined by its spectrum: exactly zero above Ω (an FFT of sampled cosines would leave
    # round-off there, which (ik)ⁿ amplifies by (samples/2Ω)ⁿ)
    F = torch.zeros(samples // 2 + 1, dtype=torch.complex128)
    F[1:omega + 1] = (samples / 2) * torch.polar(torch.ones(omega, dtype=torch.float64), phases)
    ik = 1j * torch.arange(F.shape[0], dtype=torch.float64)
    logs = []
    for n in range(orders[0], orders[-1] + 2):  # one beyond the last: the last local slope
        d = torch.fft.irfft(F * ik**n, n=samples)
        logs.append(0.5 * math.log(float((d * d).mean())))
    x = torch.tensor(orders, dtype=torch.float64)
    v = torch.tensor(logs[:-1], dtype=torch.float64)
    xc = x - x.mean()
    rate = float((xc * (v - v.mean())).sum() / (xc * xc).sum())
    return BandLimitedRate(omega, orders, tuple(logs[:-1]), rate, math.log(omega) - (logs[1] - logs[0]), samples, seed)
