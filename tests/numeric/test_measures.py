"""Each measure against a brute-force reference on tiny models (dense Hessians, grids, loops)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, hessian

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.measures import registry as M
from coupled_curvature.numeric.measures.curvature_rate import directional_derivatives
from coupled_curvature.numeric.linalg.lanczos import lanczos_top
from coupled_curvature.numeric.measures.sharpness import adaptive_average, adaptive_worst, sam_sharpness
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale, neuron_rescale, permute_neurons


def _net(widths=(3, 4, 3), seed=0, act=nn.ReLU):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], dtype=torch.float64))
        if i < len(widths) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def _data(n=20, d=3, k=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randint(0, k, (n,), generator=g)


def _dense(model, loss_fn, X, y):
    names = [n for n, _ in model.named_parameters()]
    params = {n: p.detach() for n, p in model.named_parameters()}
    sizes = [params[n].numel() for n in names]
    theta = torch.cat([params[n].reshape(-1) for n in names])

    def f(t):
        parts = torch.split(t, sizes)
        return loss_fn(functional_call(model, {n: p.reshape(params[n].shape) for n, p in zip(names, parts)}, (X,)), y)

    return theta, hessian(f)(theta), f, dict(zip(names, sizes))


NET, (X, Y), CE = _net(), _data(), nn.CrossEntropyLoss()
THETA, H, F, SIZES = _dense(NET, CE, X, Y)


def _blocks():
    start = 0
    for n, s in SIZES.items():
        yield n, slice(start, start + s)
        start += s


def test_top_eigenvalue_matches_dense_spectrum():
    r = M.top_eigenvalue(NET, CE, (X, Y))
    assert r["converged"] and r["residual"] < 1e-6
    assert abs(r["value"] - float(torch.linalg.eigvalsh(H)[-1])) < 1e-10


def test_lanczos_reports_non_convergence():
    A = torch.diag(torch.linspace(1.0, 2.0, 200, dtype=torch.float64))
    r = lanczos_top(lambda v: A @ v, 200, max_iter=3)
    assert not r.converged and r.residual > 1e-6


def test_trace_diagonal_and_normalized_flatness_match_dense():
    assert abs(M.hessian_trace(NET, CE, (X, Y))["value"] - float(torch.trace(H))) < 1e-12
    ref = 2 * float((THETA.abs() * torch.diagonal(H).clamp(min=0).sqrt()).sum())
    assert abs(M.normalized_flatness(NET, CE, (X, Y))["value"] - ref) < 1e-10


def test_hutchinson_path_is_unbiased_within_its_error():
    net = _net((3, 4, 3), act=nn.Tanh)  # tanh: also exact via factors; force Hutchinson with max_dense=0
    net = nn.Sequential(*[m for m in net])
    theta, Hn, _, _ = _dense(net, CE, X, Y)
    cache = {}
    ctx = M.measure_context(net, CE, (X, Y), {"cache": cache})
    ctx._factors = {}  # disable the exact path
    r = M.hessian_trace(net, CE, (X, Y), cache=cache, max_dense=0, probes=30)
    assert r["stderr"] > 0 and abs(r["value"] - float(torch.trace(Hn))) < 5 * r["stderr"]


def test_relative_flatness_matches_dense_block():
    W = NET[2].weight.detach()
    sl = dict(_blocks())["2.weight"]
    Hw = H[sl, sl].reshape(3, 4, 3, 4)
    ref = float(((W @ W.T) * torch.einsum("sjtj->st", Hw)).sum())
    assert abs(M.relative_flatness(NET, CE, (X, Y))["value"] - ref) < 1e-12


def test_laplace_and_newton_match_dense_blocks():
    lap = M.laplace_logdet(NET, CE, (X, Y), delta=1e-2)["blocks"]
    newt = M.newton_decrement(NET, CE, (X, Y))["blocks"]
    g = torch.autograd.functional.jacobian(F, THETA)
    for n, sl in _blocks():
        B = H[sl, sl]
        assert abs(lap[n] - float(torch.linalg.slogdet(B + 1e-2 * torch.eye(B.shape[0], dtype=torch.float64))[1])) < 1e-9
        ref = float(g[sl] @ torch.from_numpy(np.linalg.pinv(B.numpy(), rcond=1e-10, hermitian=True)) @ g[sl])
        assert abs(newt[n] - ref) <= 1e-7 * abs(ref)


def test_fisher_rao_matches_per_sample_loop():
    vals = []
    for i in range(len(X)):
        net = _net()
        loss = CE(net(X[i:i + 1]), Y[i:i + 1])
        grads = torch.autograd.grad(loss, list(net.parameters()))
        vals.append(sum(float((p.detach() * gr).sum()) for p, gr in zip(net.parameters(), grads)) ** 2)
    assert abs(M.fisher_rao_norm(NET, CE, (X, Y))["value"] - sum(vals) / len(vals)) < 1e-12


def _quad2(t):  # a 2-parameter non-quadratic loss
    return (t[0] ** 2) * 3.0 + torch.sin(t[1]) + 0.5 * t[0] * t[1] ** 2


def test_sam_sharpness_against_grid_search():
    theta = torch.tensor([0.3, -0.2], dtype=torch.float64)
    r = sam_sharpness(_quad2, theta, rho=0.1, steps=50)
    ang = torch.linspace(0, 2 * math.pi, 20001, dtype=torch.float64)
    rad = torch.linspace(0, 0.1, 51, dtype=torch.float64)
    best = max(float((_quad2(theta.unsqueeze(1) + rr * torch.stack([ang.cos(), ang.sin()])) - _quad2(theta)).max()) for rr in rad)
    assert best - 1e-6 <= r.value <= best + 1e-8  # grid resolution


def test_adaptive_worst_against_grid_search():
    theta = torch.tensor([0.3, -0.2], dtype=torch.float64)
    r = adaptive_worst(_quad2, theta, rho=0.5, steps=60)
    ang = torch.linspace(0, 2 * math.pi, 20001, dtype=torch.float64)
    best = -1.0
    for rr in torch.linspace(0, 0.5, 51, dtype=torch.float64):
        pts = theta.unsqueeze(1) + theta.abs().unsqueeze(1) * rr * torch.stack([ang.cos(), ang.sin()])
        best = max(best, float((_quad2(pts) - _quad2(theta)).max()))
    assert best - 1e-6 <= r.value <= best + 1e-8  # grid resolution


def test_adaptive_average_uses_common_random_numbers():
    theta = torch.tensor([0.3, -0.2], dtype=torch.float64)
    r = adaptive_average(_quad2, theta, rho=0.5, samples=5, seed=3)
    g = torch.Generator().manual_seed(3)
    ref = []
    for _ in range(5):
        z = torch.randn(2, generator=g, dtype=torch.float64)
        ref.append(float(_quad2(theta + theta.abs() * 0.5 * z / z.norm()) - _quad2(theta)))
    assert abs(r.value - sum(ref) / 5) < 1e-15


def test_directional_derivatives_match_torch_func():
    u = torch.nn.functional.normalize(torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5)), dim=1)
    d = directional_derivatives(NET, CE, X[:4], Y[:4], u, 4)
    for i in range(4):
        f = lambda t, i=i: nn.functional.cross_entropy(NET(X[i:i + 1] + t * u[i:i + 1]), Y[i:i + 1])  # noqa: E731
        g = f
        for n in range(4):
            g = torch.func.grad(g)
            assert abs(float(g(torch.tensor(0.0, dtype=torch.float64)).detach()) - float(d[i, n])) < 1e-10


def _values(name, model, **kw):
    r = M.evaluate(name, model, CE, (X, Y), **kw)
    return r["blocks"] if "blocks" in r else {"v": r["value"]}


def _maxdev(a, b):
    return max(abs(b[k] - v) / abs(v) for k, v in a.items() if v is not None and b.get(k) is not None)


@pytest.mark.parametrize("name,sym,invariant", [
    ("top_eig", "layer", False), ("top_eig", "perm", True), ("trace", "perm", True), ("trace", "layer", False),
    ("sam", "layer", False), ("sam", "perm", True), ("adaptive_worst", "neuron", True), ("adaptive_avg", "neuron", True),
    ("norm_flat", "neuron", True), ("rel_flat", "layer", True), ("rel_flat", "neuron", False),
    ("fisher_rao", "neuron", True), ("laplace_logdet", "layer", False), ("lambda", "neuron", True),
    ("D", "layer", True), ("D", "neuron", False), ("Dplus", "layer", True), ("rho", "neuron", True),
    ("newton", "layer", True), ("newton", "neuron", True),
])
def test_invariance_cells(name, sym, invariant):
    moved = {"layer": layer_rescale(NET, 0, 4.0), "neuron": neuron_rescale(NET, 0, [0.5, 2.0, 4.0, 1.0]),
             "perm": permute_neurons(NET, 0, [2, 0, 3, 1])}[sym]
    dev = _maxdev(_values(name, NET), _values(name, moved))
    assert dev <= 1e-9 if invariant else dev >= 1e-3


def test_unknown_names_and_options_are_clear_errors():
    with pytest.raises(InvalidInputError, match="available: all, top_eig"):
        M.select(["top_eig", "sharpest"])
    with pytest.raises(InvalidInputError, match="unknown option"):
        M.top_eigenvalue(NET, CE, (X, Y), radius=3)
    with pytest.raises(InvalidInputError, match="rho"):
        M.sam_sharpness_measure(NET, CE, (X, Y), rho=-1.0)


def test_newton_is_degenerate_on_a_scale_invariant_block():
    # Linear(bias=False) -> BatchNorm (batch statistics): L(cW) = L(W), so Hw = −g and gᵀH⁺g = −wᵀg = 0.
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, eps=1e-12, track_running_stats=False),
                        nn.ReLU(), nn.Linear(4, 3)).double()
    net.train()
    theta, Hd, f, sizes = _dense(net, CE, X, Y)
    w, sl = theta[:12], slice(0, 12)
    g = torch.func.grad(f)(theta)[sl]
    assert float((Hd[sl, sl] @ w + g).abs().max()) < 1e-8 * float(g.abs().max())  # brute-force Euler identity
    r = M.newton_decrement(net, CE, (X, Y), allow_train_mode=True)
    assert r["degenerate"] == ["0.weight"] and r["blocks"]["0.weight"] is None
    assert r["blocks"]["3.weight"] is not None  # negative control: the classifier is not scale-invariant
    plain = M.newton_decrement(NET, CE, (X, Y))
    assert plain["degenerate"] == [] and set(plain["conditioning"]) == set(SIZES)


def test_conditioning_aware_tolerance_is_per_block_and_can_fail():
    from coupled_curvature.numeric.studies.explorer import EPS64, block_tolerances, entries, relative_deviation

    results = [{"blocks": {"a": 1.0, "b": 1.0}, "conditioning": {"a": 1e2, "b": 1e9}},
               {"blocks": {"a": 1.0, "b": 1.0}, "conditioning": {"a": 1e3, "b": 1e8}}]
    tol = block_tolerances(results, 1e-9)
    assert tol == {"a": 1e-9, "b": EPS64 * 1e9}  # ε₆₄·κ only where it exceeds 1e-9, κ the max over results
    assert block_tolerances([{"blocks": {"a": 1.0}}], 1e-9) is None  # measures without conditioning: fixed 1e-9
    # parametrized names compare with plain ones (nonlinear column)
    assert entries({"blocks": {"0.parametrizations.weight.original": 2.0}}) == {"0.weight": 2.0}
    assert relative_deviation({"blocks": {"0.weight": 2.0}}, {"blocks": {"0.parametrizations.weight.original": 3.0}}) == 0.5


def test_pinv_form_needs_g_in_range_under_non_conformal_maps():
    """T11 witness, exact in binary floating point: for singular H, gᵀH⁺g survives w -> Aw
    (g -> A⁻ᵀg, H -> A⁻ᵀHA⁻¹) when g ∈ range(H), and not otherwise."""
    from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form

    H = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # range = span(1, 1)
    Ainv = torch.diag(torch.tensor([0.5, 1.0], dtype=torch.float64))  # A = diag(2, 1), not conformal
    H2 = Ainv @ H @ Ainv
    inside, outside = torch.tensor([1.0, 1.0], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert abs(pinv_quadratic_form(H, inside, 1e-12).value - 1.0) < 1e-15
    assert abs(pinv_quadratic_form(H2, Ainv @ inside, 1e-12).value - 1.0) < 1e-15
    assert abs(pinv_quadratic_form(H, outside, 1e-12).value - 0.25) < 1e-15  # (u·g)²/‖u‖⁴, u = (1, 1)
    assert abs(pinv_quadratic_form(H2, Ainv @ outside, 1e-12).value - 0.04) < 1e-15  # u = (1/2, 1): 1/25


def test_newton_factor_route_survives_a_cutoff_crossing():
    """The neuron scaling keeps gᵀH⁺g (g ∈ range H for a Gauss–Newton-exact block), but it moves the
    block's smallest genuine eigenvalues by up to κ(A)²; a relative cutoff between the old and new
    smallest one drops their terms on one side only (witness), while the factor route stays."""
    moved = neuron_rescale(NET, 0, [0.125, 1.0, 8.0, 2.0])
    name, sl = "2.weight", dict(_blocks())["2.weight"]
    refs, rel_min = [], []
    for m in (NET, moved):
        theta, Hm, f, _ = _dense(m, CE, X, Y)
        B, g = Hm[sl, sl].numpy(), torch.func.grad(f)(theta)[sl].numpy()
        refs.append(float(g @ np.linalg.lstsq(B, g, rcond=1e-13)[0]))
        ev = np.abs(np.linalg.eigvalsh(B)) / np.abs(np.linalg.eigvalsh(B)).max()
        rel_min.append(ev[ev > 1e-12].min())
    assert rel_min[1] < 1e-3 < rel_min[0]  # the cutoff below separates the two spectra
    assert abs(refs[1] - refs[0]) <= 1e-12 * refs[0]  # brute force: invariant
    fac = [M.newton_decrement(m, CE, (X, Y)) for m in (NET, moved)]
    assert all(r["routes"][name] == "factor" for r in fac) and fac[0]["rank"][name] == fac[1]["rank"][name] == 8
    for r, ref in zip(fac, refs):
        assert abs(r["blocks"][name] - ref) <= 1e-10 * ref
    assert abs(fac[1]["blocks"][name] - fac[0]["blocks"][name]) <= 1e-13 * refs[0]
    cut = [M.newton_decrement(m, CE, (X, Y), route="pinv", pinv_rtol=1e-3) for m in (NET, moved)]
    assert cut[0]["rank"][name] > cut[1]["rank"][name]
    assert abs(cut[1]["blocks"][name] - cut[0]["blocks"][name]) >= 1e-3 * cut[0]["blocks"][name]


def test_dplus_method_passes_through_and_keys_the_cache():
    """The registry's Dplus runs diagnose's Krylov path when asked; dense and Krylov share no cache entry."""
    cache: dict = {}
    kry = M.evaluate("Dplus", NET, CE, (X, Y), cache=cache, method="krylov", krylov_tol=1e-10)
    dense = M.evaluate("Dplus", NET, CE, (X, Y), cache=cache)
    assert kry["method"] == "krylov" and dense["method"] == "gram" and dense["krylov"] == {}  # gram: the one default
    assert set(kry["krylov"]) == set(kry["blocks"])
    for name, sl in _blocks():
        w = THETA[sl].numpy()
        Hb = H[sl, sl].numpy()
        g = torch.func.grad(F)(THETA)[sl].numpy()
        ref = w @ np.linalg.pinv(Hb, rcond=1e-10, hermitian=True) @ w / (w @ w) * (g @ g)
        assert abs(dense["blocks"][name] - ref) <= 1e-8 * abs(ref)
        if kry["krylov"][name]["converged"]:
            assert abs(kry["blocks"][name] - ref) <= 1e-6 * abs(ref)
    with pytest.raises(InvalidInputError, match="method"):
        M.evaluate("Dplus", NET, CE, (X, Y), method="qr")
    with pytest.raises(InvalidInputError, match="unknown option"):
        M.evaluate("D", NET, CE, (X, Y), method="krylov")  # D needs no H⁺


@pytest.mark.parametrize("name", ["trace", "top_eig"])
def test_hessian_measures_run_on_a_hugging_face_transformer(name):
    """The fused attention kernels have no second derivative: by name, every measure runs on the math kernel (called
    outside that context, the same measure fails inside torch: the control)."""
    pytest.importorskip("transformers", reason="transformers is not installed (pip install '.[hf]')")
    from coupled_curvature.numeric.models.tiny_transformers import tiny_transformer

    t = tiny_transformer("gpt2-tiny", steps=2)
    out = M.evaluate(name, t.model, t.loss_fn, t.data)
    assert out is not None
    with pytest.raises(RuntimeError, match="derivative for .*attention.* is not implemented"):
        M.REGISTRY[name].func(t.model, t.loss_fn, t.data)
