"""The tangent route of diagnose's ``wᵀH_bbw`` (numeric/factors/tangent_forms.py, affinity.py,
cotangents.py) against the Hessian-vector-product route and brute-force Hessians, on MLPs, CNNs,
BatchNorm and residual nets, with the cases it must refuse and negative controls for both checks."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute
from coupled_curvature.numeric.factors import tangent_forms as tf_module
from coupled_curvature.numeric.factors.affinity import affine_outputs
from coupled_curvature.numeric.factors.tangent_forms import module_block, tangent_forms
from coupled_curvature.numeric.models.factory import randomize_batchnorm
from tests.numeric._nets import cnn, data, mlp, reference_block, rel

CE, MSE = nn.CrossEntropyLoss(), nn.MSELoss()


@pytest.fixture
def hvp_route():
    def run(*args, **kwargs):
        return diagnose(*args, routes={WHwRoute.HVP, *SpectralRoute}, **kwargs)
    return run


def _same(fast, slow, tol=1e-10):
    assert abs(fast.meta["loss"] - slow.meta["loss"]) <= 1e-12 * abs(slow.meta["loss"])
    for b in slow:
        f = fast[b.name]
        assert abs(f.wHw - b.wHw) <= tol * max(abs(b.wHw), 1e-300) + 1e-15, (b.name, f.wHw, b.wHw)
        assert abs(f.g_sq - b.g_sq) <= 1e-12 * max(b.g_sq, 1e-300) + 1e-30
        assert abs(f.w_dot_g - b.w_dot_g) <= 1e-12 * max(abs(b.w_dot_g), 1e-300) + 1e-30


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    widths=st.lists(st.integers(1, 6), min_size=0, max_size=3),
    out=st.integers(1, 4),
    n=st.integers(1, 9),
    split=st.booleans(),
    bias=st.booleans(),
    act=st.sampled_from(["relu", "leaky"]),
    loss=st.sampled_from(["ce", "mse"]),
    blocks=st.sampled_from(["tensor", "layer"]),
    seed=st.integers(0, 10**6),
)
def test_matches_the_hvp_route_on_random_mlps(hvp_route, widths, out, n, split, bias, act, loss, blocks, seed):
    if loss == "ce":
        out = max(out, 2)
        X, y = data(n, (4,), out, seed=seed)
        loss_fn = CE
    else:
        X, _ = data(n, (4,), 2, seed=seed)
        y = torch.randn(n, out, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        loss_fn = MSE
    net = mlp([4, *widths, out], bias=bias, act=act, seed=seed % 997)
    batches = [(X[:1], y[:1]), (X[1:], y[1:])] if split and n > 1 else (X, y)
    fast = diagnose(net, loss_fn, batches, inverse=False, blocks=blocks)
    slow = hvp_route(net, loss_fn, batches, inverse=False, blocks=blocks)
    assert fast.meta["wHw_route"] == "tangent" and slow.meta["wHw_route"] == "hvp"
    assert all(b.wHw_route == "tangent" for b in fast) and all(b.wHw_route == "hvp" for b in slow)
    _same(fast, slow)


class Residual(nn.Module):
    """A residual CNN as a plain nn.Module: conv-BN-ReLU stem, a BasicBlock with a 1x1 shortcut, pooling."""

    def __init__(self, classes=3, groups=1):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, groups=groups)
        self.bn2 = nn.BatchNorm2d(4)
        self.short = nn.Sequential(nn.Conv2d(1, 4, 1, bias=False), nn.BatchNorm2d(4))
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)) + self.short(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.max_pool2d(h, 2), 1), 1))


class Seq1d(nn.Module):
    """Conv1d over a sequence, a LayerNorm on the features at the end, then a Linear head."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.head = nn.Conv1d(3, 4, 3, padding=1), nn.LayerNorm(4), nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.norm(F.leaky_relu(self.conv(x), 0.2).mean(dim=2)))


def _residual(groups=1):
    return randomize_batchnorm(Residual(groups=groups).double()).eval()


@pytest.mark.parametrize("name", ["cnn", "residual", "grouped", "seq1d"])
def test_matches_the_hvp_route_and_brute_force_on_other_architectures(hvp_route, name):
    if name == "cnn":
        net, (X, y) = cnn(seed=3), data(7, (1, 8, 8), 3)
    elif name in ("residual", "grouped"):
        net, (X, y) = _residual(groups=2 if name == "grouped" else 1), data(6, (1, 8, 8), 3)
    else:
        torch.manual_seed(0)
        net, (X, y) = Seq1d().double(), data(6, (3, 5), 3)
    fast = diagnose(net, CE, (X, y), inverse=False)
    slow = hvp_route(net, CE, (X, y), inverse=False)
    _same(fast, slow)
    routes = {b.name: b.wHw_route for b in fast}
    if name == "seq1d":  # the LayerNorm normalises conv's output: conv refused, the norm and head taken
        assert routes == {"conv.weight": "hvp", "conv.bias": "hvp", "norm.weight": "tangent", "norm.bias": "tangent",
                          "head.weight": "tangent", "head.bias": "tangent"}
        assert fast.meta["wHw_route"] == "mixed"
        assert "NativeLayerNorm" in fast.meta["tangent_refused"]["conv.weight"]
    else:
        assert set(routes.values()) == {"tangent"}
    for b in list(fast)[:3] + list(fast)[-2:]:
        ref = reference_block(net, CE, X, y, [b.name])
        assert rel(b.wHw, ref["wHw"]) < 1e-10


class TwoUses(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.a, self.b = nn.Linear(3, 4), nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.how == "module twice":
            return self.b(h) + self.b(h)
        if self.how == "weight reused":
            return self.b(h) + F.linear(h, self.b.weight)
        if self.how == "batch coupling":
            return self.b(h - h.mean(dim=0))  # linear, but each sample's output reads the others
        if self.how == "attention-like":
            return self.b(h * h.sum(dim=1, keepdim=True))  # a product of two activations
        raise AssertionError(self.how)


@pytest.mark.parametrize("how, refused, reason", [
    ("module twice", {"b.weight", "b.bias"}, "runs more than once"),
    ("weight reused", {"b.weight"}, "used by more than one operation"),
    ("batch coupling", {"a.weight", "a.bias"}, "samples interact"),
    ("attention-like", {"a.weight", "a.bias"}, "Mul operation multiplies two factors"),
])
def test_refuses_what_breaks_the_identity_and_falls_back_exactly(hvp_route, how, refused, reason):
    torch.manual_seed(0)
    net = TwoUses(how).double()
    X, y = data(5, (3,), 2)
    fast = diagnose(net, CE, (X, y), inverse=False)
    slow = hvp_route(net, CE, (X, y), inverse=False)
    _same(fast, slow, tol=1e-12)  # the refused blocks come from Hessian-vector products
    assert {b.name for b in fast if b.wHw_route == "hvp"} == refused
    assert all(reason in fast.meta["tangent_refused"][b] for b in refused)


def test_train_mode_batchnorm_and_subclasses_are_refused():
    net = _residual().train()
    X, y = data(6, (1, 8, 8), 3)
    ob = Objective(net, CE, prepare_batches((X, y), CE))
    res = tangent_forms(ob, {"fc.weight": ["fc.weight"]})
    assert "train mode" in res.reasons["fc.weight"] and not res.wHw
    d = diagnose(net, CE, (X, y), inverse=False, allow_train_mode=True)  # every block refused: still said why
    assert d.meta["wHw_route"] == "hvp" and set(d.meta["tangent_refused"]) == set(d.names())
    assert all("train mode" in r for r in d.meta["tangent_refused"].values())

    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) ** 1  # a subclass may change forward: never trusted
    assert module_block(nn.Sequential(MyLinear(2, 2)), ["0.weight"]) is None
    assert module_block(nn.Sequential(nn.Linear(2, 2)), ["0.weight"]) == ("0", ("weight",))


def test_affinity_of_eval_and_train_batchnorm_and_of_quotients():
    x = torch.randn(4, 3, dtype=torch.float64)
    s = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    z = x + s
    bn = nn.BatchNorm1d(3).double()
    assert affine_outputs(bn.eval()(z).grad_fn, {"z": z.grad_fn}) == {"z": None}
    assert "NativeBatchNorm" in affine_outputs(bn.train()(z).grad_fn, {"z": z.grad_fn})["z"]
    assert affine_outputs((z / 3.0).grad_fn, {"z": z.grad_fn}) == {"z": None}
    assert "divides" in affine_outputs((x / (1 + z * z.detach())).grad_fn, {"z": z.grad_fn})["z"]
    assert "Softmax" in affine_outputs(torch.softmax(z, 1).grad_fn, {"z": z.grad_fn})["z"]


def test_negative_controls_each_check_matters(monkeypatch):
    """With the affinity check forced to pass on a Tanh net, or the sample-independence check
    disabled on a batch-coupling net, the route's value is wrong: both checks are needed."""
    X, y = data(6, (3,), 2)
    net = mlp([3, 4, 2], act="tanh", seed=1)
    ob = Objective(net, CE, prepare_batches((X, y), CE))
    assert "Tanh" in tangent_forms(ob, {"0.weight": ["0.weight"]}).reasons["0.weight"]
    monkeypatch.setattr(tf_module, "affine_outputs", lambda root, marks: dict.fromkeys(marks))
    forced = tangent_forms(ob, {"0.weight": ["0.weight"]}).wHw["0.weight"]
    assert rel(forced, reference_block(net, CE, X, y, ["0.weight"])["wHw"]) > 1e-3
    monkeypatch.undo()

    torch.manual_seed(0)
    coupled = TwoUses("batch coupling").double()
    ob = Objective(coupled, CE, prepare_batches((X[:, :3], y), CE))
    assert "samples interact" in tangent_forms(ob, {"a.weight": ["a.weight"]}).reasons["a.weight"]
    monkeypatch.setattr(tf_module, "_INDEPENDENCE_RTOL", float("inf"))
    forced = tangent_forms(ob, {"a.weight": ["a.weight"]}).wHw["a.weight"]
    assert rel(forced, reference_block(coupled, CE, X[:, :3], y, ["a.weight"])["wHw"]) > 1e-3


def test_d_is_invariant_and_a_neuron_scaling_moves_it_on_the_tangent_route():
    """The headline check, on the route's own numbers: layer rescaling keeps D to 1e-10 while RQ moves;
    scaling one hidden unit of the first layer (uncompensated) moves D."""
    from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale

    net, (X, y) = mlp([4, 6, 5, 3], seed=4), data(9, (4,), 3)
    before = diagnose(net, CE, (X, y), inverse=False)
    after = diagnose(layer_rescale(net, 0, 3.5), CE, (X, y), inverse=False)
    assert before.meta["wHw_route"] == after.meta["wHw_route"] == "tangent"
    for b in before:
        assert rel(after[b.name].coupled, b.coupled) <= 1e-10
    assert rel(after["0.weight"].rayleigh, before["0.weight"].rayleigh) > 0.5
    moved = mlp([4, 6, 5, 3], seed=4)
    with torch.no_grad():
        moved[0].weight[0] *= 3.0
    assert rel(diagnose(moved, CE, (X, y), inverse=False)["0.weight"].coupled, before["0.weight"].coupled) > 1e-3


def test_every_block_of_a_resnet18_takes_the_route_and_keeps_D_under_branch_internal_maps(hvp_route):
    """The ResNet-18 layout (62 blocks, eval BatchNorm, residual sums): all blocks on the tangent route,
    equal to the Hessian-vector-product route, and D of every block kept by each function-preserving
    map of test_resnet_invariance while a compensated non-uniform neuron scaling moves D."""
    from coupled_curvature.numeric.symmetries.homogeneous import neuron_rescale
    from tests.numeric.test_resnet_invariance import LOSS, MAPS, X, Y, resnet18

    net = resnet18()
    d0 = diagnose(net, LOSS, (X, Y), inverse=False)
    assert len(d0) == 62 and d0.meta["wHw_route"] == "tangent"
    _same(d0, hvp_route(net, LOSS, (X, Y), inverse=False))
    for name, (apply, _) in MAPS.items():
        d1 = diagnose(apply(net), LOSS, (X, Y), inverse=False)
        assert d1.meta["wHw_route"] == "tangent", name
        assert max(rel(d1[b.name].coupled, b.coupled) for b in d0) <= 1e-10, name
    a = torch.linspace(0.3, 3.0, net.get_submodule("layer2.1.bn1").weight.shape[0]).tolist()
    moved = diagnose(neuron_rescale(net, ("layer2.1.bn1", "layer2.1.conv2"), a), LOSS, (X, Y), inverse=False)
    assert rel(moved["layer2.1.conv2.weight"].coupled, d0["layer2.1.conv2.weight"].coupled) > 1e-3


class RandomConvNet(nn.Module):
    """A random conv net drawn by Hypothesis: conv(-BN)-act blocks, optional residual sums, max or
    average pooling, a Linear head; every block lies in one module and the net is piecewise linear."""

    def __init__(self, widths, bn, residual, pool, act, bias):
        super().__init__()
        self.convs, self.bns, self.residual, self.pool, self.act = nn.ModuleList(), nn.ModuleList(), residual, pool, act
        c = 1
        for w in widths:
            self.convs.append(nn.Conv2d(c, w, 3, padding=1, bias=bias))
            self.bns.append(nn.BatchNorm2d(w) if bn else nn.Identity())
            c = w
        self.head = nn.Linear(c * 4, 3, bias=bias)

    def forward(self, x):
        for conv, bn in zip(self.convs, self.bns):
            h = bn(conv(x))
            h = h + x if self.residual and h.shape == x.shape else h
            x = F.relu(h) if self.act == "relu" else F.leaky_relu(h, 0.1)
        x = F.max_pool2d(x, 2) if self.pool == "max" else F.avg_pool2d(x, 2)
        return self.head(torch.flatten(x, 1))


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    widths=st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3),
    bn=st.booleans(), residual=st.booleans(), pool=st.sampled_from(["max", "avg"]),
    act=st.sampled_from(["relu", "leaky"]), bias=st.booleans(), n=st.integers(1, 5), seed=st.integers(0, 10**6),
)
def test_matches_the_hvp_route_on_random_conv_nets(hvp_route, widths, bn, residual, pool, act, bias, n, seed):
    torch.manual_seed(seed % 997)
    net = randomize_batchnorm(RandomConvNet(widths, bn, residual, pool, act, bias).double(), seed=seed % 13).eval()
    X, y = data(n, (1, 4, 4), 3, seed=seed)
    fast = diagnose(net, CE, (X, y), inverse=False)
    assert fast.meta["wHw_route"] == "tangent", fast.meta.get("tangent_refused")
    _same(fast, hvp_route(net, CE, (X, y), inverse=False))


class OtherModules(nn.Module):
    """An Embedding, a transposed convolution and a GroupNorm (whose own weight and bias the route
    takes; the layers below it it must refuse: the normalisation divides by their statistics)."""

    def __init__(self, norm=True):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.up = nn.ConvTranspose2d(1, 2, 2, stride=2)
        self.norm = nn.GroupNorm(1, 2) if norm else nn.Identity()
        self.head = nn.Linear(4 + 2 * 16, 3)

    def forward(self, x):
        tokens, image = x[:, :3].long(), x[:, 3:].reshape(-1, 1, 2, 2)
        e = self.emb(tokens).mean(dim=1)
        g = torch.relu(self.norm(self.up(image)))
        return self.head(torch.cat([e, torch.flatten(g, 1)], dim=1))


@pytest.mark.parametrize("norm", [True, False])
def test_embedding_transposed_conv_and_group_norm(hvp_route, norm):
    torch.manual_seed(0)
    net = OtherModules(norm).double()
    g = torch.Generator().manual_seed(4)
    X = torch.cat([torch.randint(0, 7, (6, 3), generator=g).double(), torch.randn(6, 4, generator=g, dtype=torch.float64)], 1)
    y = torch.randint(0, 3, (6,), generator=g)
    fast = diagnose(net, CE, (X, y), inverse=False)
    _same(fast, hvp_route(net, CE, (X, y), inverse=False))
    routes = {b.name: b.wHw_route for b in fast}
    if norm:
        assert routes == {"emb.weight": "tangent", "up.weight": "hvp", "up.bias": "hvp", "norm.weight": "tangent",
                          "norm.bias": "tangent", "head.weight": "tangent", "head.bias": "tangent"}
        assert "NativeGroupNorm" in fast.meta["tangent_refused"]["up.weight"]
    else:  # the transposed convolution's own blocks, with only ReLU between it and the head
        assert set(routes.values()) == {"tangent"}
        assert rel(fast["up.weight"].wHw, reference_block(net, CE, X, y, ["up.weight"])["wHw"]) < 1e-10
    ref = reference_block(net, CE, X, y, ["emb.weight"])
    assert rel(fast["emb.weight"].wHw, ref["wHw"]) < 1e-10


def test_cotangent_rows_in_chunks_and_one_by_one_equal_the_single_batched_pass(monkeypatch):
    """The rows go through autograd together (is_grads_batched); chunked by the byte budget, and one
    backward pass per row where autograd cannot batch, they give the same cotangents (to rounding: a
    batched product may sum in another order)."""
    from coupled_curvature.numeric.factors import cotangents

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(12, 4)).double()
    randomize_batchnorm(net).eval()
    X, y = torch.randn(5, 2, 4, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 0])
    ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    cot = torch.randn(5, 7, 4, dtype=torch.float64)
    paths = ["0", "1", "5"]

    def run(**kw):
        fw = cotangents.shifted_forward(ob, 0, paths)
        got = {p: torch.zeros(7, *fw.shifts[p].shape, dtype=torch.float64) for p in paths}
        seen = []
        for rows, g in cotangents.cotangent_rows(fw, paths, cot, **kw):
            seen.append((rows.start, rows.stop))
            for p in paths:
                got[p][rows] = g[p]
        return got, seen

    whole, seen = run()
    assert seen == [(0, 7)]
    per_row = 8 * (5 * 3 * 4 * 4 + 5 * 3 * 4 * 4 + 5 * 4)  # float64 bytes of the three shifted outputs, one row
    chunked, seen = run(max_bytes=3 * per_row)
    assert seen == [(0, 3), (3, 6), (6, 7)]
    real_grad = torch.autograd.grad

    def unbatchable(*a, **k):
        if k.get("is_grads_batched"):
            raise RuntimeError("Batching rule not implemented")
        return real_grad(*a, **k)

    monkeypatch.setattr(torch.autograd, "grad", unbatchable)
    single, _ = run()
    for p in paths:
        assert torch.allclose(whole[p], chunked[p], rtol=1e-13, atol=1e-15)
        assert torch.allclose(whole[p], single[p], rtol=1e-13, atol=1e-15)
    # against the definition: row j is the gradient of Σ_n cot[n, j]ᵀf_n with respect to the shift
    fw = cotangents.shifted_forward(ob, 0, paths)
    (ref,) = real_grad((fw.out * cot[:, 4]).sum(), [fw.shifts["1"]])
    assert torch.allclose(whole["1"][4], ref, rtol=1e-13, atol=1e-15)
    assert not torch.allclose(whole["1"][4], whole["1"][3])  # negative control: rows differ
