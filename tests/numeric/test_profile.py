"""The spectral profile (numeric/core/profile.py) against diagnose, an independent dense reference, and
the ReLU symmetries.

Reference: the block Hessian by ``torch.func.hessian`` on the block alone and numpy ``eigh`` (not
torch's), giving the atoms ``(λ_i/max|λ|, (u_iᵀw)²/‖w‖²)`` directly from the definition. Two
measures are compared by their cumulative weight at points that lie between the distinct atoms of
either (so that degenerate or nearly equal eigenvalues, whose individual eigenvectors are not
defined, do not matter), away from the rounding-noise band ``|x| ≤ 1e-7``, and by ``ρ/‖g‖²``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.func import grad, hessian

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.profile import BlockProfile, spectral_profile
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.models.training import fit
from coupled_curvature.numeric.symmetries.homogeneous import (
    function_gap, layer_rescale, neuron_rescale, permute_neurons,
)
from coupled_curvature.numeric.core.plots import profile_figure
from tests.numeric._nets import block_loss, data, mlp

LOSS = nn.CrossEntropyLoss()
NOISE = 1e-7  # atoms with |x| below this are rounding-level in some of the compared measures


def reference(model, X, y, members):
    """``(x, p, ρ/‖g‖², D, D⁺(rtol) for rtol ↦ ...)`` from the dense block Hessian and numpy eigh."""
    f, w = block_loss(model, LOSS, X, y, members)
    g, H = grad(f)(w).numpy(), hessian(f)(w).numpy()
    w = w.numpy()
    lam, U = np.linalg.eigh((H + H.T) / 2)
    rho = np.abs(lam).max()
    p = (U.T @ w) ** 2 / (w @ w)

    def dplus(rtol):
        keep = np.abs(lam) > rtol * rho
        return float((p[keep] / lam[keep]).sum() * (g @ g))

    return lam / rho, p, rho / (g @ g), float(w @ H @ w / (w @ w) / (g @ g)), dplus


def cdf(x, p, t):
    order = np.argsort(x)
    cum = np.concatenate([[0.0], np.cumsum(p[order])])
    return cum[np.searchsorted(x[order], t, side="right")]


def probe_points(x, merge=1e-6):
    """Points strictly between the distinct atoms of ``x`` (atoms within ``merge`` merged), off the noise band."""
    xs = np.sort(np.asarray(x))
    distinct = [xs[0]]
    for v in xs[1:]:
        if v - distinct[-1] > merge * max(abs(v), NOISE):
            distinct.append(v)
    mids = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] + 1e-3]
    return np.array([t for t in mids if abs(t) > NOISE])


def measure_gap(a, b):
    """``max |F_a(t) − F_b(t)|`` over the probe points of both measures (``a``, ``b``: ``(x, p)``)."""
    t = np.concatenate([probe_points(a[0]), probe_points(b[0])])
    return float(np.abs(cdf(*a, t) - cdf(*b, t)).max())


def atoms(b: BlockProfile):
    return b.rel_eigs, b.weights


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=[20, 5], ids=["20 samples", "5 samples"])
def small(request):
    """An untrained ReLU MLP 4-6-5-3 (the Gram route applies to every block): on 20 samples ``B`` has
    ``m = 40`` rows, more than any block's parameters (the Gram route forms ``BᵀB``); on 5 samples
    ``m = 10``, fewer than the weights' 24 and 30 (it forms ``G = BBᵀ``, and ``w`` has weight on the
    null space of ``B``)."""
    X, y = data(request.param, (4,), 3)
    return mlp([4, 6, 5, 3], seed=0), X, y


@pytest.fixture(scope="module")
def trained():
    """A ReLU MLP 5-7-6-3 trained by Adam for 30 epochs (loss 0.13) on 48 samples of a synthetic 3-class task."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(48, 5, generator=g, dtype=torch.float64)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).long() + (X[:, 3] > 1.0).long()
    net = make_mlp(5, [7, 6], 3, seed=2)
    fit(net, X, y, epochs=30, seed=2, lr=1e-2, batch_size=16)
    return net, X, y


@pytest.mark.parametrize("method", ["auto", "gram", "dense", "krylov"])
def test_D_and_dplus_from_the_profile_agree_with_diagnose_on_every_block(small, method):
    net, X, y = small
    prof = spectral_profile(net, LOSS, (X, y), method=method)
    diag = diagnose(net, LOSS, (X, y), method=method)
    assert prof.names() == diag.names()
    for b in prof:
        d = diag[b.name]
        assert b.route == ("gram" if method == "auto" else method) and b.exact == (method != "krylov")
        assert rel(b.D(), d.coupled) < 1e-10, b.name
        assert rel(b.dplus(1e-10), d.inverse_coupled) < 1e-10, b.name
        assert abs(b.weights.sum() - 1.0) < 1e-12 and np.abs(b.rel_eigs).max() <= 1.0


@pytest.mark.parametrize("method", ["gram", "dense", "krylov"])
def test_the_profile_is_the_measure_of_the_definition(small, method):
    """Atoms, ρ/‖g‖², D and the D⁺ curve against numpy's eigendecomposition of the autograd Hessian.
    Krylov runs to an invariant space here, so its quadrature is the measure itself (equal eigenvalues
    merged into one node, which the cumulative comparison does not see)."""
    net, X, y = small
    prof = spectral_profile(net, LOSS, (X, y), method=method)
    if method == "gram":  # both sides of the route are exercised: G = BBᵀ on few samples, BᵀB on more
        assert ("G = BBᵀ" in prof["0.weight"].notes[-1]) == (X.shape[0] == 5)
    rtols = [1e-12, 1e-6, 1e-3, 1e-2, 0.1, 0.5]
    for b in prof:
        x, p, ratio, D, dplus = reference(net, X, y, list(b.params))
        assert measure_gap(atoms(b), (x, p)) < 1e-10, b.name
        assert rel(b.lambda_ratio, ratio) < 1e-10 and rel(b.D(), D) < 1e-10
        curve = b.dplus_curve(rtols)
        for r, v in zip(rtols, curve):
            if np.abs(np.abs(x) - r).min() > 1e-6:  # no eigenvalue at the cutoff: both sides keep the same set
                assert abs(v - dplus(r)) <= 1e-9 * max(abs(dplus(rtols[0])), 1e-300), (b.name, r)


def test_truncated_krylov_is_a_gauss_quadrature_of_the_measure(small):
    """Stopped after k < distinct-eigenvalue steps, the k-node quadrature still integrates λ^j exactly
    for j ≤ 2k − 1 (Gauss), and not λ^{2k}: a property of the Lanczos measure, checked against numpy."""
    net, X, y = small
    k = 4
    b = spectral_profile(net, LOSS, (X, y), method="krylov", krylov_max_iter=k, blocks={"w": ["0.weight"]})["w"]
    assert not b.exact and b.converged is False and b.rel_eigs.size == k
    x, p, ratio, *_ = reference(net, X, y, ["0.weight"])
    lam_ref = x * ratio / b.lambda_ratio  # λ in units of the profile's ρ (the g of both is the same)
    moments = [(float(b.weights @ b.rel_eigs**j), float(p @ lam_ref**j)) for j in range(2 * k + 1)]
    for j, (quad, exact) in enumerate(moments[: 2 * k]):
        assert rel(quad, exact) < 1e-8, j
    assert rel(*moments[2 * k]) > 1e-6  # the first moment Gauss does not integrate: the check can fail


def test_an_indefinite_block_keeps_its_sign_and_the_cutoff_of_diagnose():
    """The outputs are not affine in the first layer of a tanh net: auto falls back to dense there (with a
    note), x < 0 appears, |x| ≤ 1; the last layer is affine and takes the Gram route."""
    net = mlp([3, 5, 2], act="tanh", seed=4)
    X, y = data(12, (3,), 2, seed=5)
    prof = spectral_profile(net, LOSS, (X, y))
    diag = diagnose(net, LOSS, (X, y))
    negative = 0
    for b in prof:
        if b.name.startswith("0."):
            assert b.route == "dense" and any("Gram route does not apply" in n for n in b.notes)
        else:
            assert b.route == "gram" and (b.rel_eigs >= 0).all()
        x, p, ratio, D, dplus = reference(net, X, y, list(b.params))
        negative += int((b.rel_eigs < -1e-6).any())
        assert measure_gap(atoms(b), (x, p)) < 1e-10 and rel(b.lambda_ratio, ratio) < 1e-10
        assert rel(b.dplus(1e-10), diag[b.name].inverse_coupled) < 1e-10
    assert negative > 0


@pytest.mark.parametrize("method, n", [("gram", 48), ("gram", 6), ("dense", 48)])
def test_the_profile_is_invariant_under_relu_symmetries_and_moves_under_neuron_scaling(trained, method, n):
    """On 6 samples the Gram route forms G = BBᵀ for the weights, on 48 BᵀB."""
    net, X, y = trained
    X, y = X[:n], y[:n]
    base = spectral_profile(net, LOSS, (X, y), method=method)
    assert all(b.route == method for b in base)
    moves = {"layer 0 by 7.3": layer_rescale(net, 0, 7.3), "layer 1 by 0.3": layer_rescale(net, 1, 0.3),
             "permute layer 0": permute_neurons(net, 0, [3, 0, 6, 1, 5, 2, 4]),
             "permute layer 1": permute_neurons(net, 1, [5, 4, 3, 2, 1, 0])}
    for label, moved in moves.items():
        assert function_gap(net, moved, X) < 1e-12
        other = spectral_profile(moved, LOSS, (X, y), method=method)
        for a, b in zip(base, other):
            assert measure_gap(atoms(a), atoms(b)) < 1e-9, (label, a.name)
            assert rel(b.lambda_ratio, a.lambda_ratio) < 1e-9, (label, a.name)
    # negative control: a non-uniform neuron scaling keeps the function but is not conformal on the blocks
    scaled = neuron_rescale(net, 0, [1.0, 2.0, 0.5, 3.0, 1.0, 0.25, 1.5])
    assert function_gap(net, scaled, X) < 1e-12
    other = spectral_profile(scaled, LOSS, (X, y), method=method)
    for name in ("0.weight", "0.bias", "2.weight"):
        a, b = base[name], other[name]
        moved = max(measure_gap(atoms(a), atoms(b)), rel(b.lambda_ratio, a.lambda_ratio))
        assert moved > 1e-3, name
    assert measure_gap(atoms(base["4.weight"]), atoms(other["4.weight"])) < 1e-9  # blocks it does not touch


def test_methods_on_hand_made_atoms():
    """``H = diag(4, 1, 0)`` with ``w = (1, 1, 1)``, ``‖g‖² = 2``: atoms (0, 1/3), (1/4, 1/3), (1, 1/3), ρ = 4."""
    b = BlockProfile("b", ("b",), 3, np.array([0.0, 0.25, 1.0]), np.full(3, 1 / 3), 4.0, 2.0, 3.0, "dense", True)
    assert b.D() == pytest.approx((4 + 1) / 3 / 2, rel=1e-15)  # wᵀHw/wᵀw/‖g‖²
    assert b.dplus(1e-10) == pytest.approx((1 / 4 + 1) / 3 * 2, rel=1e-15)  # (Σ c/λ)/wᵀw·‖g‖²
    assert b.dplus_curve([0.5, 0.25, 0.1]).tolist() == pytest.approx([1 / 4 / 3 * 2, 1 / 4 / 3 * 2, 5 / 6])
    assert b.cdf(0.0) == pytest.approx(1 / 3) and b.cdf(-1.0) == 0.0
    assert b.cdf([0.2, 0.25, 2.0]).tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert b.lambda_ratio == 2.0 and b.mean() == pytest.approx(5 / 12)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 9), decades=st.floats(0.0, 8.0),
       rtol=st.sampled_from([0.0, 1e-12, 1e-6, 1e-3, 0.3]))
def test_the_functionals_of_the_measure_are_the_quadratic_forms(seed, n, decades, rtol):
    """For random symmetric (possibly indefinite) ``H``, ``w``, ``‖g‖²``: the profile built from the
    definition gives ``D = wᵀHw/wᵀw/‖g‖²`` and ``D⁺`` equal to ``pinv_quadratic_form``'s ``wᵀH⁺_τw``."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-decades, 0.0, n)
    H, w, g_sq = (U * lam) @ U.T, rng.standard_normal(n), float(rng.uniform(0.1, 10.0))
    rho = np.abs(lam).max()
    b = BlockProfile("b", ("b",), n, lam / rho, (U.T @ w) ** 2 / (w @ w), rho, g_sq, float(w @ w), "dense", True)
    assert b.D() == pytest.approx(w @ H @ w / (w @ w) / g_sq, rel=1e-9, abs=1e-12 * rho / g_sq)
    if np.abs(np.abs(lam) / rho - rtol).min() > 1e-9:  # no eigenvalue at the cutoff
        form = pinv_quadratic_form(torch.from_numpy(H), torch.from_numpy(w), rtol)
        scale = float(np.abs((U.T @ w) ** 2 / lam).sum() / (w @ w) * g_sq)
        assert abs(b.dplus(rtol) - form.value / (w @ w) * g_sq) <= 1e-9 * scale


def test_a_zero_block_has_no_profile_and_a_zero_gradient_no_D():
    net = mlp([3, 4, 2], seed=1)
    with torch.no_grad():
        net[0].bias.zero_()
    X, y = data(10, (3,), 2)
    b = spectral_profile(net, LOSS, (X, y), method="dense")["0.bias"]
    assert b.rel_eigs.size == 0 and b.D() is None and b.dplus() is None and "w = 0" in b.notes[-1]
    z = BlockProfile("z", ("z",), 1, np.array([1.0]), np.array([1.0]), 2.0, 0.0, 1.0, "dense", True)
    assert z.D() is None and z.lambda_ratio is None and z.dplus() == 0.0


def test_bad_options_are_refused_with_what_to_do(small):
    net, X, y = small
    with pytest.raises(InvalidInputError, match="method must be one of"):
        spectral_profile(net, LOSS, (X, y), method="eig")
    with pytest.raises(InvalidInputError, match="raise max_dense"):
        spectral_profile(net, LOSS, (X, y), method="dense", max_dense=10)
    tanh = mlp([4, 6, 3], act="tanh")
    with pytest.raises(InvalidInputError, match="Gram route does not apply"):
        spectral_profile(tanh, LOSS, (X, y), method="gram", max_dense=10)
    b = spectral_profile(net, LOSS, (X, y), blocks={"b": ["4.bias"]})["b"]
    for bad in ([], [1.0], ["x"], [-1e-3]):
        with pytest.raises(InvalidInputError, match="rtols must be"):
            b.dplus_curve(bad)


def test_auto_takes_krylov_above_max_dense_where_gram_does_not_apply():
    net = mlp([4, 6, 3], act="tanh", seed=2)
    X, y = data(16, (4,), 3)
    prof = spectral_profile(net, LOSS, (X, y), method="auto", max_dense=10)
    routes = {b.name: b.route for b in prof}
    assert routes == {"0.weight": "krylov", "0.bias": "dense", "2.weight": "gram", "2.bias": "gram"}
    diag = diagnose(net, LOSS, (X, y), method="auto", max_dense=10)
    for b in prof:
        assert rel(b.D(), diag[b.name].coupled) < 1e-10
        if b.route == "krylov":
            assert b.iterations > 0 and b.converged and "Lanczos quadrature" in b.notes[-1]


def test_the_figure_draws_one_cumulative_curve_per_block(small, tmp_path):
    net, X, y = small
    prof = spectral_profile(net, LOSS, (X, y))
    fig = prof.plot("test net")
    ax = fig.axes[0]
    curves = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(curves) == len(prof)
    for line, b in zip(curves, prof):
        ys = line.get_ydata()
        assert ys[-1] == pytest.approx(1.0, abs=1e-12) and np.all(np.diff(ys) >= -1e-15)
    with pytest.raises(InvalidInputError, match="at least one block"):
        profile_figure({"blocks": {}})
