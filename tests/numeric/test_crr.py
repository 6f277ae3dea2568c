"""CRR: value against the λ measure's derivatives, gradient against finite differences, the seed stream,
bad input, the double-backward refusal and the piecewise-linear note."""

import math

import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, TrainModeError, UnsupportedModelError
from coupled_curvature.numeric.measures.curvature_rate import curvature_rate, directional_derivatives
from coupled_curvature.numeric.training.crr import crr_details, crr_penalty

pytestmark = pytest.mark.usefixtures("one_thread")


def _f(t):
    return float(t.detach())


def _tanh_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)).double()


def _data(n=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randint(0, 2, (n,), generator=g)


def test_value_equals_the_lambda_measures_derivatives():
    net, (X, y) = _tanh_net(), _data()
    loss = nn.CrossEntropyLoss()
    orders = (2, 3, 5)
    # same seed, whole batch: the same unit directions as the λ measure draws
    lam = curvature_rate(net, loss, (X, y), orders=5, points=len(X), seed=7)
    d = lam.log_derivatives.exp()  # |d_n| per point and order
    expected = 0.25 * sum(float(d[:, n - 1].mean()) for n in orders) / len(orders)
    got = crr_penalty(net, loss, X, y, orders=orders, scale=0.25, generator=7)
    assert math.isclose(float(got.detach()), expected, rel_tol=1e-12)
    # and a different direction stream gives a different value (the comparison can fail)
    other = crr_penalty(net, loss, X, y, orders=orders, scale=0.25, generator=8)
    assert abs(float(other.detach()) - expected) > 1e-6 * expected


def test_create_graph_keeps_the_detached_results():
    net, (X, y) = _tanh_net(), _data()
    U = torch.nn.functional.normalize(torch.randn(X.shape, dtype=torch.float64), dim=1)
    a = directional_derivatives(net, nn.CrossEntropyLoss(), X, y, U, 4)
    b = directional_derivatives(net, nn.CrossEntropyLoss(), X, y, U, 4, create_graph=True)
    assert not a.requires_grad and b.requires_grad
    assert torch.equal(a, b.detach())


def test_gradient_matches_central_finite_differences():
    net, (X, y) = _tanh_net(3), _data(6)
    loss = nn.CrossEntropyLoss()

    def value():
        return crr_penalty(net, loss, X, y, orders=(1, 2, 3), scale=1.0, generator=5)

    net.zero_grad()
    value().backward()
    h = 1e-6
    worst = 0.0
    for p in net.parameters():
        for i in range(p.numel()):
            flat = p.data.view(-1)
            old = float(flat[i])
            flat[i] = old + h
            up = _f(value())
            flat[i] = old - h
            down = _f(value())
            flat[i] = old
            fd = (up - down) / (2 * h)
            worst = max(worst, abs(fd - float(p.grad.view(-1)[i])) / max(1.0, abs(fd)))
    assert worst < 1e-7


def test_scale_is_linear_and_zero_scale_gives_zero():
    net, (X, y) = _tanh_net(), _data()
    loss = nn.CrossEntropyLoss()
    a = crr_penalty(net, loss, X, y, scale=1e-3)
    b = crr_penalty(net, loss, X, y, scale=2e-3)
    assert math.isclose(2 * _f(a), _f(b), rel_tol=1e-14) and _f(a) > 0
    assert _f(crr_penalty(net, loss, X, y, scale=0)) == 0.0


def test_user_rng_untouched_and_stream_advances():
    net, (X, y) = _tanh_net(), _data()
    loss = nn.CrossEntropyLoss()
    state = torch.get_rng_state()
    gen = torch.Generator().manual_seed(11)
    first = _f(crr_penalty(net, loss, X, y, points=4, generator=gen))
    second = _f(crr_penalty(net, loss, X, y, points=4, generator=gen))
    again = _f(crr_penalty(net, loss, X, y, points=4, generator=torch.Generator().manual_seed(11)))
    assert torch.equal(torch.get_rng_state(), state)
    assert first == again and first != second


@pytest.mark.parametrize("orders", [(), (0, 2), (3, 2), (2, 2), (2.0, 3), (True, 2), 3, (-1,)])
def test_bad_orders(orders):
    net, (X, y) = _tanh_net(), _data()
    with pytest.raises(InvalidInputError, match="orders"):
        crr_penalty(net, nn.CrossEntropyLoss(), X, y, orders=orders)


@pytest.mark.parametrize("scale", [-1e-3, float("nan"), float("inf"), "1"])
def test_bad_scale(scale):
    net, (X, y) = _tanh_net(), _data()
    with pytest.raises(InvalidInputError, match="scale"):
        crr_penalty(net, nn.CrossEntropyLoss(), X, y, scale=scale)


class _OnceDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


class _Sin(nn.Module):
    def forward(self, x):
        return _OnceDifferentiable.apply(x)


def test_module_without_double_backward_is_named():
    net = nn.Sequential(nn.Linear(3, 4), _Sin(), nn.Linear(4, 2)).double()
    X, y = _data()
    with pytest.raises(UnsupportedModelError, match="'1' \\(_Sin\\).*double backward"):
        crr_penalty(net, nn.CrossEntropyLoss(), X, y)
    # control: the same net with torch.sin is accepted
    ok = nn.Sequential(net[0], nn.Identity(), net[2])
    ok[1].forward = torch.sin
    assert _f(crr_penalty(ok, nn.CrossEntropyLoss(), X, y)) > 0


def test_piecewise_linear_net_is_flagged_and_smooth_net_is_not():
    X, y = _data()
    relu = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2)).double()
    r = crr_details(relu, nn.CrossEntropyLoss(), X, y)
    assert r.piecewise_linear and "loss alone" in r.note
    s = crr_details(_tanh_net(), nn.CrossEntropyLoss(), X, y)
    assert not s.piecewise_linear and s.note is None
    # the λ measure says the same in its result
    assert curvature_rate(relu, nn.CrossEntropyLoss(), (X, y), orders=3).piecewise_linear
    assert not curvature_rate(_tanh_net(), nn.CrossEntropyLoss(), (X, y), orders=3).piecewise_linear
    # on the ReLU net with MSE the loss is quadratic along every line: order 3 vanishes exactly
    mse = crr_details(relu, nn.MSELoss(), X, torch.randn(len(X), 2, dtype=torch.float64), orders=(2, 3))
    assert mse.per_order[3] == 0.0 and mse.per_order[2] > 0


def test_train_mode_batchnorm_is_refused():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2)).double()
    X, y = _data()
    with pytest.raises(TrainModeError, match="BatchNorm1d"):
        crr_penalty(net, nn.CrossEntropyLoss(), X, y)
    assert _f(crr_penalty(net.eval(), nn.CrossEntropyLoss(), X, y)) > 0


class _SinNet(nn.Module):
    """A model without children whose own forward has no double backward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Parameter(torch.randn(2, 3, dtype=torch.float64))

    def forward(self, x):
        return _OnceDifferentiable.apply(x @ self.lin.T)


def test_a_childless_model_without_double_backward_is_named_by_class():
    X, y = _data()
    with pytest.raises(UnsupportedModelError, match=r"\(_SinNet\).*double backward"):
        crr_penalty(_SinNet(), nn.CrossEntropyLoss(), X, y)


def test_float32_model_gives_a_float32_penalty_close_to_float64():
    net, (X, y) = _tanh_net(), _data()
    p64 = crr_penalty(net, nn.CrossEntropyLoss(), X, y, generator=3)
    p32 = crr_penalty(net.float(), nn.CrossEntropyLoss(), X.float(), y, generator=3)
    assert p32.dtype == torch.float32 and abs(_f(p32) - _f(p64)) < 1e-4 * abs(_f(p64))
