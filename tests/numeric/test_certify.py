"""Certified ball-arithmetic enclosures (issue 24): against float64 ``diagnose``, against the mpmath
engine at 60 digits, on MLPs, CNNs, residual and BatchNorm nets; kinks refused; bad input refused."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.certify.api import certify
from coupled_curvature.numeric.certify.ball import Ball
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.highprec import engine as highprec
from tests.numeric._nets import cnn, data, mlp

CE = nn.CrossEntropyLoss()


def exact(x) -> Fraction:
    """A float or an mpmath mpf as the exact rational it stores."""
    if isinstance(x, float):
        return Fraction(x)
    m, e = x.man_exp
    return Fraction(int(m) * 2 ** int(e)) if e >= 0 else Fraction(int(m), 2 ** -int(e))


def rel(ball: Ball, x) -> float:
    return float(abs(exact(x) - ball.mid) / abs(ball.mid))


def assert_matches_float64(cert, diag, *, d_tol=1e-9, dplus_tol=1e-6):
    """Every certified ball is within float64 rounding of ``diagnose`` (the float64 values themselves are
    rounded, so they need not lie in a 2^-256-wide ball: the ball measures their error)."""
    assert cert.names() == diag.names()
    checked = 0
    for b in cert:
        d = diag[b.name]
        assert b.coupled is not None, b.reason
        assert rel(b.coupled, d.coupled) < d_tol
        assert rel(b.sqnorm_grad, d.g_sq) < d_tol
        assert rel(b.wHw, d.wHw) < d_tol
        assert b.coupled.relative_width < 1e-50
        if b.inverse_coupled is not None and d.inverse_coupled is not None:
            # float64 D⁺ is limited by the conditioning of H; the ball may be wide where the dropped
            # eigenvalues sit close to the cutoff (its width is certified, not assumed)
            slack = dplus_tol * abs(b.inverse_coupled.mid)
            assert b.inverse_coupled.relative_width < 1e-20  # at 256 bits, filter included
            assert b.inverse_coupled.lower - slack <= exact(d.inverse_coupled) <= b.inverse_coupled.upper + slack
            checked += 1
    return checked


def test_ball_semantics():
    b = Ball(Fraction(-1, 4), Fraction(1, 2))
    assert 0.0 in b and Fraction(1, 2) in b and 0.51 not in b and float("nan") not in b
    assert b.mid == Fraction(1, 8) and b.rad == Fraction(3, 8) and not b.excludes_zero()
    with pytest.raises(ValueError):
        Ball(Fraction(1), Fraction(0))
    with pytest.raises(TypeError):
        "x" in b  # noqa: B015


@pytest.mark.parametrize("loss", [CE, nn.MSELoss(), nn.CrossEntropyLoss(reduction="sum")])
def test_mlp_against_float64(one_thread, loss):
    model = mlp([4, 6, 5, 3], seed=2)
    X, y = data(24, (4,), 3, seed=3)
    if isinstance(loss, nn.MSELoss):
        y = torch.randn(24, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    cert = certify(model, loss, (X, y))
    assert cert.prec_used == 256 and not cert.kinks
    assert assert_matches_float64(cert, diagnose(model, loss, (X, y))) >= 3


def test_mlp_contains_mpmath_at_60_digits(one_thread):
    """The mpmath engine (an independent implementation) at 60 digits lies in the 128-bit balls, and the
    256-bit balls agree with it to its 60 digits."""
    model = mlp([3, 5, 4, 3], seed=0)
    X, y = data(20, (3,), 3, seed=0)
    hp = highprec.diagnose(model, CE, (X, y), dps=60, pinv_rtol=1e-10)
    wide = certify(model, CE, (X, y), prec=128)
    tight = certify(model, CE, (X, y), prec=256)
    for name in wide.names():
        h = hp[name]
        for field, hfield in (("coupled", "coupled"), ("sqnorm_grad", "g_sq"), ("wHw", "wHw"), ("rayleigh", "rayleigh"),
                              ("inverse_coupled", "inverse_coupled")):
            ball = getattr(wide[name], field)
            assert exact(getattr(h, hfield)) in ball, (name, field)
            # the 256-bit ball is narrower than mpmath's 60 digits (D⁺ with dropped eigenvalues: about as wide)
            t, slack = getattr(tight[name], field), abs(getattr(tight[name], field).mid) * Fraction(1, 10**55)
            assert t.lower - slack <= exact(getattr(h, hfield)) <= t.upper + slack, (name, field)


def test_leaky_relu_mlp_layer_blocks(one_thread):
    model = mlp([3, 4, 4, 2], act="leaky", seed=1)
    X, y = data(16, (3,), 2, seed=1)
    cert = certify(model, CE, (X, y), blocks="layer")
    diag = diagnose(model, CE, (X, y), blocks="layer")
    assert cert.names() == ["0", "2", "4"]
    assert_matches_float64(cert, diag)


def test_cnn_against_float64(one_thread):
    model = cnn(seed=0)
    X, y = data(6, (1, 8, 8), 3, seed=2)
    assert_matches_float64(certify(model, CE, (X, y)), diagnose(model, CE, (X, y)), dplus_tol=1e-5)


class Residual(nn.Module):
    """Conv (stride, padding) -> BN -> ReLU, a residual block with a grouped dilated conv and BN, max pool,
    a strided conv, adaptive average pool, Linear."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2), nn.BatchNorm2d(4)
        self.pool, self.conv3 = nn.MaxPool2d(2), nn.Conv2d(4, 3, 2, stride=2)
        self.avg, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(3, 3)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(h + self.bn2(self.conv2(h)))
        h = nn.functional.relu(self.conv3(self.pool(h)))
        return self.fc(torch.flatten(self.avg(h), 1))


def residual_net(seed=1) -> nn.Module:
    torch.manual_seed(seed)
    net = Residual().double()
    with torch.no_grad():
        for bn in (net.bn1, net.bn2):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    return net.eval()


def test_residual_batchnorm_cnn_against_float64(one_thread):
    model = residual_net()
    X, y = data(5, (1, 8, 8), 3, seed=5)
    cert = certify(model, CE, (X, y))
    assert not cert.kinks  # ties of dead ReLUs under the max pool are constant, not kinks
    assert assert_matches_float64(cert, diagnose(model, CE, (X, y)), dplus_tol=1e-5) >= 8


def test_conv1d_avgpool_against_float64(one_thread):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv1d(2, 3, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool1d(2, padding=1),
                          nn.Flatten(), nn.Linear(9, 2)).double()
    X, y = data(7, (2, 9), 2, seed=6)
    assert_matches_float64(certify(model, CE, (X, y)), diagnose(model, CE, (X, y)))


@settings(max_examples=6)
@given(widths=st.lists(st.integers(2, 5), min_size=1, max_size=3), act=st.sampled_from(["relu", "leaky"]),
       seed=st.integers(0, 50), mse=st.booleans())
def test_random_mlps_against_float64(widths, act, seed, mse):
    model = mlp([3, *widths, 2], act=act, seed=seed)
    X, y = data(10, (3,), 2, seed=seed)
    loss = nn.MSELoss() if mse else CE
    if mse:
        y = torch.randn(10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    cert = certify(model, loss, (X, y), inverse=False)
    diag = diagnose(model, loss, (X, y), inverse=False)
    for b in cert:
        if b.kink is not None:
            continue
        assert rel(b.coupled, diag[b.name].coupled) < 1e-9
        assert b.inverse_coupled is None and b.inverse_reason.startswith("not asked")


def test_kink_raises_precision_then_refuses_upstream_blocks(one_thread):
    """An input row of zeros and a zero bias put a pre-activation exactly at 0: undecidable at any precision."""
    model = mlp([2, 3, 2], seed=0)
    with torch.no_grad():
        model[0].bias[1] = 0.0
    X, y = data(6, (2,), 2, seed=0)
    X[4] = 0.0
    cert = certify(model, CE, (X, y), prec=64)
    assert cert.prec_used == 128
    assert [(k.sample, k.layer, k.unit) for k in cert.kinks] == [(4, "1", 1)]
    assert cert.kinks[0].value == Ball(Fraction(0), Fraction(0))  # the pre-activation is exactly 0
    for name in ("0.weight", "0.bias"):
        b = cert[name]
        assert b.coupled is None and b.kink == cert.kinks[0] and "sample 4" in b.reason and "'1'" in b.reason
    assert cert["2.weight"].coupled is not None and cert["2.bias"].coupled is not None


def test_large_block_dplus_by_the_gram_route_else_refused_with_reason(one_thread):
    """600 parameters: ``D⁺`` from the 16 × 16 Gram matrix on 8 samples; on 257 samples (``m = 514``)
    neither matrix is assembled, and the reason says so (more in ``test_certify_gram.py``)."""
    model = mlp([30, 20, 2], seed=0)
    X, y = data(8, (30,), 2, seed=0)
    b = certify(model, CE, (X, y))["0.weight"]
    assert b.inverse_route == "gram" and b.inverse_coupled.relative_width < 1e-25
    X, y = data(257, (30,), 2, seed=0)
    b = certify(model, CE, (X, y), blocks={"w": ["0.weight"]})["w"]
    assert b.coupled is not None and b.inverse_coupled is None and "514 > 512" in b.inverse_reason


def test_block_over_two_modules_refused():
    model = mlp([2, 3, 2], seed=0)
    X, y = data(6, (2,), 2, seed=0)
    cert = certify(model, CE, (X, y), blocks={"both": ["0.weight", "2.weight"]})
    assert cert["both"].coupled is None and "several modules" in cert["both"].reason


class Tanhy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act = nn.Linear(2, 2), nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.parametrize("prec", [52, 100_001, True, 256.0])
def test_bad_precision(prec):
    model = mlp([2, 2], seed=0)
    with pytest.raises(InvalidInputError, match="prec"):
        certify(model, CE, data(4, (2,), 2), prec=prec)


def test_bad_model_and_loss_and_values():
    X, y = data(4, (2,), 2)
    with pytest.raises(UnsupportedModelError, match="'act' \\(Tanh\\)"):
        certify(Tanhy().double(), CE, (X, y))
    with pytest.raises(InvalidInputError, match="L1Loss"):
        certify(mlp([2, 2], seed=0), nn.L1Loss(), (X, y.double()))
    bad = mlp([2, 2], seed=0)
    with torch.no_grad():
        bad[0].weight[0, 0] = float("inf")
    with pytest.raises(InvalidInputError, match="non-finite"):
        certify(bad, CE, (X, y))
    Xn = X.clone()
    Xn[1, 1] = float("nan")
    with pytest.raises(InvalidInputError, match="non-finite"):
        certify(mlp([2, 2], seed=0), CE, (Xn, y))
    with pytest.raises(InvalidInputError, match="class indices"):
        certify(mlp([2, 2], seed=0), CE, (X, y.double()))  # soft (float) targets are not class labels
    with pytest.raises(InvalidInputError, match="shape"):
        certify(mlp([2, 2], seed=0), nn.MSELoss(), (X, torch.zeros(4, 3, dtype=torch.float64)))
    train_bn = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).double()
    with pytest.raises(InvalidInputError, match="train mode"):
        certify(train_bn, CE, (X, y))


def test_public_exports():
    import coupled_curvature
    import coupled_curvature.numeric as numeric

    assert coupled_curvature.certify is certify and numeric.Ball is Ball
    assert coupled_curvature.certify_invariance is numeric.certify_invariance
    assert numeric.Certificate.__module__.endswith("certify.api")


def test_spectrum_straddling_cutoff_is_refused_with_the_eigenvalue():
    from flint import arb_mat

    from coupled_curvature.numeric.certify.spectrum import pinv_form

    H = arb_mat([[1, 0], [0, 2.0**-20]])  # an eigenvalue exactly at τ = 2^-20·max|λ|
    f = pinv_form(H, arb_mat([[1], [1]]), Fraction(1, 2**20))
    assert f.value is None and "straddles" in f.reason and f.straddling.contains(2.0**-20)
    kept = pinv_form(H, arb_mat([[1], [1]]), Fraction(1, 2**21))  # below it: both kept, wᵀH⁻¹w = 1 + 2^20
    assert kept.value.contains(1 + 2**20) and kept.rank == 2


@pytest.mark.parametrize("rank", [4, 7])
def test_spectrum_against_numpy(rank):
    """Rank-deficient H (rounding-level eigenvalues dropped by the cutoff: the rational filter) and full
    rank (the solve): the ball contains the float64 value to float64 accuracy, and is narrow."""
    import numpy as np
    from flint import arb_mat, ctx

    rng = np.random.default_rng(rank)
    B = rng.standard_normal((rank, 7))
    H = B.T @ B
    w = rng.standard_normal(7)
    lam, U = np.linalg.eigh(H)
    keep = np.abs(lam) > 1e-10 * np.abs(lam).max()
    ref = float(np.sum((U[:, keep].T @ w) ** 2 / lam[keep]))
    from coupled_curvature.numeric.certify.ball import from_arb
    from coupled_curvature.numeric.certify.spectrum import pinv_form

    saved = ctx.prec
    try:
        ctx.prec = 256
        Hb = arb_mat(B.T.tolist()) * arb_mat(B.tolist())  # the exact BᵀB of the float64 B, in balls
        f = pinv_form(Hb, arb_mat(7, 1, w.tolist()), Fraction(1, 10**10))
    finally:
        ctx.prec = saved
    ball = from_arb(f.value)
    assert f.rank == rank
    assert abs(float(ball.mid) - ref) <= 1e-8 * abs(ref)
    assert ball.relative_width < 1e-20


@settings(max_examples=4)
@given(c1=st.integers(1, 3), c2=st.integers(1, 3), k=st.sampled_from([1, 3]), stride=st.integers(1, 2),
       pool=st.sampled_from(["max", "avg", "adaptive"]), seed=st.integers(0, 20))
def test_random_cnns_against_float64(c1, c2, k, stride, pool, seed):
    torch.manual_seed(seed)
    pooling = {"max": nn.MaxPool2d(2), "avg": nn.AvgPool2d(2), "adaptive": nn.AdaptiveAvgPool2d(2)}[pool]
    model = nn.Sequential(nn.Conv2d(1, c1, k, stride=stride, padding=k // 2), nn.ReLU(),
                          nn.Conv2d(c1, c2, 3, padding=1), nn.LeakyReLU(0.2), pooling, nn.Flatten(),
                          nn.LazyLinear(2)).double()
    X, y = data(3, (1, 6, 6), 2, seed=seed)
    model(X)  # materialise the lazy Linear
    model = nn.Sequential(*model).double()
    cert = certify(model, CE, (X, y), inverse=False)
    diag = diagnose(model, CE, (X, y), inverse=False)
    for b in cert:
        if b.kink is None:
            assert rel(b.coupled, diag[b.name].coupled) < 1e-9


def test_batches_frozen_parameters_and_permutation_through_batchnorm(one_thread):
    """An iterable of batches gives the certificate of the concatenated data; frozen parameters are left
    out of the blocks (as in diagnose) but used; a permutation moves a BatchNorm in between alike."""
    model = mlp([3, 4, 3], seed=4)
    X, y = data(8, (3,), 3, seed=4)
    whole = certify(model, CE, (X, y), inverse=False)
    parts = certify(model, CE, [(X[:5], y[:5]), (X[5:], y[5:])], inverse=False)
    assert all(whole[n].coupled == parts[n].coupled for n in whole.names())
    model[2].bias.requires_grad_(False)
    assert certify(model, CE, (X, y), inverse=False).names() == ["0.weight", "0.bias", "2.weight"]

    from coupled_curvature.numeric.certify.invariance import certify_invariance

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Conv2d(3, 2, 3),
                        nn.Flatten(), nn.Linear(8, 2)).double()
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.1, 0.1)
        net[1].running_var.uniform_(0.5, 1.5)
        net[1].bias.uniform_(-0.2, 0.2)  # a fresh BatchNorm's bias is 0: w = 0, RQ undefined (a refusal)
    net.eval()
    Xi, yi = data(3, (1, 4, 4), 2, seed=1)
    inv = certify_invariance(net, CE, (Xi, yi), ("permute_neurons", ("0", "3"), [2, 0, 1]), inverse=False)
    assert all(0 in b.coupled_change and b.coupled_change_relative < 1e-30 for b in inv)


@pytest.mark.parametrize("module, in_shape, attr", [
    (nn.Conv1d(1, 1, 3, padding="same"), (1, 5), "padding"),
    (nn.AdaptiveAvgPool2d((None, 2)), (1, 3, 4), "output_size"),
])
def test_the_index_maps_refuse_sizes_that_are_not_ints(module, in_shape, attr):
    """Found by mypy: conv_map and pool_map read a size option as ints, and a padding given as "same" (int()
    of a string: a bare ValueError) or an adaptive size None (a TypeError deep in the arithmetic) crashed; they
    are refused naming the option (certify's trace refuses both before it builds the maps)."""
    from coupled_curvature.numeric.certify.geometry import conv_map, pool_map

    build = conv_map if isinstance(module, nn.Conv1d) else pool_map
    with pytest.raises(UnsupportedModelError, match=f"{attr}="):
        build(module, in_shape)
