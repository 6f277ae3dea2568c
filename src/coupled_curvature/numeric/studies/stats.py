"""Rank statistics for the width sweep: Kendall's τ-b and a cluster (seed) bootstrap interval.

``τ_b = (n_c − n_d) / √((n₀ − n₁)(n₀ − n₂))`` over all pairs ``i < j``: ``n_c``/``n_d`` concordant
and discordant pairs, ``n₀ = n(n−1)/2``, ``n₁``/``n₂`` pairs tied in ``x``/``y``. The bootstrap
resamples whole clusters (seeds) with replacement, so nets that share a seed stay together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["MeanInterval", "TauInterval", "cluster_bootstrap_tau", "cluster_draws", "kendall_tau", "loglog_slope", "mean_interval"]


def _vector(v: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what} must be a sequence of numbers") from None
    if a.ndim != 1:
        raise InvalidInputError(f"{what} must be one-dimensional, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InvalidInputError(f"{what} holds NaN or infinite values; drop those entries first")
    return a


def _pair(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = _vector(x, "x"), _vector(y, "y")
    if a.shape != b.shape:
        raise InvalidInputError(f"x and y must have the same length, got {a.size} and {b.size}")
    return a, b


def _signs(v: np.ndarray) -> np.ndarray:
    """``S[i, j] = sign(v_i − v_j)`` (0 on ties, including the diagonal)."""
    return np.sign(v[:, None] - v[None, :]).astype(np.int8)


def _tau_from_signs(sx: np.ndarray, sy: np.ndarray) -> float | None:
    n = sx.shape[0]
    n0 = n * (n - 1) // 2
    s = int((sx.astype(np.int64) * sy).sum()) // 2  # each unordered pair counted twice
    n1 = (int((sx == 0).sum()) - n) // 2  # tied pairs off the diagonal
    n2 = (int((sy == 0).sum()) - n) // 2
    denom = (n0 - n1) * (n0 - n2)
    if denom <= 0:
        return None
    return s / math.sqrt(denom)


def _check_bootstrap(n_boot: int, level: float) -> None:
    """Refuse a replicate count that is not an int ≥ 1 or a level outside ``(0, 1)``."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise InvalidInputError(f"n_boot must be an int ≥ 1, got {n_boot!r}")
    if not 0.0 < level < 1.0:
        raise InvalidInputError(f"level must be in (0, 1), got {level!r}")


def kendall_tau(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Kendall's ``τ_b = (n_c − n_d)/√((n₀ − n₁)(n₀ − n₂))`` (ties handled as in scipy's default).

    Returns ``None`` when undefined (fewer than two points, or ``x`` or ``y`` constant), never NaN.

    >>> kendall_tau([1, 2, 3, 4], [10, 20, 30, 40])
    1.0
    >>> round(kendall_tau([1, 2, 2, 3], [1, 3, 2, 3]), 6)  # one x-tie, one y-tie
    0.8
    >>> kendall_tau([1, 1, 1], [1, 2, 3]) is None
    True
    """
    a, b = _pair(x, y)
    if a.size < 2:
        return None
    return _tau_from_signs(_signs(a), _signs(b))


@dataclass(frozen=True)
class TauInterval:
    """``tau`` on the full sample and the percentile interval ``[low, high]`` of the cluster
    bootstrap (``None`` when undefined: fewer than two clusters, or too few defined replicates);
    ``replicates`` holds every defined bootstrap value, in draw order."""

    tau: float | None
    low: float | None
    high: float | None
    level: float
    n_boot: int
    n_valid: int
    n_clusters: int
    n: int
    replicates: tuple[float, ...] = field(default=(), repr=False, compare=False)


def cluster_draws(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """The cluster indices of every replicate: ``default_rng(seed).integers(0, C, size=(n_boot, C))``."""
    return np.random.default_rng(seed).integers(0, n_clusters, size=(n_boot, n_clusters))


def cluster_bootstrap_tau(
    x: Sequence[float],
    y: Sequence[float],
    clusters: Sequence[Any],  # any hashable labels: sorted where comparable, else by repr
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> TauInterval:
    """``τ_b(x, y)`` with a percentile bootstrap interval over clusters.

    The ``C`` distinct cluster labels are sorted; replicate ``r`` takes, for every index ``k`` in
    row ``r`` of :func:`cluster_draws`, every point of cluster ``k`` (a cluster drawn twice counts
    twice, its copies tied in both variables) and recomputes ``τ_b``. The interval is
    ``[q_{(1−level)/2}, q_{(1+level)/2}]`` of the defined replicates, reported only with at least two
    clusters and when at least half the replicates are defined.

    Computed without materialising the replicates: with membership matrix ``M`` (points × clusters),
    ``A = Mᵀ(S_x∘S_y)M`` and ``Z_x = Mᵀ[S_x = 0]M`` (``S`` the sign matrices), a replicate with
    cluster counts ``c`` has ``n_c − n_d = cᵀAc/2``, ``n₁ = (cᵀZ_xc − m)/2`` and ``m = Σ_k c_k|k|`` points.

    >>> x = list(range(12)); clusters = [i % 4 for i in range(12)]
    >>> r = cluster_bootstrap_tau(x, [2 * v for v in x], clusters, n_boot=200)
    >>> (r.tau, r.low, r.high, r.n_clusters)
    (1.0, 1.0, 1.0, 4)
    """
    a, b = _pair(x, y)
    if len(clusters) != a.size:
        raise InvalidInputError(f"clusters must label every point: {len(clusters)} labels for {a.size} points")
    _check_bootstrap(n_boot, level)
    try:
        labels = sorted(set(clusters))
    except TypeError:
        labels = sorted(set(clusters), key=repr)
    index = {lab: k for k, lab in enumerate(labels)}
    n_c = len(labels)
    full = kendall_tau(a, b) if a.size >= 2 else None
    if n_c == 0:
        return TauInterval(full, None, None, level, n_boot, 0, 0, int(a.size))
    M = np.zeros((a.size, n_c))
    M[np.arange(a.size), [index[c] for c in clusters]] = 1.0
    sx, sy = _signs(a).astype(np.float64), _signs(b).astype(np.float64)
    A = M.T @ (sx * sy) @ M
    Zx, Zy = M.T @ (sx == 0) @ M, M.T @ (sy == 0) @ M
    sizes = M.sum(axis=0)
    counts = np.zeros((n_boot, n_c))
    draws = cluster_draws(n_c, n_boot, seed)
    np.add.at(counts, (np.repeat(np.arange(n_boot), n_c), draws.reshape(-1)), 1.0)
    m = counts @ sizes
    s = np.einsum("bk,kl,bl->b", counts, A, counts) / 2.0
    n0 = m * (m - 1.0) / 2.0
    n1 = (np.einsum("bk,kl,bl->b", counts, Zx, counts) - m) / 2.0
    n2 = (np.einsum("bk,kl,bl->b", counts, Zy, counts) - m) / 2.0
    denom = (n0 - n1) * (n0 - n2)
    ok = denom > 0.5  # integer counts: positive means ≥ 1
    reps = s[ok] / np.sqrt(denom[ok])
    low = high = None
    if n_c >= 2 and full is not None and reps.size >= max(1, n_boot // 2):
        alpha = (1.0 - level) / 2.0
        low, high = (float(q) for q in np.quantile(reps, [alpha, 1.0 - alpha]))
    return TauInterval(full, low, high, level, n_boot, int(reps.size), n_c, int(a.size), tuple(map(float, reps)))


def loglog_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of ``log₁₀ y`` against ``log₁₀ x``: ``Σ(u − ū)(v − v̄) / Σ(u − ū)²`` with
    ``u = log₁₀ x``, ``v = log₁₀ y``, over the points with ``y > 0`` (``None`` if fewer than two, or if
    every ``x`` is the same).

    >>> loglog_slope([1e-4, 1e-6, 1e-8], [2e-3, 2e-5, 2e-7])
    1.0
    >>> loglog_slope([1.0, 2.0], [None, 3.0]) is None
    True
    """
    pts = [(math.log10(x), math.log10(y)) for x, y in zip(xs, ys) if y is not None and y > 0.0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den > 0 else None


@dataclass(frozen=True)
class MeanInterval:
    """The mean over seeds of one quantity and its seed-bootstrap percentile interval (``None`` where no value)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


def mean_interval(values: Sequence[float | None], *, n_boot: int = 2000, seed: int = 0,
                  level: float = 0.95) -> MeanInterval:
    """``mean(v)`` and the ``level`` percentile interval of the mean over ``n_boot`` resamples of the seeds.

    Values that are ``None`` or not finite are dropped first (``n`` counts the rest); one value gives a
    zero-width interval, none gives ``None`` throughout. The replicates are ``v[draws].mean(axis=1)`` with
    ``draws = default_rng(seed).integers(0, n, (n_boot, n))``: paired differences passed in as one list
    keep their pairing.

    >>> r = mean_interval([1.0, 2.0, 3.0, 4.0], n_boot=500)
    >>> r.mean, r.low < 2.5 < r.high, r.n
    (2.5, True, 4)
    >>> mean_interval([None, float("nan")]).mean is None
    True
    """
    _check_bootstrap(n_boot, level)
    v = np.array([float(x) for x in values if x is not None and math.isfinite(float(x))], dtype=np.float64)
    if v.size == 0:
        return MeanInterval(None, None, None, 0)
    reps = v[cluster_draws(v.size, n_boot, seed)].mean(axis=1)
    a = (1.0 - level) / 2.0
    return MeanInterval(float(v.mean()), float(np.quantile(reps, a)), float(np.quantile(reps, 1.0 - a)), int(v.size))
