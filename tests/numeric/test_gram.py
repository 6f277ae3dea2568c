"""The Gram route (numeric/factors/gram.py) against the dense route and an independent reference.

Reference: the block Hessian by ``torch.func.hessian`` on the block alone and numpy ``eigh``
(OpenBLAS, not torch), with the same relative cutoff. ``D`` must agree to 1e-9 relative, ``D⁺`` to
``max(1e-9, 20εκ)`` relative to ``Σ|c_i/λ_i|`` (κ = 1/smallest kept relative eigenvalue), as
tests/numeric/test_pinv.py judges a pseudo-inverse form.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, hessian

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.gram import gram_forms
from coupled_curvature.numeric.models.factory import randomize_batchnorm
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale, neuron_rescale
from tests.numeric._nets import data, mlp

EPS = float(np.finfo(np.float64).eps)
RTOL = 1e-10


pytestmark = pytest.mark.usefixtures("one_thread")


def reference(model, loss_fn, X, y, members, rtol=RTOL):
    """``D``, ``D⁺`` and the tolerance of ``D⁺`` from the dense block Hessian (torch.func) and numpy eigh."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    buffers = {n: b.detach() for n, b in model.named_buffers()}
    shapes, sizes = [params[m].shape for m in members], [params[m].numel() for m in members]

    def f(flat):
        p = dict(params)
        p.update({m: t.reshape(s) for m, t, s in zip(members, torch.split(flat, sizes), shapes)})
        return loss_fn(functional_call(model, {**p, **buffers}, (X,)), y)

    w = torch.cat([params[m].reshape(-1) for m in members])
    g, H = grad(f)(w).numpy(), hessian(f)(w).numpy()
    w = w.numpy()
    lam, U = np.linalg.eigh((H + H.T) / 2)
    c = (U.T @ w) ** 2
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    wsq, gsq = w @ w, g @ g
    dplus = (c[keep] / lam[keep]).sum() / wsq * gsq
    kappa = np.abs(lam).max() / np.abs(lam[keep]).min()
    tol = max(1e-9 * abs(dplus), 20 * EPS * kappa * np.abs(c[keep] / lam[keep]).sum() / wsq * gsq)
    return (w @ H @ w) / wsq / gsq, dplus, tol


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: conv3x3-BN-ReLU-conv3x3-BN, plus the identity or a 1x1-conv-BN downsample."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + idt)


class TinyResNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 3, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(3)
        self.relu = nn.ReLU()
        self.layer1 = BasicBlock(3, 3)
        self.layer2 = BasicBlock(3, 4, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(self.pool(x), 1))


def _eval_bn(model, seed=0):
    """Random running statistics and affine parameters, then eval mode (BatchNorm is affine there)."""
    return randomize_batchnorm(model, seed).double().eval()


def bn_cnn(seed=0, classes=3):
    torch.manual_seed(seed)
    return _eval_bn(nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(16, classes)), seed)


def resnet(seed=0, classes=3):
    torch.manual_seed(seed)
    return _eval_bn(TinyResNet(classes), seed)


MODELS = {
    "relu-mlp": (lambda: mlp([5, 7, 6, 3], act="relu"), (5,)),
    "leaky-mlp": (lambda: mlp([5, 7, 6, 3], act="leaky"), (5,)),
    "bn-cnn": (bn_cnn, (1, 8, 8)),
    "resnet": (resnet, (1, 8, 8)),
}
LOSSES = {"ce-mean": nn.CrossEntropyLoss(), "ce-sum": nn.CrossEntropyLoss(reduction="sum"),
          "mse-mean": nn.MSELoss(), "mse-sum": nn.MSELoss(reduction="sum")}


def _data(shape, loss_name, n=12, classes=3):
    X, y = data(n, shape, classes)
    if loss_name.startswith("mse"):
        y = torch.randn(n, classes, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return X, y


@pytest.mark.parametrize("loss_name", list(LOSSES))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_gram_matches_dense_and_reference(model_name, loss_name):
    make, shape = MODELS[model_name]
    model, loss_fn = make(), LOSSES[loss_name]
    X, y = _data(shape, loss_name)
    gram = diagnose(model, loss_fn, (X, y), method="gram", pinv_rtol=RTOL)
    dense = diagnose(model, loss_fn, (X, y), method="dense", pinv_rtol=RTOL)
    for b in gram:
        assert b.method == "gram", (b.name, b.notes)
        d = dense[b.name]
        assert d.method == "dense" and d.inverse_coupled is not None
        D, Dp, tol = reference(model, loss_fn, X, y, list(b.params))
        assert rel(b.coupled, D) <= 1e-9 and rel(d.coupled, D) <= 1e-9, (b.name, b.coupled, D)
        assert abs(b.inverse_coupled - Dp) <= tol, (b.name, b.inverse_coupled, Dp, tol)
        assert abs(b.inverse_coupled - d.inverse_coupled) <= 2 * tol, (b.name, b.inverse_coupled, d.inverse_coupled)
        assert b.rank == d.rank, (b.name, b.rank, d.rank)


def test_both_sides_and_column_chunks_agree():
    """A block with more parameters than rows takes G = BBᵀ; a tiny memory budget splits its columns
    over several chunks (and recomputes the rows), with the same result."""
    model, (X, y) = resnet(), _data((1, 8, 8), "ce-mean", n=4)
    ob = Objective(float64_copy(model), nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    part = {n: [n] for n in ob.names}
    big = gram_forms(ob, part, None, rtol=RTOL)
    small = gram_forms(ob, part, None, rtol=RTOL, memory_budget=8 * 8 * 40)  # 40 columns of 8 rows at a time
    sides = {b: r.form.side for b, r in big.items()}
    assert sides["layer2.conv2.weight"] == "gram" and sides["fc.bias"] == "factor"
    for b in part:
        assert rel(small[b].form.value, big[b].form.value) <= 1e-9 and rel(small[b].form.wHw, big[b].form.wHw) <= 1e-12


def test_tanh_is_rejected_and_falls_back_with_a_note():
    model = mlp([5, 7, 3], act="tanh")
    X, y = _data((5,), "ce-mean")
    d = diagnose(model, nn.CrossEntropyLoss(), (X, y), method="gram")
    first = d["0.weight"]
    assert first.method == "dense" and first.inverse_coupled is not None
    assert any("Gram route does not apply" in n and "not affine" in n for n in first.notes)
    assert d["2.weight"].method == "gram"  # the last layer: the outputs are affine in it, even after tanh


def test_forcing_the_gram_formula_on_tanh_is_wrong():
    model = mlp([5, 7, 3], act="tanh")
    X, y = _data((5,), "ce-mean")
    ob = Objective(model, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    forced = gram_forms(ob, {"0.weight": ["0.weight"]}, None, rtol=RTOL, force=True)["0.weight"].form
    D, Dp, tol = reference(model, nn.CrossEntropyLoss(), X, y, ["0.weight"])
    w = model[0].weight.detach().reshape(-1)
    g_sq = diagnose(model, nn.CrossEntropyLoss(), (X, y), inverse=False)["0.weight"].g_sq
    assert rel(forced.value / float(w @ w) * g_sq, Dp) > 1e-3
    assert rel(forced.wHw / float(w @ w) / g_sq, D) > 1e-3
    checked = gram_forms(ob, {"0.weight": ["0.weight"]}, None, rtol=RTOL)["0.weight"]
    assert checked.form is None and "not affine" in checked.reason


def test_train_mode_batchnorm_is_rejected():
    model = bn_cnn().train()
    X, y = _data((1, 8, 8), "ce-mean")
    d = diagnose(model, nn.CrossEntropyLoss(), (X, y), method="gram", allow_train_mode=True)
    for b in d:
        assert b.method == "dense" and any("train mode" in n for n in b.notes), (b.name, b.notes)


def test_auto_uses_gram_and_records_it_in_meta():
    model = mlp([5, 40, 3])  # 0.weight: 200 parameters
    X, y = _data((5,), "ce-mean", n=6)
    d = diagnose(model, nn.CrossEntropyLoss(), (X, y), method="auto", max_dense=50)
    assert {b.method for b in d} == {"gram"} and d.meta["method"] == "auto"
    tanh = diagnose(mlp([5, 60, 3], act="tanh"), nn.CrossEntropyLoss(), (X, y), method="auto", max_dense=100)
    assert tanh["0.weight"].method == "krylov" and tanh["0.bias"].method == "dense"  # 300 > 100 parameters


@pytest.mark.parametrize("act", ["relu", "leaky"])
def test_gram_D_and_Dplus_invariant_under_layer_rescale(act):
    model = mlp([5, 8, 7, 3], act=act, seed=2)
    X, y = _data((5,), "ce-mean", n=16)
    before = diagnose(model, nn.CrossEntropyLoss(), (X, y), method="gram")
    after = diagnose(layer_rescale(model, 1, 4.0), nn.CrossEntropyLoss(), (X, y), method="gram")  # exact in float
    moved = diagnose(neuron_rescale(model, 0, [0.25, 4.0, 1, 1, 2.0, 1, 0.5, 1]), nn.CrossEntropyLoss(), (X, y),
                     method="gram")
    for b in before:
        a = after[b.name]
        assert b.method == a.method == "gram"
        assert rel(a.coupled, b.coupled) <= 1e-9 and rel(a.inverse_coupled, b.inverse_coupled) <= 1e-9, b.name
    assert rel(moved["0.weight"].coupled, before["0.weight"].coupled) > 1e-3
    assert rel(after["2.weight"].rayleigh, before["2.weight"].rayleigh) > 1e-3  # RQ is not invariant


def test_the_default_is_the_gram_route_and_keeps_its_refusals_out_of_the_notes():
    """diagnose's default method is "gram": on a ReLU net every block takes it; on a Tanh net the refused
    blocks say why in meta["gram_refused"], not in one note each, while an explicit method="gram"
    keeps the notes. Values equal the dense route's (negative control: dense without Gram records
    "dense" on every block)."""
    CE = nn.CrossEntropyLoss()
    X, y = _data((4,), "ce-mean", n=10)
    torch.manual_seed(0)
    relu = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)).double()
    tanh = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    d = diagnose(relu, CE, (X, y))
    assert d.meta["method"] == "gram" and {b.method for b in d} == {"gram"} and "gram_refused" not in d.meta
    dense = diagnose(relu, CE, (X, y), method="dense")
    assert {b.method for b in dense} == {"dense"}
    assert max(rel(a.inverse_coupled, b.inverse_coupled) for a, b in zip(d, dense)) <= 1e-8
    t = diagnose(tanh, CE, (X, y))
    assert set(t.meta["gram_refused"]) == {"0.weight", "0.bias"}
    assert not any("Gram route does not apply" in n for b in t for n in b.notes)
    explicit = diagnose(tanh, CE, (X, y), method="gram")
    assert "gram_refused" not in explicit.meta
    assert all(any("Gram route does not apply" in n for n in explicit[b].notes) for b in ("0.weight", "0.bias"))


def test_the_patch_gram_of_a_late_conv_equals_the_materialised_rows_and_the_dense_route(monkeypatch):
    """A conv with few output positions and many parameters takes G from the factored rows (patch_gram,
    never forming B); its G and u equal B Bᵀ and Bw of the materialised rows over several batches, and D⁺
    equals the dense route's. Negative control: a wrong u is caught by the route's check."""
    from coupled_curvature.numeric.factors import gram as gram_module
    from coupled_curvature.numeric.factors.layers import layer_rows
    from coupled_curvature.numeric.factors.patch_gram import patch_gram, patch_gram_cost, rows_cost

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(8, 12, 3, padding=1),
                        nn.ReLU(), nn.Flatten(), nn.Linear(12 * 4, 3)).double().eval()
    X, y = torch.randn(10, 3, 4, 4, dtype=torch.float64), torch.randint(0, 3, (10,))
    loss = nn.CrossEntropyLoss()
    batches = [(X[:6], y[:6]), (X[6:], y[6:])]
    ob = Objective(net, loss, prepare_batches(batches, loss))
    from coupled_curvature.numeric.factors.outputs import output_factors

    factors = [output_factors(ob, i) for i in range(2)]
    parts = [layer_rows(ob, i, ["2"], f.A)["2"] for i, f in enumerate(factors)]
    B = torch.cat([p.rows(["weight", "bias"]).reshape(-1, 12 * 8 * 9 + 12) for p in parts])
    w = torch.cat([net[2].weight.detach().reshape(-1), net[2].bias.detach()])
    G, u = patch_gram(parts, ["weight", "bias"], net[2].weight.detach().reshape(12, -1), net[2].bias.detach())
    assert torch.allclose(G, B @ B.T, rtol=1e-12, atol=1e-14) and torch.allclose(u, B @ w, rtol=1e-12, atol=1e-14)
    m = B.shape[0]
    assert patch_gram_cost(m, 10, 12, 72, 4) < rows_cost(m, 12 * 72, 4) / 2  # so the route takes it
    taken = []
    real = gram_module.patch_gram
    monkeypatch.setattr(gram_module, "patch_gram", lambda *a, **k: taken.append(1) or real(*a, **k))
    part = {"2.weight": ["2.weight"], "2.bias": ["2.bias"]}
    got = diagnose(net, loss, batches, blocks=part, method="gram")
    ref = diagnose(net, loss, batches, blocks=part, method="dense")
    assert taken and got["2.weight"].method.value == "gram"
    for b in part:
        assert got[b].inverse_coupled == pytest.approx(ref[b].inverse_coupled, rel=1e-8)
        assert got[b].rank == ref[b].rank
    # negative control: a u off by 1% fails the check ‖u‖² = wᵀHw, and the block falls back to the dense route
    monkeypatch.setattr(gram_module, "patch_gram", lambda *a, **k: (lambda G, u: (G, 1.01 * u))(*real(*a, **k)))
    off = diagnose(net, loss, batches, blocks=part, method="gram")
    assert off["2.weight"].method.value == "dense" and "does not reproduce" in " ".join(off["2.weight"].notes)


def test_the_gram_check_compares_with_the_tangent_route_where_it_applies_else_a_hessian_vector_product():
    from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute

    X, y = _data((5,), "ce-mean")
    relu = mlp([5, 7, 3])
    d = diagnose(relu, nn.CrossEntropyLoss(), (X, y), method="gram")
    hvp = diagnose(relu, nn.CrossEntropyLoss(), (X, y), method="gram", routes={WHwRoute.HVP, SpectralRoute.GRAM})
    assert {b.wHw_route for b in d} == {WHwRoute.TANGENT} and {b.wHw_route for b in hvp} == {WHwRoute.HVP}
    assert all(b.method == "gram" for b in d)
    for b in d:
        assert b.coupled == pytest.approx(hvp[b.name].coupled, rel=1e-12)
        assert b.inverse_coupled == pytest.approx(hvp[b.name].inverse_coupled, rel=1e-10)
    assert all("read off the autograd graph" in b.method_reason for b in d)  # no numeric second-derivative check
    assert all("sample(s)" in b.method_reason for b in hvp)  # without the tangent route: the numeric check ran
    tanh = diagnose(mlp([5, 7, 3], act="tanh"), nn.CrossEntropyLoss(), (X, y), method="gram")
    assert tanh["0.weight"].wHw_route is WHwRoute.HVP and "Tanh" in tanh["0.weight"].wHw_reason
    assert tanh["2.weight"].wHw_route is WHwRoute.TANGENT
