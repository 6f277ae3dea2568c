"""The named T2 maps on any nn.Module: checked on the fx graph, exact where accepted, refused where
the rescaled activations meet a residual addition, a BatchNorm, a non-homogeneous map or a reshape."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric import diagnose
from coupled_curvature.numeric.linalg.tolerance import relative_change
from coupled_curvature.numeric.symmetries.graph import channel_path
from coupled_curvature.numeric.symmetries.homogeneous import (
    function_gap,
    layer_rescale,
    neuron_rescale,
    permute_neurons,
)
from tests.numeric._nets import data


class BasicBlock(nn.Module):
    """conv-bn-relu-conv-bn, plus the (downsampled) input, then relu; one ReLU module used twice."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    """ResNet-18's layout at toy size: stem, two stages of two BasicBlocks, pooling, a classifier."""

    def __init__(self, widths=(4, 8), classes=3):
        super().__init__()
        a, b = widths
        self.conv1 = nn.Conv2d(3, a, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(a)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(BasicBlock(a, a), BasicBlock(a, a))
        self.layer2 = nn.Sequential(BasicBlock(a, b, stride=2), BasicBlock(b, b))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(b, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet(seed: int = 0) -> TinyResNet:
    """Float64, eval mode, BatchNorms with non-trivial running statistics and affine parameters."""
    torch.manual_seed(seed)
    net = TinyResNet().double()
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    return net.eval()


class Stack(nn.Module):
    """fc1 -> act -> fc2 written as a plain module (not nn.Sequential)."""

    def __init__(self, act, widths=(3, 4, 2), bn=False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(widths[0], widths[1]), nn.Linear(widths[1], widths[2])
        self.bn = nn.BatchNorm1d(widths[1]) if bn else nn.Identity()
        self.act = act

    def forward(self, x):
        return self.fc2(self.act(self.bn(self.fc1(x))))


class ResidualMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h) + h


class SmallCNN(nn.Module):
    """conv -> relu -> max-pool -> x.view(x.size(0), -1) -> fc; ``view`` selects the reshape."""

    def __init__(self, view: str = "batch"):
        super().__init__()
        self.conv, self.fc, self.view = nn.Conv2d(1, 3, 3, padding=1), nn.Linear(48, 2), view

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        if self.view == "batch":
            h = h.view(h.size(0), -1)
        else:  # channels-last before flattening: moves the unit index
            h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)
        return self.fc(h)


pytestmark = pytest.mark.usefixtures("one_thread")


def _relative_gap(a: nn.Module, b: nn.Module, X: torch.Tensor) -> float:
    with torch.no_grad():
        scale = float(a(X).abs().max())
    return function_gap(a, b, X) / max(scale, 1e-300)


def _changes(before, after, field: str) -> dict[str, float]:
    return {b.name: relative_change(getattr(b, field), getattr(a, field)) for b, a in zip(before, after)}


LOSS = nn.CrossEntropyLoss()
X_IMG, Y_IMG = data(12, (3, 8, 8), 3, seed=3)
RESCALED = {"layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.conv2.weight",
            "layer2.1.bn1.weight", "layer2.1.bn1.bias", "layer2.1.conv2.weight"}


@pytest.fixture(scope="module")
def net_and_diagnosis():
    net = resnet()
    return net, diagnose(net, LOSS, (X_IMG, Y_IMG), inverse=False)


@pytest.mark.parametrize("pair", [("layer1.0.bn1", "layer1.0.conv2"), ("layer1.1.bn1", "layer1.1.conv2"),
                                  ("layer2.0.bn1", "layer2.0.conv2"), ("layer2.1.bn1", "layer2.1.conv2")])
@pytest.mark.parametrize("c", [8.0, 1e-3])
def test_rescaling_inside_a_residual_branch_keeps_the_function(pair, c):
    net = resnet()
    new = layer_rescale(net, pair, c)
    assert _relative_gap(net, new, X_IMG) <= 1e-12
    src, dst = (new.get_submodule(n) for n in pair)
    assert torch.allclose(src.weight, c * net.get_submodule(pair[0]).weight, rtol=1e-15, atol=0)
    assert torch.allclose(dst.weight, net.get_submodule(pair[1]).weight / c, rtol=1e-15, atol=0)


def test_rescalings_keep_every_block_D_and_move_RQ_of_the_rescaled_ones(net_and_diagnosis):
    net, before = net_and_diagnosis
    moved = layer_rescale(layer_rescale(net, ("layer1.0.bn1", "layer1.0.conv2"), 10.0),
                          ("layer2.1.bn1", "layer2.1.conv2"), 0.05)
    after = diagnose(moved, LOSS, (X_IMG, Y_IMG), inverse=False)
    assert before.names() == after.names() and RESCALED <= set(before.names())
    d, rq = _changes(before, after, "coupled"), _changes(before, after, "rayleigh")
    assert max(d.values()) <= 1e-10, d
    assert min(rq[n] for n in RESCALED) > 0.9  # c² = 100 or 1/400: RQ moves by far more than 90 %
    assert max(v for n, v in rq.items() if n not in RESCALED) <= 1e-10


def test_a_non_uniform_neuron_rescale_keeps_the_function_but_moves_D(net_and_diagnosis):
    net, before = net_and_diagnosis
    moved = neuron_rescale(net, ("layer1.0.bn1", "layer1.0.conv2"), [1.0, 3.0, 0.3, 2.0])
    assert _relative_gap(net, moved, X_IMG) <= 1e-12
    after = diagnose(moved, LOSS, (X_IMG, Y_IMG), inverse=False)
    d = _changes(before, after, "coupled")
    assert d["layer1.0.conv2.weight"] > 1e-3 and d["layer1.0.bn1.weight"] > 1e-3
    assert max(v for n, v in d.items() if not n.startswith(("layer1.0.bn1", "layer1.0.conv2"))) <= 1e-10


def test_permutations_with_a_batchnorm_between_keep_every_block_D(net_and_diagnosis):
    net, before = net_and_diagnosis
    path = channel_path(net, "layer1.0.conv1", "layer1.0.conv2", "permute")
    assert path.permuted == ("layer1.0.bn1",) and path.spread == 1
    moved = permute_neurons(permute_neurons(net, ("layer1.0.conv1", "layer1.0.conv2"), [2, 0, 3, 1]),
                            ("layer2.0.conv1", "layer2.0.conv2"), [7, 6, 5, 4, 0, 1, 2, 3])
    assert _relative_gap(net, moved, X_IMG) <= 1e-12
    after = diagnose(moved, LOSS, (X_IMG, Y_IMG), inverse=False)
    assert max(_changes(before, after, "coupled").values()) <= 1e-10
    # negative control: without the BatchNorm's tensors following the units, the function changes
    broken = permute_neurons(net, ("layer1.0.conv1", "layer1.0.conv2"), [2, 0, 3, 1])
    bn, orig = broken.get_submodule("layer1.0.bn1"), net.get_submodule("layer1.0.bn1")
    bn.load_state_dict(orig.state_dict())
    assert _relative_gap(net, broken, X_IMG) > 1e-3


def test_a_residual_addition_between_is_refused_and_the_refusal_is_needed():
    net = resnet()
    pair = ("layer1.0.conv2", "layer1.1.conv1")
    with pytest.raises(InvalidInputError, match="BatchNorm 'layer1.0.bn2'"):
        layer_rescale(net, pair, 2.0)
    with pytest.raises(InvalidInputError, match="residual"):
        permute_neurons(net, pair, [1, 0, 2, 3])
    with pytest.raises(InvalidInputError, match="residual"):
        layer_rescale(net, ("layer1.0.bn2", "layer1.1.conv1"), 2.0)
    with pytest.raises(InvalidInputError, match="residual"):
        layer_rescale(net, ("bn1", "layer1.0.conv1"), 2.0)  # the stem's output also feeds the skip path
    # what the refused map would do: scale bn2's output, divide the next conv, and the skip differs
    naive = resnet()
    with torch.no_grad():
        for t in (naive.layer1[0].bn2.weight, naive.layer1[0].bn2.bias):
            t.mul_(2.0)
        naive.layer1[1].conv1.weight.div_(2.0)
    assert _relative_gap(net, naive, X_IMG) > 1e-3


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h), h.sum(1)


def test_a_residual_mlp_and_a_second_reader_are_refused():
    model = ResidualMLP().double()
    for fn, arg in ((layer_rescale, 2.0), (neuron_rescale, [1, 2, 3, 4]), (permute_neurons, [1, 0, 2, 3])):
        with pytest.raises(InvalidInputError, match="residual"):
            fn(model, ("fc1", "fc2"), arg)
    with pytest.raises(InvalidInputError, match="returned by forward"):
        layer_rescale(TwoOutputs(), ("fc1", "fc2"), 2.0)


@pytest.mark.parametrize("act", [nn.Tanh(), nn.GELU(), nn.Sigmoid()])
def test_a_non_homogeneous_map_refuses_rescaling_but_not_permutation(act):
    torch.manual_seed(0)
    model = Stack(act).double()
    X, _ = data(10, (3,), 2)
    for fn, arg in ((layer_rescale, 2.0), (neuron_rescale, [1.0, 2.0, 3.0, 4.0])):
        with pytest.raises(InvalidInputError, match="not positively homogeneous"):
            fn(model, ("fc1", "fc2"), arg)
    assert _relative_gap(model, permute_neurons(model, ("fc1", "fc2"), [3, 1, 0, 2]), X) <= 1e-13
    naive = Stack(act).double()
    naive.load_state_dict(model.state_dict())
    with torch.no_grad():
        naive.fc1.weight.mul_(2.0), naive.fc1.bias.mul_(2.0), naive.fc2.weight.div_(2.0)
    assert _relative_gap(model, naive, X) > 1e-3  # what the refused rescaling would have done


def test_a_batchnorm_between_refuses_rescaling_unless_it_is_the_src():
    torch.manual_seed(0)
    model = Stack(nn.ReLU(), bn=True).double()
    X, _ = data(10, (3,), 2)
    with pytest.raises(InvalidInputError, match="train mode"):
        layer_rescale(model, ("fc1", "fc2"), 2.0)
    model.eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1), model.bn.running_var.uniform_(0.5, 2)
    with pytest.raises(InvalidInputError, match="eval mode"):
        layer_rescale(model, ("fc1", "fc2"), 2.0)
    assert _relative_gap(model, layer_rescale(model, ("bn", "fc2"), 5.0), X) <= 1e-13
    assert _relative_gap(model, permute_neurons(model, ("fc1", "fc2"), [3, 2, 1, 0]), X) <= 1e-13
    with pytest.raises(InvalidInputError, match="cannot be permuted"):
        permute_neurons(model, ("bn", "fc2"), [3, 2, 1, 0])


def test_dropout_passes_in_eval_mode_only():
    torch.manual_seed(0)
    model = Stack(nn.Dropout(0.5)).double()
    with pytest.raises(InvalidInputError, match="eval"):
        layer_rescale(model, ("fc1", "fc2"), 2.0)
    model.eval()
    X, _ = data(10, (3,), 2)
    assert _relative_gap(model, layer_rescale(model, ("fc1", "fc2"), 2.0), X) <= 1e-13


def test_flatten_keeps_the_unit_index_only_channel_major():
    torch.manual_seed(0)
    model = SmallCNN().double()
    X, _ = data(6, (1, 8, 8), 2)
    path = channel_path(model, "conv", "fc", "neuron")
    assert path.spread == 16 and path.between == ("relu", "max_pool2d", "view")
    for new in (neuron_rescale(model, ("conv", "fc"), [0.5, 3.0, 7.0]),
                permute_neurons(model, ("conv", "fc"), [2, 0, 1]), layer_rescale(model, ("conv", "fc"), 0.1)):
        assert _relative_gap(model, new, X) <= 1e-13
    moved = SmallCNN(view="channels-last").double()
    moved.load_state_dict(model.state_dict())
    assert _relative_gap(moved, layer_rescale(moved, ("conv", "fc"), 0.1), X) <= 1e-13  # one factor: fine
    for fn, arg in ((neuron_rescale, [0.5, 3.0, 7.0]), (permute_neurons, [2, 0, 1])):
        with pytest.raises(InvalidInputError, match="unit index"):
            fn(moved, ("conv", "fc"), arg)


def test_pooling_across_the_units_of_a_linear_layer_is_refused_per_unit():
    class PoolUnits(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(2, 2)

        def forward(self, x):
            return self.fc2(F.max_pool1d(torch.relu(self.fc1(x)), 2))  # pools over the 4 units

    torch.manual_seed(0)
    model = PoolUnits().double()
    X, _ = data(10, (3,), 2)
    assert _relative_gap(model, layer_rescale(model, ("fc1", "fc2"), 3.0), X) <= 1e-13
    with pytest.raises(InvalidInputError, match="pools across the units"):
        neuron_rescale(model, ("fc1", "fc2"), [1.0, 2.0, 3.0, 4.0])


def test_an_untraceable_model_gets_a_clear_error():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 2)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            return self.fc2(h) if h.sum() > 0 else self.fc2(-h)

    with pytest.raises(UnsupportedModelError, match="torch.fx cannot trace Branchy.*control flow"):
        layer_rescale(Branchy(), ("fc1", "fc2"), 2.0)


def test_bad_names_and_orders_are_refused_with_the_fix():
    model = Stack(nn.ReLU()).double()
    with pytest.raises(InvalidInputError, match="not a module of this model.*fc1, fc2"):
        layer_rescale(model, ("fc9", "fc2"), 2.0)
    with pytest.raises(InvalidInputError, match="does not read the output"):
        layer_rescale(model, ("fc2", "fc1"), 2.0)
    with pytest.raises(InvalidInputError, match="Linear or Conv"):
        layer_rescale(model, ("fc1", "act"), 2.0)
    with pytest.raises(InvalidInputError, match="two module names"):
        layer_rescale(model, ("fc1", "fc2", "fc3"), 2.0)
    with pytest.raises(InvalidInputError, match="4 units"):
        neuron_rescale(model, ("fc1", "fc2"), [1.0, 2.0])


def test_the_users_model_is_untouched():
    net = resnet()
    snap = {k: v.clone() for k, v in net.state_dict().items()}
    layer_rescale(net, ("layer1.0.bn1", "layer1.0.conv2"), 5.0)
    permute_neurons(net, ("layer1.0.conv1", "layer1.0.conv2"), [1, 0, 3, 2])
    assert all(torch.equal(snap[k], v) for k, v in net.state_dict().items())


class PlainMLP(nn.Module):
    def __init__(self, widths, act, bias):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:]))
        self.act = act

    def forward(self, x):
        for i, fc in enumerate(self.fcs):
            x = fc(x)
            if i < len(self.fcs) - 1:
                x = self.act(x)
        return x


@settings(max_examples=12, derandomize=True, deadline=None)
@given(
    widths=st.lists(st.integers(2, 6), min_size=1, max_size=3),
    bias=st.booleans(),
    leaky=st.booleans(),
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["layer", "neuron", "perm"]),
)
def test_named_maps_on_plain_mlp_classes_match_the_sequential_form(widths, bias, leaky, seed, kind):
    torch.manual_seed(seed)
    act = nn.LeakyReLU(0.1) if leaky else nn.ReLU()
    model = PlainMLP([3, *widths, 2], act, bias).double()
    seq = nn.Sequential(*(m for fc in model.fcs for m in (fc, act)))[:-1]
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(widths)))
    pair = (f"fcs.{i}", f"fcs.{i + 1}")
    if kind == "layer":
        fn, arg = layer_rescale, float(10 ** rng.uniform(-3, 3))
    elif kind == "neuron":
        fn, arg = neuron_rescale, 10 ** rng.uniform(-2, 2, widths[i])
    else:
        perm = rng.permutation(widths[i])
        fn, arg = permute_neurons, perm if (perm != np.arange(widths[i])).any() else perm[::-1].copy()
    new, reference = fn(model, pair, arg), fn(seq, i, arg)
    X, y = data(16, (3,), 2, seed=seed)
    assert _relative_gap(model, new, X) <= 1e-12
    for p, q in zip(new.parameters(), reference.parameters()):  # the int form on the same weights
        assert torch.allclose(p, q, rtol=1e-15, atol=0)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), new.parameters()))
    if kind != "neuron":
        before, after = (diagnose(m, LOSS, (X, y), inverse=False) for m in (model, new))
        assert max(v for v in _changes(before, after, "coupled").values() if v is not None) <= 1e-10


class Functional(nn.Module):
    """Functional forms between the layers: F.leaky_relu, a product with a number, F.dropout that
    follows the mode, a per-channel PReLU, then x.shape[0]-based reshape."""

    def __init__(self):
        super().__init__()
        self.conv, self.prelu, self.fc = nn.Conv2d(1, 3, 3, padding=1), nn.PReLU(3), nn.Linear(3 * 16, 2)

    def forward(self, x):
        h = 0.5 * F.leaky_relu(self.conv(x), 0.2)
        h = F.avg_pool2d(self.prelu(F.dropout(h, 0.3, training=self.training)), 2)
        return self.fc(h.reshape(h.shape[0], -1))


def test_functional_forms_and_a_per_channel_prelu_pass():
    torch.manual_seed(0)
    model = Functional().double().eval()
    with torch.no_grad():
        model.prelu.weight.copy_(torch.tensor([0.1, -0.3, 0.7]))
    X, _ = data(5, (1, 8, 8), 2)
    path = channel_path(model, "conv", "fc", "permute")
    assert path.permuted == ("prelu",) and path.spread == 16
    for new in (layer_rescale(model, ("conv", "fc"), 4.0), neuron_rescale(model, ("conv", "fc"), [2.0, 0.5, 9.0]),
                permute_neurons(model, ("conv", "fc"), [1, 2, 0])):
        assert _relative_gap(model, new, X) <= 1e-13
    assert torch.equal(permute_neurons(model, ("conv", "fc"), [1, 2, 0]).prelu.weight, model.prelu.weight[[1, 2, 0]])
    with pytest.raises(InvalidInputError, match="training=True"):
        layer_rescale(model.train(), ("conv", "fc"), 4.0)


def test_shared_and_grouped_layers_are_refused_for_what_they_break():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
            self.fc3.weight = self.fc1.weight

        def forward(self, x):
            return self.fc3(self.fc2(torch.relu(self.fc1(x))))

    with pytest.raises(InvalidInputError, match="shares a parameter"):
        layer_rescale(Tied(), ("fc1", "fc2"), 2.0)

    class Positive(nn.Module):
        def forward(self, w):
            return w.abs()

    model = Stack(nn.ReLU())
    torch.nn.utils.parametrize.register_parametrization(model.fc1, "weight", Positive())
    with pytest.raises(InvalidInputError, match="parametrization"):
        layer_rescale(model, ("fc1", "fc2"), 2.0)  # its weight is computed: writing to it would do nothing

    class Grouped(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv1d(2, 4, 3), nn.Conv1d(4, 4, 3, groups=2)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    torch.manual_seed(0)
    model = Grouped().double()
    X, _ = data(4, (2, 9), 2)
    assert _relative_gap(model, layer_rescale(model, ("a", "b"), 3.0), X) <= 1e-13
    with pytest.raises(InvalidInputError, match="grouped"):
        permute_neurons(model, ("a", "b"), [1, 0, 3, 2])
