"""Certified ``D⁺`` of blocks above 512 parameters by the Gram matrix ``G = BBᵀ`` (issue 24, item 4):
against float64 ``diagnose(method='gram')`` and exact rationals, a negative control, the ``m > 512`` and
straddling refusals, the Gram and Hessian routes against each other, and ``‖H⁺_τw‖²`` of :mod:`.spectrum`
against numpy and on its fallbacks."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from flint import arb, arb_mat, ctx
from torch import nn

from coupled_curvature.numeric.certify.api import certify, evaluate, prepare
from coupled_curvature.numeric.certify.ball import from_arb
from coupled_curvature.numeric.certify.blocks import _gram_form
from coupled_curvature.numeric.certify.exact import exact_params
from coupled_curvature.numeric.certify.gram import gram
from coupled_curvature.numeric.certify.hessian import hessian
from coupled_curvature.numeric.certify.spectrum import pinv_form
from coupled_curvature.numeric.core.diagnostics import diagnose
from tests.numeric._nets import cnn, data, mlp
from tests.numeric.test_certify import CE, residual_net

HIDDEN = {"hidden": ["2.weight"]}  # the 40×40 = 1600-parameter weight of 8-[40,40]-3


@pytest.fixture(scope="module")
def hidden(one_thread):
    """``(certificate, float64 diagnosis)`` of the hidden weight on 60 samples: ``m = 60·3 = 180``."""
    model = mlp([8, 40, 40, 3], seed=0)
    X, y = data(60, (8,), 3, seed=1)
    return certify(model, CE, (X, y), blocks=HIDDEN), diagnose(model, CE, (X, y), blocks=HIDDEN, method="gram")


def test_hidden_linear_weight_contains_float64_gram_value(hidden):
    cert, diag = hidden
    b, d = cert["hidden"], diag["hidden"]
    assert b.size == 1600 and b.inverse_route == "gram" and b.inverse_reason is None
    assert b.rank == 120 == d.rank  # N·(C − 1): each sample's softmax factor has rank C − 1
    ball, ref = b.inverse_coupled, Fraction(d.inverse_coupled)
    assert ball.relative_width < 1e-25
    slack = abs(ball.mid) * Fraction(1, 10**9)  # float64 D⁺: rounding times the conditioning of G
    assert ball.lower - slack <= ref <= ball.upper + slack
    assert abs(ref - ball.mid) / ball.mid < 1e-12  # in fact it agrees to float64 rounding here
    wsq_g = b.wHpinvw.mid / b.w_sq.mid * b.sqnorm_grad.mid
    assert abs(wsq_g - ball.mid) <= ball.width + b.wHpinvw.width  # D⁺ = (wᵀH⁺w / wᵀw)·‖g‖²


def test_negative_control_a_perturbed_value_is_outside(hidden):
    """The ball is narrow enough to reject float64 ``D⁺·(1 ± 10⁻⁶)``: it certifies, it does not just agree."""
    cert, diag = hidden
    ball, ref = cert["hidden"].inverse_coupled, diag["hidden"].inverse_coupled
    for bad in (ref * (1 + 1e-6), ref * (1 - 1e-6)):
        assert bad not in ball


def test_gram_dimension_over_512_is_refused_naming_n_b_and_m(one_thread):
    model = mlp([8, 40, 40, 3], seed=0)
    X, y = data(171, (8,), 3, seed=1)  # m = 171·3 = 513
    b = certify(model, CE, (X, y), blocks=HIDDEN)["hidden"]
    assert b.coupled is not None and b.inverse_coupled is None and b.inverse_route is None
    assert "n_b = 1600" in b.inverse_reason and "m = N·C = 171·3 = 513 > 512" in b.inverse_reason


def _orthogonal_probe(rtol: float):
    """A bias-free ``Linear(200, 3)`` (600 parameters) under summed squared error on the inputs ``e_1``
    and ``e_2/2``: ``H = 2·I_3 ⊗ diag(1, 1/4, 0, …)``, so ``G`` has eigenvalues 2 and 1/2 (three each) and
    every quantity is an exact rational."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(200, 3, bias=False)).double()
    X = torch.zeros(2, 200, dtype=torch.float64)
    X[0, 0], X[1, 1] = 1.0, 0.5
    y = torch.randn(2, 3, dtype=torch.float64)
    cert = certify(model, nn.MSELoss(reduction="sum"), (X, y), pinv_rtol=rtol)
    W = [[Fraction(v) for v in row] for row in model[0].weight.detach().tolist()]
    Y = [[Fraction(v) for v in row] for row in y.tolist()]
    r0 = [W[c][0] - Y[0][c] for c in range(3)]  # residuals f − y of the two samples
    r1 = [W[c][1] / 2 - Y[1][c] for c in range(3)]
    g_sq = sum(4 * a * a + b * b for a, b in zip(r0, r1))  # g = 2·Σ_n (f_n − y_n) x_nᵀ
    w_sq = sum(v * v for row in W for v in row)
    return cert["0.weight"], W, w_sq, g_sq


def test_exact_rational_d_plus_kept_and_dropped(one_thread):
    """All kept (``H⁺ = I_3 ⊗ diag(1/2, 2, 0, …)``), and the eigenvalue 1/2 dropped at ``τ = 1``: the
    exact rational ``D⁺`` lies in the balls."""
    for rtol, h_pinv in ((0.125, (Fraction(1, 2), Fraction(2))), (0.5, (Fraction(1, 2), Fraction(0)))):
        b, W, w_sq, g_sq = _orthogonal_probe(rtol)
        assert b.size == 600 and b.inverse_route == "gram" and b.rank == (6 if rtol < 0.25 else 3)
        wHpw = sum(h_pinv[0] * W[c][0] ** 2 + h_pinv[1] * W[c][1] ** 2 for c in range(3))
        assert wHpw in b.wHpinvw and wHpw / w_sq * g_sq in b.inverse_coupled
        assert b.inverse_coupled.relative_width < 1e-15


def test_eigenvalue_at_the_cutoff_is_refused_with_the_eigenvalue(one_thread):
    """``pinv_rtol = 1/4``: ``τ = 1/4·2 = 1/2`` is exactly an eigenvalue of ``G``, so no ball decides it."""
    b, *_ = _orthogonal_probe(0.25)
    assert b.coupled is not None and b.inverse_coupled is None and b.inverse_route == "gram"
    assert "straddles the cutoff" in b.inverse_reason and "pinv_rtol=0.25" in b.inverse_reason
    assert Fraction(1, 2) in b.straddling and b.straddling.width < Fraction(1, 10**6)


def test_conv_weight_and_layer_blocks_against_float64(one_thread):
    """A 1152-parameter conv weight (and with its bias, the "layer" partition) on ``m = 20·3 = 60``."""
    model = cnn((1, 8, 16), seed=0)
    X, y = data(20, (1, 8, 8), 3, seed=2)
    blocks = {"conv": ["3.weight", "3.bias"], "fc": ["7.weight"]}
    cert = certify(model, CE, (X, y), blocks=blocks)
    diag = diagnose(model, CE, (X, y), blocks=blocks, method="gram")
    assert [cert[n].inverse_route for n in blocks] == ["gram", "hessian"]
    for name in blocks:
        ball, ref = cert[name].inverse_coupled, Fraction(diag[name].inverse_coupled)
        assert ball.relative_width < 1e-25 and abs(ref - ball.mid) / ball.mid < 1e-10


def _both_routes(model, loss, X, y, members, op, rtol=Fraction(1, 10**10)):
    """``wᵀH⁺_τw`` by the dense Hessian and by the Gram matrix of the same block."""
    prep = prepare(model, loss, (X, y), prec=256)
    net, arb_loss, _ = evaluate(prep, exact_params(prep.model64), 256)
    w = arb_mat([[v] for m in members for v in net.params[m].entries()])
    H = hessian(net, arb_loss, op, members)
    dense = pinv_form(H, w, rtol)
    G, v = gram(net, arb_loss, op, members)
    assert G.nrows() == X.shape[0] * arb_loss.C
    return dense, _gram_form(G, v, arb_loss, (w.transpose() * H * w).entries()[0], rtol)


@pytest.mark.parametrize("members, op", [(["0.weight"], 0), (["2.bias"], 2), (["2.weight", "2.bias"], 2),
                                         (["4.bias", "4.weight"], 4)])
@pytest.mark.parametrize("loss", [CE, nn.MSELoss()])
def test_gram_and_hessian_routes_agree_on_linear_blocks(members, op, loss, prec256):
    """Two certified enclosures of the same number: they must meet, with equal ranks (Linear blocks,
    members in any order; mean reductions, so ``scale`` enters ``G`` and the result)."""
    model = mlp([4, 6, 5, 3], seed=3)
    X, y = data(10, (4,), 3, seed=4)
    if isinstance(loss, nn.MSELoss):
        y = X[:, :3] * 0.5
    dense, via_gram = _both_routes(model, loss, X, y, members, op)
    assert dense.rank == via_gram.rank and dense.value.overlaps(via_gram.value)
    assert via_gram.value.rel_accuracy_bits() > 70


@pytest.mark.parametrize("members", [["conv1.weight"], ["bn1.weight"], ["bn2.bias", "bn2.weight"],
                                     ["conv2.weight", "conv2.bias"], ["conv3.weight"], ["fc.weight"]])
def test_gram_and_hessian_routes_agree_on_conv_and_batchnorm_blocks(members, prec256):
    """Grouped dilated conv, BatchNorm, residual addition, max pool, strided conv, Linear after pooling."""
    model = residual_net()
    X, y = data(4, (1, 8, 8), 3, seed=5)
    ops = [op.name for op in prepare(model, CE, (X, y), prec=256).ops]
    op = ops.index(members[0].rsplit(".", 1)[0])
    dense, via_gram = _both_routes(model, CE, X, y, members, op)
    assert dense.rank == via_gram.rank and dense.value.overlaps(via_gram.value)
    assert via_gram.value.rel_accuracy_bits() > 70


def test_gram_route_refuses_rows_inconsistent_with_the_tangent_form(prec256):
    G, v = arb_mat([[2]]), arb_mat([[1]])

    class Loss:
        scale = arb(1)

    bad = _gram_form(G, v, Loss(), arb(3), Fraction(1, 10**10))
    assert bad.value is None and "inconsistent" in bad.reason
    good = _gram_form(G, v, Loss(), arb(1), Fraction(1, 10**10))
    assert good.value.contains(arb(1) / 4)  # vᵀG⁻²v = 1/4


@pytest.mark.parametrize("rank", [4, 9, 12])
def test_squared_pinv_form_against_numpy(rank, prec256):
    """``‖H⁺_τw‖²`` on rank-deficient (the shifted-solve filter) and full-rank (the solve) ``H``."""
    rng = np.random.default_rng(rank)
    B = rng.standard_normal((rank, 12))
    w = rng.standard_normal(12)
    lam, U = np.linalg.eigh(B.T @ B)
    keep = lam > 1e-10 * lam.max()
    ref = float(np.sum((U[:, keep].T @ w) ** 2 / lam[keep] ** 2))
    f = pinv_form(arb_mat(B.T.tolist()) * arb_mat(B.tolist()), arb_mat(12, 1, w.tolist()), Fraction(1, 10**10),
                  square=True)
    ball = from_arb(f.value)
    assert f.rank == rank and abs(float(ball.mid) - ref) <= 1e-8 * ref
    assert ball.relative_width < 1e-20


def test_squared_pinv_form_fallbacks_are_exact(prec256):
    """Beyond the float64 corrections' budget (``max|λ|/κ = 2^45``) the ball solves decide, and exactly:
    ``‖H⁻¹w‖² = 1 + 2^90`` for ``diag(1, 2^-45)``; with the null vector ``(0, 1, −1)`` dropped,
    ``H⁺w = e_1 + (0, 1, 1)/(4a)`` for ``w = (1, 1, 0)``, so ``‖H⁺w‖² = 1 + 1/(8a²) = 1 + 2^89``."""
    full = pinv_form(arb_mat([[1, 0], [0, 2.0**-45]]), arb_mat([[1], [1]]), Fraction(1, 2**50), square=True)
    assert full.rank == 2 and full.value.contains(1 + arb(2) ** 90) and full.value.rel_accuracy_bits() > 150
    a = 2.0**-46
    dropped = pinv_form(arb_mat([[1, 0, 0], [0, a, a], [0, a, a]]), arb_mat([[1], [1], [0]]), Fraction(1, 2**50),
                        square=True)
    assert dropped.rank == 2 and dropped.value.contains(1 + arb(2) ** 89)
    straddle = pinv_form(arb_mat([[1, 0], [0, 2.0**-20]]), arb_mat([[1], [1]]), Fraction(1, 2**20), square=True)
    assert straddle.value is None and "straddles" in straddle.reason and straddle.straddling.contains(2.0**-20)
