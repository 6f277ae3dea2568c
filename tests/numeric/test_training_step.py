"""The SAM/ASAM glue over pytorch-optimizer: ASAM's ascent perturbation is equivariant under a layer
rescaling (SAM's is not), one step of each method, the missing extra, bad input."""

import sys

import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, layer_rescale
from coupled_curvature.numeric.training.step import METHODS, ascent_perturbation, make_optimizer, training_step

from tests.numeric._nets import data, mlp

pytest.importorskip("pytorch_optimizer")
pytestmark = pytest.mark.usefixtures("one_thread")


def _equivariance_error(method, c, layer=1):
    net = mlp([4, 6, 5, 3], seed=2)
    X, y = data(24, (4,), 3, seed=3)
    twin = layer_rescale(net, layer, c)
    assert function_gap(net, twin, X) < 1e-12
    loss = nn.CrossEntropyLoss()
    e, e_twin = ascent_perturbation(net, loss, X, y, method), ascent_perturbation(twin, loss, X, y, method)
    # the rescaling's element-wise factor a = w_twin / w (c, 1/c or 1 per tensor)
    a = {n: p_t.detach() / p.detach() for (n, p), (_, p_t) in zip(net.named_parameters(), twin.named_parameters())}
    want = torch.cat([(a[n] * e[n]).flatten() for n in e])
    got = torch.cat([e_twin[n].flatten() for n in e])
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize("c", [2.0, 0.3, 7.5])
def test_asam_perturbation_of_the_twin_is_the_rescaled_perturbation(c):
    assert _equivariance_error("asam", c) < 1e-12


@pytest.mark.parametrize("c", [2.0, 0.3, 7.5])
def test_sam_perturbation_is_not_equivariant(c):
    assert _equivariance_error("sam", c) > 1e-2


def test_ascent_perturbation_has_the_stated_radius_and_leaves_the_model():
    net = mlp([4, 6, 3], seed=0)
    X, y = data(16, (4,), 3)
    before = [p.detach().clone() for p in net.parameters()]
    e = ascent_perturbation(net, nn.CrossEntropyLoss(), X, y, "sam", rho=0.07)
    assert abs(float(torch.cat([v.flatten() for v in e.values()]).norm()) - 0.07) < 1e-6
    ea = ascent_perturbation(net, nn.CrossEntropyLoss(), X, y, "asam", rho=0.3)
    # ASAM's radius is measured in |w|-normalised coordinates: ‖e / |w|‖ = ρ (the library's norm is float32)
    norm = torch.cat([(ea[n] / p.detach().abs()).flatten() for n, p in net.named_parameters()]).norm()
    assert abs(float(norm) - 0.3) < 1e-6
    assert all(torch.equal(a, p) for a, p in zip(before, net.parameters()))


def test_sam_step_is_a_base_step_with_the_gradient_at_the_ascent_point():
    net = mlp([4, 6, 3], seed=1)
    X, y = data(16, (4,), 3)
    loss = nn.CrossEntropyLoss()
    for method in ("sam", "asam"):
        work = mlp([4, 6, 3], seed=1)
        e = ascent_perturbation(net, loss, X, y, method)
        probe = mlp([4, 6, 3], seed=1)
        with torch.no_grad():
            for (n, p) in probe.named_parameters():
                p.add_(e[n])
        probe.zero_grad()
        loss(probe(X), y).backward()
        want = [p0.detach() - 0.1 * pp.grad for p0, pp in zip(net.parameters(), probe.parameters())]
        opt = make_optimizer(work, method, base=torch.optim.SGD, lr=0.1)
        training_step(work, loss, X, y, opt, method)
        err = max(float((p.detach() - w).abs().max()) for p, w in zip(work.parameters(), want))
        assert err < 1e-6, (method, err)  # the library's perturbation norm is float32


def test_every_method_lowers_the_loss_and_crr_reports_its_penalty():
    X, y = data(64, (2,), 2, seed=4)
    loss = nn.CrossEntropyLoss()
    nets = {method: mlp([2, 8, 2], act="tanh", seed=5) for method in METHODS}
    state = torch.get_rng_state()
    for method, net in nets.items():
        opt = make_optimizer(net, method, lr=1e-2)
        gen = torch.Generator().manual_seed(0)
        first = training_step(net, loss, X, y, opt, method, crr_scale=1e-2, generator=gen)
        for _ in range(20):
            last = training_step(net, loss, X, y, opt, method, crr_scale=1e-2, generator=gen)
        assert last.loss < first.loss, method
        assert (first.penalty is not None) == (method == "crr") and first.method == method
    assert torch.equal(torch.get_rng_state(), state)


def test_crr_step_on_a_relu_net_carries_the_piecewise_linear_note():
    X, y = data(16, (2,), 2)
    net = mlp([2, 8, 2], seed=0)
    r = training_step(net, nn.CrossEntropyLoss(), X, y, make_optimizer(net, "crr"), "crr")
    assert r.note is not None and "piecewise linear" in r.note
    net = mlp([2, 8, 2], act="tanh", seed=0)
    assert training_step(net, nn.CrossEntropyLoss(), X, y, make_optimizer(net, "crr"), "crr").note is None


def test_bad_input():
    net = mlp([2, 3, 2], seed=0)
    X, y = data(4, (2,), 2)
    loss = nn.CrossEntropyLoss()
    with pytest.raises(InvalidInputError, match="method"):
        make_optimizer(net, "adam")
    with pytest.raises(InvalidInputError, match="rho"):
        make_optimizer(net, "sam", rho=0.0)
    with pytest.raises(InvalidInputError, match="rho"):
        make_optimizer(net, "asam", rho=float("nan"))
    with pytest.raises(InvalidInputError, match="rho"):
        make_optimizer(net, "crr", rho=0.1)
    with pytest.raises(InvalidInputError, match="needs the optimizer"):
        training_step(net, loss, X, y, make_optimizer(net, "sam"), "asam")
    with pytest.raises(InvalidInputError, match="orders"):
        training_step(net, loss, X, y, make_optimizer(net, "crr"), "crr", crr_orders=(3, 2))
    with pytest.raises(InvalidInputError, match="scale"):
        training_step(net, loss, X, y, make_optimizer(net, "crr"), "crr", crr_scale=-1.0)


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pytorch_optimizer", None)
    net = mlp([2, 3, 2], seed=0)
    with pytest.raises(MissingExtraError, match=r"coupled-curvature\[train\]"):
        make_optimizer(net, "asam")
    make_optimizer(net, "baseline")  # works without it
