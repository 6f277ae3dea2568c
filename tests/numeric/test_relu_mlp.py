"""numeric/factors/relu_mlp.py: D⁺ from exact per-sample factors against a brute-force torch.func Hessian."""

import copy

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.factors.relu_mlp import factor_pinv_forms, relu_ce_factors, with_factor_dplus
from coupled_curvature.numeric.linalg.pinv import FAST_MIN_SIZE, conditioned_rtol, symmetric_spectrum
from coupled_curvature.numeric.symmetries.homogeneous import neuron_rescale

from tests.numeric._nets import data, mlp, reference_block, rel

CE = nn.CrossEntropyLoss()


def _factor_diagnosis(net, X, y):
    return with_factor_dplus(diagnose(net, CE, (X, y), inverse=False), net, X)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    widths=st.lists(st.integers(2, 7), min_size=1, max_size=3),
    classes=st.integers(2, 4),
    n=st.integers(2, 12),
    bias=st.booleans(),
    act=st.sampled_from(["relu", "leaky"]),
    seed=st.integers(0, 10**6),
)
def test_every_block_matches_the_brute_force_hessian(widths, classes, n, bias, act, seed):
    net = mlp([5, *widths, classes], bias=bias, act=act, seed=seed % 1000)
    X, y = data(n, (5,), classes, seed=seed)
    d = _factor_diagnosis(net, X, y)
    routes = set()
    for b in d:
        ref = reference_block(net, CE, X, y, [b.name])
        assert b.inverse_coupled is not None, b.notes
        bound = conditioned_rtol(1e-7, ref["kappa"])  # float64 gives D⁺ to about ε·κ, whatever the BLAS
        assert rel(b.inverse_coupled, ref["inverse_coupled"]) < bound or abs(ref["inverse_coupled"]) < 1e-14
        routes.add(next(n for n in b.notes if n.startswith("D⁺ from")).split("(")[1].split()[0])
    assert routes <= {"dense", "gram"}


def test_the_conditioned_bound_passes_eps_kappa_and_fails_a_hundred_times_that():
    """The κ-aware helper on a nearly singular block: the reference D⁺ perturbed by ε·κ passes, by 100·ε·κ fails
    (and a well-conditioned block keeps the fixed bound)."""
    net = mlp([5, 2, 5, 3, 2], bias=False, act="leaky", seed=1)
    X, y = data(6, (5,), 2, seed=1)
    ref = reference_block(net, CE, X, y, ["4.weight"])
    eps, kappa, want = float(np.finfo(np.float64).eps), ref["kappa"], ref["inverse_coupled"]
    assert kappa > 1e8  # nearly singular: a fixed 1e-7 bound is below ε·κ
    assert rel(want * (1 + eps * kappa), want) < conditioned_rtol(1e-7, kappa)
    assert not rel(want * (1 + 100 * eps * kappa), want) < conditioned_rtol(1e-7, kappa)
    assert conditioned_rtol(1e-7, 10.0) == 1e-7


def test_gram_route_is_used_and_exact_when_samples_are_few():
    """N(C − 1) = 3·2 = 6 rows: the 6×8 = 48-parameter weight takes the Gram matrix, and still matches."""
    net = mlp([6, 8, 3], seed=3)
    X, y = data(3, (6,), 3, seed=4)
    forms = factor_pinv_forms(relu_ce_factors(net, X), dict(net.named_parameters()), 1e-10)
    assert forms["0.weight"].route == "gram" and forms["0.weight"].rank <= 6
    d = _factor_diagnosis(net, X, y)
    ref = reference_block(net, CE, X, y, ["0.weight"])
    assert rel(d["0.weight"].inverse_coupled, ref["inverse_coupled"]) < conditioned_rtol(1e-8, ref["kappa"])


def test_agrees_with_the_dense_diagnose_route_and_is_invariant_under_layer_rescaling():
    net = mlp([4, 6, 5, 3], seed=1)
    X, y = data(20, (4,), 3, seed=2)
    dense = diagnose(net, CE, (X, y))
    fac = _factor_diagnosis(net, X, y)
    for b in dense:
        assert rel(fac[b.name].inverse_coupled, b.inverse_coupled) < 1e-8
        assert fac[b.name].rank == b.rank
    scaled = copy.deepcopy(net)
    with torch.no_grad():
        scaled[0].weight.mul_(7.0)
        scaled[0].bias.mul_(7.0)
        scaled[2].weight.div_(7.0)
    moved = _factor_diagnosis(scaled, X, y)
    assert max(rel(moved[b.name].inverse_coupled, fac[b.name].inverse_coupled) for b in fac) < 1e-8
    # negative control (T5): a non-uniform neuron rescaling moves D⁺ of the affected blocks
    ctrl = _factor_diagnosis(neuron_rescale(net, 0, torch.tensor([1.0, 4.0, 0.25, 2.0, 0.5, 1.0])), X, y)
    assert max(rel(ctrl[b.name].inverse_coupled, fac[b.name].inverse_coupled) for b in fac) > 1e-2


def test_mismatched_diagnosis_is_refused_block_by_block():
    """A diagnosis of another net fails the ‖Bw‖² = wᵀHw check: D⁺ stays None with a note."""
    net, other = mlp([4, 5, 3], seed=1), mlp([4, 5, 3], seed=2)
    X, y = data(10, (4,), 3)
    d = with_factor_dplus(diagnose(other, CE, (X, y), inverse=False), net, X)
    for b in d:
        assert b.inverse_coupled is None
        assert any("does not reproduce" in n for n in b.notes)


def test_a_block_the_network_is_not_affine_in_is_refused_with_the_reason():
    """tanh: the outputs are not affine in the first layer (refused, D⁺ None with the engine's reason),
    but they are in the last one, whose factor is exact and matches the brute-force Hessian."""
    net = mlp([4, 5, 3], act="tanh")
    X, y = data(6, (4,), 3)
    d = _factor_diagnosis(net, X, y)
    assert d["0.weight"].inverse_coupled is None
    assert any("factor route does not apply" in n and "not affine in the block" in n for n in d["0.weight"].notes)
    ref = reference_block(net, CE, X, y, ["2.weight"])
    assert rel(d["2.weight"].inverse_coupled, ref["inverse_coupled"]) < conditioned_rtol(1e-8, ref["kappa"])


@pytest.mark.parametrize("n", [7, FAST_MIN_SIZE + 20])
def test_symmetric_spectrum_matches_numpy_and_keeps_zero_rows(n):
    rng = np.random.default_rng(n)
    M = rng.standard_normal((n, n))
    S = (M + M.T) / 2
    dead = rng.choice(n, size=max(1, n // 10), replace=False)
    S[dead, :] = 0.0
    S[:, dead] = 0.0
    v = rng.standard_normal(n)
    St = torch.from_numpy(S.copy())
    lam, c = symmetric_spectrum(St, torch.from_numpy(v))
    assert torch.equal(St, torch.from_numpy(S))  # input untouched
    ref_lam, U = np.linalg.eigh(S)
    ref_c = (U.T @ v) ** 2
    order = np.argsort(lam)
    np.testing.assert_allclose(lam[order], ref_lam, atol=1e-12 * np.abs(ref_lam).max())
    # weights per eigenvalue: compare Σ c_i f(λ_i) for a few smooth f (eigenvectors of repeated zeros are not unique)
    for f in (np.ones_like, lambda x: x, lambda x: x**2, np.exp):
        assert abs((c * f(lam)).sum() - (ref_c * f(ref_lam)).sum()) < 1e-9 * max(1.0, (ref_c * np.abs(f(ref_lam))).sum())
    # negative control: the weights are those of v, not of another vector
    assert abs(c.sum() - (v * v).sum()) < 1e-9 * (v * v).sum()
    assert abs((c * lam).sum() - v @ S @ v) < 1e-9 * np.abs(S).sum() * (v * v).sum()
    assert abs((c * lam).sum() - v[::-1] @ S @ v[::-1]) > 1e-6
