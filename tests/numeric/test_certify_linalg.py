"""The certified engine's linear algebra (issue 24, speed): the Kronecker Hessian of a Linear block
against torch's float64 Hessian, and the shifted-solve forms of :mod:`.resolvent` against numpy,
with their fallbacks when the float64 corrections cannot converge."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import arb, arb_mat, ctx
from torch import nn
from torch.func import hessian as torch_hessian

from coupled_curvature.numeric.certify.api import evaluate, prepare
from coupled_curvature.numeric.certify.ball import from_arb
from coupled_curvature.numeric.certify.exact import exact_params
from coupled_curvature.numeric.certify.hessian import hessian
from coupled_curvature.numeric.certify.resolvent import filtered_form, inverse_form
from coupled_curvature.numeric.certify.separation import split
from coupled_curvature.numeric.certify.spectrum import pinv_form
from tests.numeric._nets import block_loss, data, mlp
from tests.numeric.test_certify import CE, residual_net


@pytest.mark.parametrize("members, op", [(["0.weight"], 0), (["0.bias"], 0), (["2.weight", "2.bias"], 2),
                                         (["4.bias", "4.weight"], 4)])
@pytest.mark.parametrize("loss", [nn.CrossEntropyLoss(), nn.MSELoss(reduction="sum")])
def test_kronecker_hessian_against_torch(members, op, loss, prec256):
    """``Σ_n u_ik[n]·x̃_nj·x̃_nl`` is the block Hessian in the members' order (weight, bias or both, any
    order), and it is narrow."""
    model = mlp([4, 5, 4, 3], seed=3)
    X, y = data(12, (4,), 3, seed=4)
    if isinstance(loss, nn.MSELoss):
        y = X[:, :3] * 0.5
    H, ref = _hessians(model, loss, X, y, members, op)
    assert max(float(v.rad()) for v in H.entries()) < 1e-60 * np.abs(ref).max()


def _hessians(model, loss, X, y, members, op) -> tuple[arb_mat, np.ndarray]:
    """The certified block Hessian and torch's float64 one, after checking that they agree."""
    prep = prepare(model, loss, (X, y), prec=256)
    assert prep.ops[op].name == members[0].rsplit(".", 1)[0]
    net, arb_loss, _ = evaluate(prep, exact_params(prep.model64), 256)
    H = hessian(net, arb_loss, op, members)
    f, w = block_loss(model, loss, X, y, members)
    ref = torch_hessian(f)(w).numpy()
    got = np.array([float(v.mid()) for v in H.entries()]).reshape(ref.shape)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
    return H, ref


@pytest.mark.parametrize("members, op", [(["conv1.weight"], 0), (["conv2.bias"], 3), (["bn1.weight"], 1),
                                         (["bn2.bias", "bn2.weight"], 4), (["conv2.weight", "conv2.bias"], 3)])
def test_reverse_hessian_of_conv_and_batchnorm_blocks_against_torch(members, op, prec256):
    """The rows of ``A_nJ_n`` by one reverse pass (grouped dilated conv, BatchNorm, residual addition)."""
    X, y = data(4, (1, 8, 8), 3, seed=5)
    _hessians(residual_net(), CE, X, y, members, op)


def _problem(rank: int, n: int, seed: int) -> tuple[arb_mat, arb_mat, float]:
    """The exact ``BᵀB`` of a float64 ``B`` (rank ``rank``) in balls, ``w``, and numpy's ``wᵀH⁺w``."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((rank, n))
    w = rng.standard_normal(n)
    lam, U = np.linalg.eigh(B.T @ B)
    keep = lam > 1e-10 * lam.max()
    ref = float(np.sum((U[:, keep].T @ w) ** 2 / lam[keep]))
    return arb_mat(B.T.tolist()) * arb_mat(B.tolist()), arb_mat(n, 1, w.tolist()), ref


@pytest.mark.parametrize("rank", [3, 9, 12])
def test_resolvent_forms_against_numpy(rank, prec256):
    H, w, ref = _problem(rank, 12, rank)
    mid = np.array([float(v.mid()) for v in H.entries()]).reshape(12, 12)
    sp = split(H, mid, 1e-10)
    assert sp is not None and sp.kept == rank
    if rank == 12:
        value = inverse_form(H, w, sp.vectors, sp.values, sp.kappa, sp.top.upper(), 224)
    else:
        value = filtered_form(H, w, sp.vectors, sp.values, sp.top.upper(), sp.kappa, sp.delta, 101)
    ball = from_arb(value)
    assert abs(float(ball.mid) - ref) <= 1e-8 * abs(ref)
    assert ball.relative_width < (1e-60 if rank == 12 else 1e-25)


def test_resolvent_refuses_beyond_the_float64_budget_and_pinv_form_falls_back(prec256):
    """``max|λ|/κ = 2^45``: the float64 corrections are not trusted, ``inverse_form`` says so (``None``)
    and :func:`pinv_form` takes arb's certified solve: ``wᵀH⁻¹w = 1 + 2^45`` for ``w = (1, 1)``."""
    H, w = arb_mat([[1, 0], [0, 2.0**-45]]), arb_mat([[1], [1]])
    vecs, vals = np.eye(2), np.array([1.0, 2.0**-45])
    assert inverse_form(H, w, vecs, vals, arb(2.0**-46), arb(1), 224) is None
    form = pinv_form(H, w, Fraction(1, 2**50))
    assert form.rank == 2 and form.value.contains(1 + 2**45) and form.value.rel_accuracy_bits() > 150
    a = 2.0**-46  # eigenvalues 1, 2a = 2^-45 (kept) and 0 (dropped, eigenvector (0, 1, −1)): the filter's fallback
    dropped = pinv_form(arb_mat([[1, 0, 0], [0, a, a], [0, a, a]]), arb_mat([[1], [1], [0]]), Fraction(1, 2**50))
    assert dropped.rank == 2 and dropped.value.contains(1 + 2**44)
