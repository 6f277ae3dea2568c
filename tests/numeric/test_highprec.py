"""Arbitrary precision: agreement with float64 and with an mpmath brute force, the exact integer
engine, the pseudo-inverse semantics, and invariance errors that fall like 10^-dps."""

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.highprec import arithmetic, pinv
from coupled_curvature.numeric.highprec import engine as highprec
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.symmetries.homogeneous import neuron_rescale
from tests.numeric._nets import data, mlp

CE = nn.CrossEntropyLoss()


@pytest.fixture(scope="module")
def small():
    return mlp([3, 4, 3, 2], seed=5), data(12, (3,), 2, seed=5)


def test_agrees_with_float64(small):
    model, (X, y) = small
    hp = highprec.diagnose(model, CE, (X, y), dps=30)
    fd = diagnose(model, CE, (X, y))
    for b in fd:
        h = hp[b.name]
        assert isinstance(h.coupled, mpmath.mpf)
        assert abs(h.coupled - b.coupled) / abs(h.coupled) < 1e-12
        assert abs(h.g_sq - b.g_sq) / h.g_sq < 1e-12
        assert abs(h.inverse_coupled - b.inverse_coupled) / abs(h.inverse_coupled) < 1e-6
        assert h.rank == b.rank


def test_mse_and_sum_reduction_agree_with_float64():
    model = mlp([3, 4, 2], act="leaky", seed=1)
    X, _ = data(10, (3,), 2, seed=1)
    Y = torch.randn(10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for loss in (nn.MSELoss(), nn.MSELoss(reduction="sum")):
        hp, fd = highprec.diagnose(model, loss, (X, Y), dps=20, inverse=False), diagnose(model, loss, (X, Y), inverse=False)
        for b in fd:
            assert abs(hp[b.name].coupled - b.coupled) / abs(b.coupled) < 1e-12


# ---------------------------------------------------------------- independent mpmath brute force


def _brute_force(model, X, y, members, dps):
    """Loss as a plain mpmath function of the block's parameters; gradient and Hessian by
    ``mpmath.diff`` (no Jacobians, no Kronecker form, no integers); ``H⁺`` by ``eigsy``."""
    params = {n: p.detach().double().reshape(-1).tolist() for n, p in model.named_parameters()}
    linears = [(n, m) for n, m in model.named_children() if isinstance(m, nn.Linear)]
    flat = [(m, i) for m in members for i in range(len(params[m]))]
    Xl, yl = X.tolist(), y.tolist()

    def loss(*theta):
        p = {k: [mpmath.mpf(x) for x in v] for k, v in params.items()}
        for (m, i), t in zip(flat, theta):
            p[m][i] = t
        total = 0
        for x, c in zip(Xl, yl):
            a = [mpmath.mpf(v) for v in x]
            for li, (nm, lin) in enumerate(linears):
                W, b = p[f"{nm}.weight"], p[f"{nm}.bias"]
                k = lin.in_features
                z = [mpmath.fsum(W[o * k + i] * a[i] for i in range(k)) + b[o] for o in range(lin.out_features)]
                a = z if li == len(linears) - 1 else [max(v, 0) for v in z]
            total += mpmath.log(mpmath.fsum(mpmath.exp(v) for v in a)) - a[c]
        return total / len(Xl)

    with mpmath.workdps(dps):
        w = [mpmath.mpf(params[m][i]) for m, i in flat]
        n = len(w)
        g = [mpmath.diff(loss, w, tuple(int(j == i) for j in range(n))) for i in range(n)]
        H = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(i, n):
                H[i, j] = H[j, i] = mpmath.diff(loss, w, tuple(int(t == i) + int(t == j) for t in range(n)))
        E, Q = mpmath.eigsy(H)
        cut = max(abs(E[i]) for i in range(n)) * mpmath.mpf(10) ** -20
        wHpw = mpmath.fsum(mpmath.fsum(Q[r, i] * w[r] for r in range(n)) ** 2 / E[i] for i in range(n) if abs(E[i]) > cut)
        wsq, gsq = mpmath.fsum(v * v for v in w), mpmath.fsum(v * v for v in g)
        wHw = mpmath.fsum(w[i] * H[i, j] * w[j] for i in range(n) for j in range(n))
        return {"coupled": wHw / wsq / gsq, "inverse_coupled": wHpw / wsq * gsq, "g_sq": gsq}


def test_matches_mpmath_brute_force_to_high_precision():
    model = mlp([2, 3, 2], seed=3)
    X, y = data(5, (2,), 2, seed=3)
    hp = highprec.diagnose(model, CE, (X, y), dps=40, pinv_rtol="1e-20")
    for block in ("0.weight", "2.weight", "2.bias"):
        ref = _brute_force(model, X, y, [block], dps=50)
        for key in ("coupled", "inverse_coupled", "g_sq"):
            assert abs(getattr(hp[block], key) - ref[key]) / abs(ref[key]) < mpmath.mpf(10) ** -36, (block, key)


# ---------------------------------------------------------------- the integer engine


big = st.integers(min_value=-(2**300), max_value=2**300)


@settings(derandomize=True, max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 4), st.data())
def test_exact_integer_matmul(m, k, n, draw):
    A = np.array(draw.draw(st.lists(st.one_of(big, st.integers(-3, 3)), min_size=m * k, max_size=m * k)), dtype=object)
    B = np.array(draw.draw(st.lists(st.one_of(big, st.just(0)), min_size=k * n, max_size=k * n)), dtype=object)
    A, B = A.reshape(m, k), B.reshape(k, n)
    ref = [[sum(int(A[i, t]) * int(B[t, j]) for t in range(k)) for j in range(n)] for i in range(m)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arithmetic, "_SMALL_PRODUCT", 0)  # the BLAS digit-slice route, however small the product
        assert arithmetic.int_matmul(A, B).tolist() == ref


def test_exact_integer_matmul_large_inner_dimension(monkeypatch):
    """Long sums of near-maximal digits: the carries and the int64 group sums must not overflow."""
    monkeypatch.setattr(arithmetic, "_SMALL_PRODUCT", 0)
    k = 3000
    A = np.array([[(1 << 400) - 1] * k, [-(1 << 399)] * k], dtype=object)
    B = np.array([[(1 << 333) - 1, -((1 << 16) - 1), 0]] * k, dtype=object)
    assert (arithmetic.int_matmul(A, B) == A.dot(B)).all()


def test_float_and_mpf_conversion_is_exact():
    vals = np.array([0.1, -3.5, 0.0, 1e-300, 2.0**70, -5e-324])
    d = arithmetic.from_floats(vals)
    from fractions import Fraction

    for v, m in zip(vals.tolist(), d.M.tolist()):
        assert Fraction(m) * Fraction(2) ** d.e == Fraction(v)
    with mpmath.workdps(40):
        x = [mpmath.mpf(1) / 3, -mpmath.mpf(2) / 7]
    d = arithmetic.from_mpfs(x, (2,))  # at the default 15 digits: the 133-bit values must survive
    with mpmath.workdps(40):
        assert [arithmetic.to_mpf(int(m), d.e) for m in d.M.tolist()] == x


# ---------------------------------------------------------------- pseudo-inverse semantics


def _psd(eigs, seed):
    rng = np.random.default_rng(seed)
    n = len(eigs)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    with mpmath.workdps(80):
        Qm = mpmath.matrix(Q.tolist())
        H = Qm * mpmath.diag([mpmath.mpf(e) for e in eigs]) * Qm.T
        flat = [H[i, j] for i in range(n) for j in range(n)]
    H = arithmetic.from_mpfs(flat, (n, n))
    H.M = (H.M + H.M.T) // 2  # exactly symmetric (the 2^e factor absorbs the halving error)
    return H, arithmetic.from_floats(rng.standard_normal(n))


@pytest.mark.parametrize("n,zeros,near", [(5, 0, 0), (6, 2, 0), (2, 5, 0), (6, 3, 1), (6, 3, 2), (3, 0, 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_cholesky_route_equals_eigen_cutoff(n, zeros, near, seed):
    """Exactly the float64 semantics (keep |λ| > rtol·max|λ|): the pivoted Cholesky where its kept
    set is certified (a spectral gap at the cutoff), else eigsy. Kept eigenvalues 1 … 10^-(n-1),
    exact zeros, and with ``near`` one eigenvalue just inside (1) or just outside (2) the cutoff."""
    rtol = mpmath.mpf("1e-10")
    eigs = [10.0 ** -i for i in range(n)] + [0.0] * zeros
    if near:
        eigs.append(float(rtol) * (1.5 if near == 1 else 0.7))
    H, w = _psd(eigs, seed)
    with mpmath.workdps(40):
        F = highprec.working_bits()
        chol = pinv.pinv_form(H, w, rtol, F)
        eig = pinv.eigsy_pinv_form(H, w, rtol, F, "")
        assert chol.rank == eig.rank == n + (near == 1)
        assert abs(chol.value - eig.value) <= abs(eig.value) * mpmath.mpf(10) ** -30
        assert ("eigsy" if near else "Cholesky") in chol.note


def test_routes_agree_on_a_trained_net(small, monkeypatch):
    model, (X, y) = small
    chol = highprec.diagnose(model, CE, (X, y), dps=30)
    monkeypatch.setattr(pinv, "_EIG_MAX", 10**9)
    eig = highprec.diagnose(model, CE, (X, y), dps=30)
    for b in eig:
        c = chol[b.name]
        assert "Cholesky" in c.notes[-1] and "eigsy" in b.notes[-1]
        assert abs(c.inverse_coupled - b.inverse_coupled) / abs(b.inverse_coupled) < mpmath.mpf(10) ** -25
        assert c.rank == b.rank


# ---------------------------------------------------------------- invariance against precision


@pytest.fixture(scope="module")
def precision_errors(small):
    model, (X, y) = small
    return {dps: highprec.invariance_error(model, CE, (X, y), layer=1, c="3/7", dps=dps) for dps in (15, 30, 50, 100)}


def test_invariance_error_falls_with_precision(precision_errors):
    errs = precision_errors
    for dps, e in errs.items():
        assert e["D"] < mpmath.mpf(10) ** -(dps - 3), dps
        assert e["Dplus"] < mpmath.mpf(10) ** -(dps - 6), dps
        assert e["D"] > 0  # c = 3/7 is not dyadic: the rescaled weights are rounded, the error is real
    for lo, hi in ((15, 30), (30, 50), (50, 100)):
        assert errs[hi]["D"] < errs[lo]["D"] * mpmath.mpf(10) ** -(hi - lo - 4)


def test_non_uniform_scaling_moves_D_at_every_precision(small, precision_errors):
    """Negative control: the error being tiny is not an artefact of the precision."""
    model, (X, y) = small
    moved = neuron_rescale(model, 0, [0.5, 1.0, 2.0, 4.0])
    for dps in (15, 100):
        a = highprec.diagnose(model, CE, (X, y), dps=dps, inverse=False)
        b = highprec.diagnose(moved, CE, (X, y), dps=dps, inverse=False)
        change = abs(a["0.weight"].coupled - b["0.weight"].coupled) / abs(a["0.weight"].coupled)
        assert change > 1e-3 and change > precision_errors[dps]["D"] * mpmath.mpf(10) ** (dps - 5)


def test_unsupported_and_bad_inputs(small):
    model, (X, y) = small
    with pytest.raises(UnsupportedModelError, match="Tanh"):
        highprec.diagnose(nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2)).double(), CE, (X, y))
    with pytest.raises(UnsupportedModelError, match="CrossEntropyLoss"):
        highprec.diagnose(mlp([3, 2]), nn.NLLLoss(), (X, y))
    with pytest.raises(InvalidInputError, match="dps"):
        highprec.diagnose(model, CE, (X, y), dps=10)
    with pytest.raises(InvalidInputError, match="c must be"):
        highprec.invariance_error(model, CE, (X, y), layer=0, c="-2", dps=20)
    with pytest.raises(InvalidInputError, match="c must be"):
        highprec.invariance_error(model, CE, (X, y), layer=0, c="two", dps=20)
    with pytest.raises(InvalidInputError, match="layer"):
        highprec.invariance_error(model, CE, (X, y), layer=2, c="0.3", dps=20)
    with pytest.raises(InvalidInputError, match="features"):
        highprec.diagnose(model, CE, (torch.zeros(4, 5, dtype=torch.float64), y[:4]))
