"""Kendall τ-b against scipy (ties included) and the seed-cluster bootstrap's basic behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.studies.stats import cluster_bootstrap_tau, cluster_draws, kendall_tau


def _brute_tau_b(x, y):
    """Independent reference: loops over pairs, the textbook τ-b formula."""
    n = len(x)
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0:
                tx += 1
            if dy == 0:
                ty += 1
            if dx * dy > 0:
                conc += 1
            elif dx * dy < 0:
                disc += 1
    n0 = n * (n - 1) // 2
    return (conc - disc) / np.sqrt((n0 - tx) * (n0 - ty))


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=40))
def test_tau_matches_scipy_with_many_ties(pairs):
    x = [float(a) for a, _ in pairs]
    y = [float(b) for _, b in pairs]
    ref = kendalltau(x, y).statistic  # scipy's default variant is τ-b
    mine = kendall_tau(x, y)
    if np.isnan(ref):
        assert mine is None  # undefined (a constant variable): None, never NaN
    else:
        assert mine == pytest.approx(ref, abs=1e-12)
        assert mine == pytest.approx(_brute_tau_b(x, y), abs=1e-12)


@settings(max_examples=30)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=2, max_size=60))
def test_tau_matches_scipy_on_continuous_values(pairs):
    x, y = [a for a, _ in pairs], [b for _, b in pairs]
    ref = kendalltau(x, y).statistic
    mine = kendall_tau(x, y)
    assert (mine is None) if np.isnan(ref) else mine == pytest.approx(ref, abs=1e-12)


def test_tau_extremes_and_bad_input():
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1], [2]) is None
    with pytest.raises(InvalidInputError, match="same length"):
        kendall_tau([1, 2], [1, 2, 3])
    with pytest.raises(InvalidInputError, match="NaN"):
        kendall_tau([1, float("nan")], [1, 2])


def _clean_sample(n_seeds: int, per_seed: int, noise: float, rng_seed: int):
    rng = np.random.default_rng(rng_seed)
    x = rng.normal(size=n_seeds * per_seed)
    y = x + noise * rng.normal(size=x.size)
    clusters = np.repeat(np.arange(n_seeds), per_seed).tolist()
    return x, y, clusters


def test_bootstrap_ci_contains_tau_and_excludes_zero_for_a_large_clean_sample():
    x, y, clusters = _clean_sample(40, 10, 0.5, 1)
    r = cluster_bootstrap_tau(x, y, clusters, n_boot=500, seed=3)
    assert r.tau == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
    assert r.low < r.tau < r.high
    assert r.low > 0.3  # strongly related: the interval sits well above 0
    assert r.n_valid == 500 and r.n_clusters == 40 and r.n == 400


def test_bootstrap_negative_control_independent_variables_interval_covers_zero():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=400), rng.normal(size=400)
    r = cluster_bootstrap_tau(x, y, np.repeat(np.arange(40), 10).tolist(), n_boot=500, seed=0)
    assert abs(r.tau) < 0.1 and r.low < 0.0 < r.high


def test_bootstrap_interval_narrows_with_more_seeds():
    widths = []
    for n_seeds in (5, 20, 80):
        x, y, clusters = _clean_sample(n_seeds, 6, 1.0, 11)
        r = cluster_bootstrap_tau(x, y, clusters, n_boot=400, seed=0)
        widths.append(r.high - r.low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[2] < 0.5 * widths[0]


@pytest.mark.parametrize("seed", [0, 3])
def test_bootstrap_replicates_match_explicit_cluster_resampling_with_scipy(seed):
    # reference: materialise every replicate (whole clusters, duplicates kept) and call scipy
    rng = np.random.default_rng(seed + 100)
    x = rng.integers(0, 4, size=15).astype(float)  # many ties, including across duplicated clusters
    y = x + rng.integers(0, 3, size=15)
    clusters = [7, 7, 7, 2, 2, 2, 2, 9, 9, 9, 9, 9, 4, 4, 4]
    r = cluster_bootstrap_tau(x, y, clusters, n_boot=200, seed=seed)
    labels = sorted(set(clusters))
    members = [np.flatnonzero(np.asarray(clusters) == lab) for lab in labels]
    ref = []
    for row in cluster_draws(len(labels), 200, seed):
        idx = np.concatenate([members[k] for k in row])
        t = kendalltau(x[idx], y[idx]).statistic
        if not np.isnan(t):
            ref.append(t)
    assert len(r.replicates) == len(ref) == r.n_valid
    np.testing.assert_allclose(r.replicates, ref, rtol=0, atol=1e-12)
    lo, hi = np.quantile(ref, [0.025, 0.975])
    assert (r.low, r.high) == pytest.approx((lo, hi), abs=1e-12)
    # a point bootstrap would differ: the replicates respect the clusters
    assert r.n_clusters == 4 and r.n == 15


def test_bootstrap_deterministic_under_seed_and_seed_matters():
    x, y, clusters = _clean_sample(8, 5, 2.0, 4)
    a = cluster_bootstrap_tau(x, y, clusters, n_boot=300, seed=5)
    b = cluster_bootstrap_tau(x, y, clusters, n_boot=300, seed=5)
    c = cluster_bootstrap_tau(x, y, clusters, n_boot=300, seed=6)
    assert a == b
    assert (c.low, c.high) != (a.low, a.high)


def test_bootstrap_undefined_cases_are_none_not_nan():
    r = cluster_bootstrap_tau([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0, 0, 0], n_boot=20)
    assert r.tau == 1.0 and r.low is None and r.high is None  # one cluster: no interval
    r = cluster_bootstrap_tau([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], [0, 0, 1, 1], n_boot=20)
    assert r.tau is None and r.low is None
    with pytest.raises(InvalidInputError, match="label every point"):
        cluster_bootstrap_tau([1.0, 2.0], [1.0, 2.0], [0])
    with pytest.raises(InvalidInputError, match="level"):
        cluster_bootstrap_tau([1.0, 2.0], [1.0, 2.0], [0, 1], level=1.5)
