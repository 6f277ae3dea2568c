"""Lanczos quadrature for wᵀH⁺w (numeric/linalg/krylov_quadrature.py) and diagnose(method="krylov"|"auto").

References are independent of the code under test: matrices built as Q·diag(λ)·Qᵀ from a
chosen spectrum (the exact value is Σ_{|λ_i| > rtol·max|λ|} (q_iᵀw)²/λ_i), numpy's pinv,
numeric/linalg/pinv.py's dense eigendecomposition, and diagnose(method="dense").
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import functional_call, hessian

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm, LanczosRun, krylov_pinv_form, rethreshold
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale
from tests.numeric._nets import data, mlp, rel

CE = torch.nn.CrossEntropyLoss()
KINDS = ("psd_lowrank", "indefinite", "straddle", "cluster", "tiny_gap", "hidden_top",
         "hidden_near_cut", "continuum", "w_in_null")


def exact(lam, c, rtol):
    """Σ over |λ_i| > rtol·max|λ| of c_i²/λ_i: the value by construction."""
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    return float(np.sum(c[keep] ** 2 / lam[keep]))


def spectrum(kind, n, rtol, rng):
    """Eigenvalues λ and coefficients c = Qᵀw of a hard test case."""
    lam = 10 ** rng.uniform(-2, 0, n)
    c = rng.standard_normal(n)
    if kind == "psd_lowrank":
        r = int(rng.integers(1, n // 2 + 1))
        lam = np.concatenate([10 ** rng.uniform(-8, 0, r), np.zeros(n - r)])
    elif kind == "indefinite":
        lam = rng.choice([-1.0, 1.0], n) * 10 ** rng.uniform(-9, 0, n)
        lam[rng.random(n) < 0.3] = 0.0
    elif kind == "straddle":  # many eigenvalues within a factor 2 of the cutoff
        lam = rtol * 10 ** rng.uniform(-0.3, 0.3, n) * rng.choice([-1.0, 1.0], n)
        lam[0] = 1.0
    elif kind == "cluster":
        centres = 10 ** rng.uniform(-7, 0, 5)
        lam = rng.choice(centres, n) * (1 + 1e-9 * rng.standard_normal(n))
        lam[rng.random(n) < 0.3] = 0.0
    elif kind == "tiny_gap":
        lam = np.linspace(1e-3, 1, n)
        lam[: n // 2] = 1e-3 + 1e-12 * np.arange(n // 2)
    elif kind == "hidden_top":  # w ⊥ the top eigenvector, which sets the cutoff
        lam[0], c[0] = 10 ** rng.uniform(1, 6), 0.0
        lam[1:5] = lam[0] * rtol * 10 ** rng.uniform(-1, 1, 4)
    elif kind == "hidden_near_cut":  # small weights on eigenvalues just either side of the cutoff
        lam[:3] = rtol * (1 + rng.choice([-1.0, 1.0], 3) * 10 ** rng.uniform(-4, -1, 3))
        c[:3] *= 10 ** rng.uniform(-8, -2, 3)
    elif kind == "continuum":
        lam = 10 ** rng.uniform(-16, 0, n) * rng.choice([-1.0, 1.0], n, p=[0.2, 0.8])
    elif kind == "w_in_null":
        lam[: n // 2] = 0.0
        c[n // 2:] *= 10 ** rng.uniform(-8, -1)
    return lam * 10 ** rng.uniform(-3, 3), c


def operator(lam, c, rng):
    """Dense symmetric H = Q diag(λ) Qᵀ with a random orthogonal Q, and w = Qc."""
    n = len(lam)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = (Q * lam) @ Q.T
    H = torch.from_numpy(0.5 * (H + H.T))
    return H, torch.from_numpy(Q @ c)


def householder_operator(lam, rng):
    """H = P diag(λ) P with P a product of three Householder reflections: O(n) products."""
    n = len(lam)
    us = [torch.from_numpy(rng.standard_normal(n)) for _ in range(3)]
    us = [u / u.norm() for u in us]
    lam_t = torch.from_numpy(lam)

    def reflect(v, order):
        for u in order:
            v = v - 2.0 * u * (u @ v)
        return v

    def P(v):  # P = R1 R2 R3, Pᵀ = R3 R2 R1
        return reflect(v, us[::-1])

    def Pt(v):
        return reflect(v, us)

    return (lambda v: P(lam_t * Pt(v))), P


# -- accuracy against dense on 1k–4k blocks ---------------------------------------------------


def test_matches_dense_on_a_1000_parameter_block():
    rng = np.random.default_rng(2)
    n, r, rtol = 1000, 120, 1e-10
    lam = np.zeros(n)
    lam[:r] = rng.choice([-1.0, 1.0], r) * 10 ** rng.uniform(-6, 1, r)
    matvec, P = householder_operator(lam, rng)
    H = torch.stack([P(col) for col in torch.diag(torch.from_numpy(lam))])  # rows Pᵀ-side: H = P Λ Pᵀ
    H = torch.stack([P(row) for row in H.T.contiguous()])
    H = 0.5 * (H + H.T)
    w = torch.from_numpy(rng.standard_normal(n))
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol)
    dense = pinv_quadratic_form(H, w, rtol)
    npy = float(w.numpy() @ np.linalg.pinv(H.numpy(), rcond=rtol, hermitian=True) @ w.numpy())
    assert rel(float(w @ (H @ w)), float(w @ matvec(w))) <= 1e-12  # H is the operator
    assert f.converged and f.invariant
    assert rel(f.value, dense.value) <= 1e-6 and rel(f.value, npy) <= 1e-6
    assert f.rank == dense.rank == r
    assert rel(f.wHw, float(w @ H @ w)) <= 1e-12
    assert rel(f.max_abs_eig, dense.max_abs_eig) <= 1e-12
    assert lam.min() - 1e-12 <= f.ritz_min <= f.ritz_max <= lam.max() + 1e-12


@pytest.mark.parametrize("n", [2000, 4000])
def test_matches_construction_on_large_low_rank_blocks(n):
    rng = np.random.default_rng(n)
    r = 150
    lam = np.zeros(n)
    lam[:r] = 10 ** rng.uniform(-5, 0, r)
    if n == 4000:  # indefinite
        lam[: r // 2] *= -1
    matvec, P = householder_operator(lam, rng)
    c = rng.standard_normal(n)
    w = P(torch.from_numpy(c))
    f = krylov_pinv_form(matvec, w, rtol=1e-9)
    assert f.converged and f.rank == r
    assert rel(f.value, exact(lam, c, 1e-9)) <= 1e-6
    assert rel(f.wHw, float(np.sum(lam * c**2))) <= 1e-10


def test_ill_conditioned_kept_spectrum_needs_a_looser_tol():
    """Kept eigenvalues down to 1e-7·max|λ|: rounding alone may move wᵀH⁺w by ~1e-8 relative,
    so the default tol=1e-7 may abstain; tol=1e-6 certifies, and the value is right."""
    rng = np.random.default_rng(3)
    n, r = 2000, 150
    lam = np.zeros(n)
    lam[:r] = rng.choice([-1.0, 1.0], r) * 10 ** rng.uniform(-7, 0, r)
    matvec, P = householder_operator(lam, rng)
    c = rng.standard_normal(n)
    f = krylov_pinv_form(matvec, P(torch.from_numpy(c)), rtol=1e-9, tol=1e-6)
    assert f.converged and f.invariant and 1e-9 < f.error_estimate <= 1e-6
    assert rel(f.value, exact(lam, c, 1e-9)) <= 1e-6


def test_whw_is_exact_from_the_first_coefficient():
    rng = np.random.default_rng(5)
    lam, c = spectrum("indefinite", 80, 1e-8, rng)
    H, w = operator(lam, c, rng)
    for max_iter in (1, 3, 200):
        f = krylov_pinv_form(lambda v: H @ v, w, max_iter=max_iter)
        assert rel(f.wHw, float(w @ (H @ w))) <= 1e-13


def test_gauss_quadrature_matches_an_independent_evaluation_of_the_tridiagonal():
    """value = ‖w‖² e₁ᵀ f(T) e₁ recomputed here with numpy from the stored T."""
    rng = np.random.default_rng(6)
    lam, c = spectrum("indefinite", 60, 1e-6, rng)
    H, w = operator(lam, c, rng)
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=1e-6, max_iter=25)
    assert f.w_steps == 25 and not f.converged
    T = np.diag(f.alphas) + np.diag(f.betas[:-1], 1) + np.diag(f.betas[:-1], -1)
    theta, S = np.linalg.eigh(T)
    rho = max(np.abs(theta).max(), f.probe_radius[0])
    keep = np.abs(theta) > 1e-6 * rho
    assert rel(f.value, float(w @ w) * np.sum(S[0, keep] ** 2 / theta[keep])) <= 1e-12


def test_terminates_exactly_on_an_invariant_space():
    lam = torch.tensor([3.0, 3.0, -1.0, 1e-3, 0.0, 0.0, 0.0, 2.0], dtype=torch.float64)
    H = torch.diag(lam)  # exact multiplicities
    w = torch.from_numpy(np.random.default_rng(7).standard_normal(8))
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=1e-10)
    # distinct eigenvalues with weight: 3, -1, 1e-3, 0, 2 -> an invariant space of dimension 5
    assert f.invariant and f.converged and f.w_steps == 5 and f.rank == 4
    assert rel(f.value, pinv_quadratic_form(H, w, 1e-10).value) <= 1e-10


def test_probe_finds_the_top_eigenvalue_that_w_cannot_see():
    n, rtol = 60, 1e-3
    lam = np.linspace(1.0, 2.0, n)
    lam[0] = 1e3  # w ⊥ its eigenvector; it sets τ = 1 which cuts the eigenvalues below 1
    lam[1:4] = [0.5, 0.9, 0.99]
    c = np.ones(n)
    c[0] = 0.0
    H, w = operator(lam, c, np.random.default_rng(8))
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol)
    assert rel(f.max_abs_eig, 1e3) <= 1e-2
    assert not f.converged or rel(f.value, exact(lam, c, rtol)) <= 1e-6
    # the probe ran at most 64 extra products and its bracket contains the truth
    assert 0 < f.probe_steps <= 64 and f.probe_radius[0] <= 1e3 * (1 + 1e-12) <= f.probe_radius[1] * (1 + 1e-9)


def test_w_in_the_null_space_gives_exactly_zero():
    lam = np.array([0.0, 0.0, 1.0, 2.0, 0.0, 3.0])
    c = np.array([1.0, -2.0, 0.0, 0.0, 0.5, 0.0])
    H, w = operator(lam, c, np.random.default_rng(9))  # rounding leaves Hw ≈ 1e-16, not 0
    f = krylov_pinv_form(lambda v: H @ v, w)
    assert f.converged and f.invariant and f.rank == 0 and abs(f.value) <= 1e-12 * float(w @ w)
    zero = krylov_pinv_form(lambda v: H @ v, torch.zeros(6, dtype=torch.float64))
    assert zero.value == 0.0 and zero.converged and zero.iterations == 0


# -- never wrong when it says converged ---------------------------------------------------------


def _verdict(kind, n, log_rtol, seed, budget):
    rng = np.random.default_rng(seed)
    rtol = 10.0**log_rtol
    lam, c = spectrum(kind, n, rtol, rng)
    H, w = operator(lam, c, rng)
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol, max_iter=max(2, int(budget * n)))
    truth = exact(lam, c, rtol)
    err = abs(f.value - truth) / abs(truth) if truth else abs(f.value)
    return f, err


@settings(derandomize=True, max_examples=25, deadline=None)
@given(kind=st.sampled_from(KINDS), n=st.integers(20, 120), log_rtol=st.floats(-10, -2),
       seed=st.integers(0, 2**16), budget=st.floats(0.1, 2.0))
def test_never_reports_convergence_when_wrong(kind, n, log_rtol, seed, budget):
    f, err = _verdict(kind, n, log_rtol, seed, budget)
    assert not f.converged or err <= 1e-6, (kind, n, log_rtol, seed, f.iterations, err, f.error_estimate)
    assert math.isfinite(f.value)


@pytest.mark.slow
@settings(derandomize=True, max_examples=400, deadline=None)
@given(kind=st.sampled_from(KINDS), n=st.integers(20, 400), log_rtol=st.floats(-12, -1),
       seed=st.integers(0, 2**30), budget=st.floats(0.05, 2.0))
def test_never_reports_convergence_when_wrong_many(kind, n, log_rtol, seed, budget):
    f, err = _verdict(kind, n, log_rtol, seed, budget)
    assert not f.converged or err <= 1e-6, (kind, n, log_rtol, seed, f.iterations, err, f.error_estimate)


def test_the_hard_family_is_not_vacuous():
    """With enough budget, most families converge, and every converged case is accurate."""
    converged = 0
    for i, kind in enumerate(KINDS):
        for seed in range(2):
            f, err = _verdict(kind, 60, -8.0 + seed, 100 * i + seed, 2.0)
            assert not f.converged or err <= 1e-6
            converged += f.converged
    assert converged >= len(KINDS)  # at least half of the 18 cases


def _naive(f: KrylovForm, rtol: float, m: int) -> float:
    """Gauss quadrature after m steps with τ from the w run's Ritz values alone."""
    a, b = np.asarray(f.alphas[:m]), np.asarray(f.betas[: m - 1])
    theta, S = np.linalg.eigh(np.diag(a) + np.diag(b, 1) + np.diag(b, -1))
    keep = np.abs(theta) > rtol * np.abs(theta).max()
    return f.w_norm**2 * float(np.sum(S[0, keep] ** 2 / theta[keep]))


def test_negative_control_a_naive_stopping_rule_is_wrong_where_ours_abstains():
    """Proves the property test can fail: 'stable for 4 steps' on the w run alone, with τ taken
    from its Ritz values, declares convergence on these spectra while off by far more than 1e-6."""
    # (1) the top eigenvalue is invisible from w: τ is underestimated, a dropped eigenvalue is kept
    n, rtol = 40, 1e-3
    lam = np.linspace(1.0, 2.0, n)
    lam[0], lam[1] = 1e3, 0.5
    c = np.ones(n)
    c[0] = 0.0
    H, w = torch.diag(torch.from_numpy(lam)), torch.from_numpy(c)  # diagonal: w ⊥ e₀ exactly
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol)
    truth = exact(lam, c, rtol)
    naive = [_naive(f, rtol, m) for m in range(1, f.w_steps + 1)]
    stable = [m for m in range(5, f.w_steps + 1)
              if all(abs(naive[m - 1] - naive[m - 1 - j]) <= 1e-8 * abs(naive[m - 1]) for j in range(1, 5))]
    assert stable and rel(naive[stable[0] - 1], truth) > 1e-2
    assert not f.converged or rel(f.value, truth) <= 1e-6
    assert rel(f.value, truth) <= 1e-6  # the probe fixes τ here
    # (2) too few steps: max_iter=2 is wrong, and says so
    short = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol, max_iter=2)
    assert rel(short.value, truth) > 1e-3 and not short.converged and short.error_estimate > 1e-6
    assert short.notes and "did not converge" in short.notes[0]


def test_negative_control_small_weight_just_above_the_cutoff():
    """An eigenvalue 3 % above τ carrying a 1e-4 share of w: the estimate stalls long before
    Lanczos finds it. A stall-based rule stops early and is wrong; ours keeps going."""
    n, rtol = 150, 1e-9
    rng = np.random.default_rng(11)
    lam = 10 ** rng.uniform(-2, 0, n)
    lam[0] = 1.0
    lam[1] = 1.03 * rtol
    c = rng.standard_normal(n)
    c[1] = 1e-4
    H, w = operator(lam, c, rng)
    truth = exact(lam, c, rtol)
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol, max_iter=60)
    naive = [_naive(f, rtol, m) for m in range(1, 61)]
    stalled = [m for m in range(5, 61)
               if all(abs(naive[m - 1] - naive[m - 1 - j]) <= 1e-8 * abs(naive[m - 1]) for j in range(1, 5))]
    assert stalled and rel(naive[stalled[0] - 1], truth) > 1e-6
    assert not f.converged and f.error_estimate > 1e-6
    full = krylov_pinv_form(lambda v: H @ v, w, rtol=rtol, max_iter=400)
    assert not full.converged or rel(full.value, truth) <= 1e-6


# -- rethreshold, lockstep run, bad input ---------------------------------------------------------


def test_rethreshold_agrees_with_dense_at_every_cutoff():
    rng = np.random.default_rng(12)
    lam = np.concatenate([10.0 ** (-np.arange(0, 11) / 2), -(10.0 ** (-np.arange(0, 11, 3) / 2)), np.zeros(8)])
    H, w = operator(lam, rng.standard_normal(len(lam)), rng)
    f = krylov_pinv_form(lambda v: H @ v, w, rtol=1e-9)
    assert f.converged
    for rtol in (1e-9, 10**-3.25, 10**-1.25, 0.5):
        g = rethreshold(f, rtol)
        d = pinv_quadratic_form(H, w, rtol)
        assert g.rank == d.rank and g.converged, rtol
        assert rel(g.value, d.value) <= 1e-6
    near = rethreshold(f, 10**-3.0 * 1.001)  # an eigenvalue 0.1 % below the cutoff
    assert not near.converged


def test_lanczos_run_is_driven_from_outside_and_refuses_misuse():
    H = torch.diag(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64))
    run = LanczosRun(torch.ones(3, dtype=torch.float64), rtol=1e-10, max_iter=10, tol=1e-8)
    with pytest.raises(InvalidInputError, match="not finished"):
        run.result()
    while run.vector is not None:
        run.feed(H @ run.vector)
    assert rel(run.result().value, 1.5) <= 1e-12
    with pytest.raises(InvalidInputError, match="finished"):
        run.feed(torch.zeros(3, dtype=torch.float64))
    bad = LanczosRun(torch.ones(3, dtype=torch.float64), rtol=1e-10, max_iter=10, tol=1e-8)
    with pytest.raises(InvalidInputError, match="non-finite"):
        bad.feed(torch.tensor([1.0, float("nan"), 0.0], dtype=torch.float64))
    with pytest.raises(InvalidInputError, match="wrong size"):
        bad.feed(torch.ones(4, dtype=torch.float64))


@pytest.mark.parametrize("kwargs, match", [
    ({"rtol": 1.0}, "rtol"), ({"rtol": -1e-3}, "rtol"), ({"max_iter": 0}, "max_iter"),
    ({"max_iter": True}, "max_iter"), ({"tol": 0.0}, "tol"), ({"tol": 2.0}, "tol"),
])
def test_krylov_bad_options(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        krylov_pinv_form(lambda v: v, torch.ones(3, dtype=torch.float64), **kwargs)


def test_krylov_bad_vectors():
    with pytest.raises(InvalidInputError, match="1-D"):
        krylov_pinv_form(lambda v: v, torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(InvalidInputError, match="non-finite"):
        krylov_pinv_form(lambda v: v, torch.tensor([1.0, float("inf")], dtype=torch.float64))


# -- diagnose(method=...) -------------------------------------------------------------------------


def brute_hessian(model, X, y, name):
    params = {n: p.detach() for n, p in model.named_parameters()}
    shape = params[name].shape

    def f(flat):
        return CE(functional_call(model, {**params, name: flat.reshape(shape)}, (X,)), y)

    return hessian(f)(params[name].reshape(-1)).numpy()


@pytest.fixture(scope="module")
def small_net():
    model = mlp([8, 16, 12, 3], seed=0)
    X, y = data(20, (8,), 3)
    return model, X, y


def test_diagnose_krylov_matches_dense(small_net):
    model, X, y = small_net
    d = diagnose(model, CE, (X, y), method="dense")
    k = diagnose(model, CE, (X, y), method="krylov")
    assert k.meta["method"] == "krylov"
    for a, b in zip(d, k):
        assert b.method == "krylov" and a.method == "dense" and a.krylov_converged is None
        assert b.krylov_converged, (b.name, b.krylov_error)
        assert b.wHw == a.wHw and b.g_sq == a.g_sq and b.coupled == a.coupled
        assert rel(b.inverse_coupled, a.inverse_coupled) <= 1e-6
        assert b.rank == a.rank and b.krylov_iterations >= b.rank
        assert b.krylov_error <= 1e-7
        # Ritz values lie inside the spectrum of the brute-force block and reach its radius
        lam = np.linalg.eigvalsh(brute_hessian(model, X, y, a.name))
        top = np.abs(lam).max()
        lo, hi = b.ritz_extremes
        assert lam[0] - 1e-10 * top <= lo <= hi <= lam[-1] + 1e-10 * top, (a.name, lo, hi, lam[[0, -1]])
        assert max(abs(lo), abs(hi)) >= 0.99 * top


def test_diagnose_auto_uses_krylov_only_above_max_dense(small_net, monkeypatch):
    """The split that blocks fall back to where the Gram route does not apply (switched off here)."""
    from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute

    model, X, y = small_net
    no_gram = {*WHwRoute, *SpectralRoute} - {SpectralRoute.GRAM}
    d = diagnose(model, CE, (X, y), method="auto", max_dense=100, routes=no_gram)
    methods = {b.name: b.method for b in d}
    assert methods == {"0.weight": "krylov", "0.bias": "dense", "2.weight": "krylov", "2.bias": "dense",
                       "4.weight": "dense", "4.bias": "dense"}
    ref = diagnose(model, CE, (X, y))
    for b in d:
        assert rel(b.inverse_coupled, ref[b.name].inverse_coupled) <= 1e-6


def test_diagnose_krylov_on_a_1000_parameter_block():
    model = mlp([10, 40, 25, 3], seed=1)
    X, y = data(24, (10,), 3)
    blocks = {"w2": ["2.weight"]}
    k = diagnose(model, CE, (X, y), blocks=blocks, method="krylov")["w2"]
    d = diagnose(model, CE, (X, y), blocks=blocks)["w2"]
    assert k.size == 1000 and k.krylov_converged
    assert rel(k.inverse_coupled, d.inverse_coupled) <= 1e-6 and k.rank == d.rank


def test_diagnose_reports_an_unconverged_estimate_honestly(small_net):
    model, X, y = small_net
    d = diagnose(model, CE, (X, y), method="krylov", krylov_max_iter=3)
    b = d["0.weight"]
    assert b.krylov_converged is False and b.krylov_iterations <= 3 + 64 and b.krylov_error > 1e-8
    # no number that may be wrong stands as D⁺: it is None with the reason, the estimate kept apart
    assert b.inverse_coupled is None and b.wHpinvw is None and b.krylov_estimate is not None
    assert b.dplus_missing.startswith("Lanczos did not converge in") and "krylov_max_iter" in b.dplus_missing
    assert "did not converge" in d.table()
    # the estimate is the quadrature's value at its last step: the same blocks converged agree with the dense D⁺
    full = diagnose(model, CE, (X, y), method="krylov")["0.weight"]
    dense = diagnose(model, CE, (X, y), method="dense")["0.weight"]
    assert full.krylov_converged and full.krylov_estimate is None
    assert rel(full.inverse_coupled, dense.inverse_coupled) <= 1e-6


def test_krylov_dplus_is_invariant_under_layer_rescaling(small_net):
    model, X, y = small_net
    before = diagnose(model, CE, (X, y), method="krylov")
    after = diagnose(layer_rescale(model, 0, 2.0), CE, (X, y), method="krylov")
    checked = 0
    for a, b in zip(before, after):
        if a.krylov_converged and b.krylov_converged:
            assert rel(b.inverse_coupled, a.inverse_coupled) <= 1e-8, a.name
            checked += 1
    assert checked == len(before)
    # the raw quantity it is built from does move (c⁻² law), so the check is not vacuous
    assert rel(after["0.weight"].g_sq, before["0.weight"].g_sq / 4) <= 1e-10


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "lanczos"}, "'dense', 'krylov', 'auto'"), ({"method": 3}, "method"),
    ({"krylov_max_iter": 0}, "krylov_max_iter"), ({"krylov_max_iter": 2.5}, "krylov_max_iter"),
    ({"krylov_max_iter": True}, "krylov_max_iter"), ({"krylov_tol": 0.0}, "krylov_tol"),
    ({"krylov_tol": 1.0}, "krylov_tol"), ({"krylov_tol": "1e-8"}, "krylov_tol"),
])
def test_diagnose_bad_krylov_options(small_net, kwargs, match):
    model, X, y = small_net
    with pytest.raises(InvalidInputError, match=match):
        diagnose(model, CE, (X, y), **kwargs)
