"""The operator seam: H_bb handed out as a SciPy LinearOperator, and D, D⁺ measured with a supplied curvature
(an independent dense Hessian, curvlinops' Gauss–Newton operator), with bad operators refused before any work."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy.sparse.linalg import LinearOperator
from torch import nn
from torch.func import functional_call, jacrev

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.curvature_operator import block_hessian
from coupled_curvature.numeric.core.diagnostics import diagnose

F64 = torch.float64


def _problem(act: type[nn.Module] = nn.Tanh, seed: int = 0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(3, 5), act(), nn.Linear(5, 2)).double()
    X, y = torch.randn(24, 3, dtype=F64), torch.randn(24, 2, dtype=F64)
    return net, nn.MSELoss(), (X, y)


def _torch_hessian(net: nn.Module, loss_fn, data, name: str) -> torch.Tensor:
    """H_bb by torch.autograd.functional.hessian of the loss as a function of the one tensor (independent)."""
    X, y = data
    params = dict(net.named_parameters())
    w0 = params[name].detach()

    def f(w: torch.Tensor) -> torch.Tensor:
        return loss_fn(functional_call(net, {**params, name: w.reshape(w0.shape)}, (X,)), y)

    return torch.autograd.functional.hessian(f, w0.reshape(-1).clone())


def _ggn(net: nn.Module, data, name: str) -> torch.Tensor:
    """Σ_n J_nᵀ (∂²ℓ/∂f²) J_n for MSELoss (mean over n·k outputs: ∂²ℓ/∂f² = 2/(N·k) I), by jacrev (independent)."""
    X, _ = data
    params = dict(net.named_parameters())
    w0 = params[name].detach()
    J = jacrev(lambda w: functional_call(net, {**params, name: w.reshape(w0.shape)}, (X,)))(w0.reshape(-1).clone())
    J = J.reshape(-1, w0.numel())
    return (2.0 / J.shape[0] * J.T @ J).detach()


def _reference(w: torch.Tensor, g_sq: float, M: torch.Tensor, rtol: float = 1e-10) -> tuple[float, float]:
    """(D, D⁺) from a dense matrix by numpy's eigh (a second implementation of the cutoff pseudo-inverse)."""
    lam, U = np.linalg.eigh(M.numpy())
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    c = U.T @ w.numpy()
    wMpw = float(np.sum(c[keep] ** 2 / lam[keep]))
    w_sq = float(w @ w)
    return float(w @ M @ w) / w_sq / g_sq, wMpw / w_sq * g_sq


def test_block_hessian_is_the_block_of_the_hessian():
    net, loss, data = _problem()
    before = [p.detach().clone() for p in net.parameters()]
    H = block_hessian(net, loss, data, "0.weight")
    assert isinstance(H, LinearOperator) and H.shape == (15, 15)
    dense = H @ np.eye(15)
    ref = _torch_hessian(net, loss, data, "0.weight").numpy()
    assert np.abs(dense - ref).max() <= 1e-10 * np.abs(ref).max()
    assert np.abs(dense - dense.T).max() <= 1e-12 * np.abs(ref).max()
    # negative control: another block's Hessian is not this one
    other = _torch_hessian(net, loss, data, "2.weight").numpy()
    assert other.shape != ref.shape or np.abs(other - ref).max() > 1e-3
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))  # the user's model is untouched


def test_a_supplied_hessian_gives_the_engine_s_own_d_and_dplus():
    net, loss, data = _problem()
    name = "0.weight"
    own = diagnose(net, loss, data)[name]
    H = _torch_hessian(net, loss, data, name)
    got = diagnose(net, loss, data, curvature={name: H})
    b = got[name]
    assert b.curvature == "external: Tensor" and b.wHw_route == "external" and b.method == "dense"
    assert own.curvature == "hessian" and got["2.weight"].curvature == "hessian"
    assert b.coupled == pytest.approx(own.coupled, rel=1e-10)
    assert b.inverse_coupled == pytest.approx(own.inverse_coupled, rel=1e-8)
    assert got.meta["curvature"] == {name: "external: Tensor"}
    # above max_dense the supplied operator goes to Lanczos quadrature, with the same value
    kry = diagnose(net, loss, data, curvature={name: H}, max_dense=4)[name]
    assert kry.method == "krylov" and kry.krylov_converged
    assert kry.inverse_coupled == pytest.approx(own.inverse_coupled, rel=1e-6)


def _curvlinops():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
        return pytest.importorskip("curvlinops", reason="curvlinops is not installed (pip install '.[bench]')")


@pytest.mark.parametrize("name", ["0.weight", "2.weight"])
def test_d_with_the_gauss_newton_operator_of_curvlinops(name):
    cl = _curvlinops()
    net, loss, data = _problem()
    params = dict(net.named_parameters())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
        G = cl.GGNLinearOperator(net, loss, [params[name]], [data])
    got = diagnose(net, loss, data, curvature={name: G})[name]
    assert got.curvature == "external: GGNLinearOperator"
    w = params[name].detach().reshape(-1)
    ggn = _ggn(net, data, name)
    D, Dp = _reference(w, got.g_sq, ggn)
    assert got.wHw == pytest.approx(float(w @ ggn @ w), rel=1e-10)
    assert got.coupled == pytest.approx(D, rel=1e-10)
    assert got.inverse_coupled == pytest.approx(Dp, rel=1e-7)
    # control: for a tanh net the residual term is not zero, so D with the GGN is not D with the Hessian
    own = diagnose(net, loss, data, inverse=False)[name]
    if name == "0.weight":
        assert abs(got.coupled - own.coupled) > 1e-6 * abs(own.coupled)


def test_gauss_newton_d_is_kept_by_a_layer_rescaling_and_moved_by_a_neuron_rescaling():
    """The GGN transforms like the Hessian under W1 → cW1, W2 → W2/c (ReLU), so D with it is kept (T3); a
    non-uniform neuron scaling moves it (the control)."""
    cl = _curvlinops()
    net, loss, data = _problem(nn.ReLU)

    def d_ggn(model: nn.Module) -> float:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=FutureWarning)
            G = cl.GGNLinearOperator(model, loss, [model[0].weight], [data])
        return diagnose(model, loss, data, curvature={"0.weight": G}, inverse=False)["0.weight"].coupled

    base = d_ggn(net)

    def scaled(s: torch.Tensor) -> nn.Module:
        m = _problem(nn.ReLU)[0]
        with torch.no_grad():
            m[0].weight.mul_(s[:, None]), m[0].bias.mul_(s), m[2].weight.div_(s[None, :])
        return m

    uniform = d_ggn(scaled(torch.full((5,), 3.0, dtype=F64)))
    ragged = d_ggn(scaled(torch.tensor([3.0, 0.5, 1.0, 2.0, 0.25], dtype=F64)))
    assert uniform == pytest.approx(base, rel=1e-9)
    assert abs(ragged - base) > 1e-3 * abs(base)


@pytest.mark.parametrize("curvature, words", [
    ({"0.weight": np.eye(3)}, "has shape (3, 3); the block has 15 entries"),
    ({"nope": np.eye(15)}, "not a block; blocks are: 0.weight"),
    ([np.eye(15)], "must map block names to operators"),
    ({"0.weight": object()}, "has shape None"),
    ({"0.weight": np.triu(np.ones((15, 15)))}, "is not symmetric"),
])
def test_bad_operators_are_refused_with_what_to_pass(curvature, words):
    net, loss, data = _problem()
    with pytest.raises(InvalidInputError) as e:
        diagnose(net, loss, data, curvature=curvature)
    assert words in str(e.value)


def test_block_hessian_refuses_an_unknown_block():
    net, loss, data = _problem()
    with pytest.raises(InvalidInputError, match="no block 'x'; blocks are: 0.weight, 0.bias"):
        block_hessian(net, loss, data, "x")
