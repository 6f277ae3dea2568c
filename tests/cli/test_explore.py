"""``ccurv explore``: bad input exits 2 with the list of what is available; a tiny run writes every output."""

from __future__ import annotations

import json

import pytest

from coupled_curvature.cli import main


@pytest.mark.parametrize("argv,expect", [
    (["--measures", "top_eig,bogus"], "available: all, top_eig"),
    (["--symmetries", "layer,twist"], "available: all, layer"),
    (["--arch", "cnn", "--symmetries", "bn"], "applicable: layer"),
    (["--arch", "mlp:8x2", "--symmetries", "orthogonal"], "deep linear"),
    (["--arch", "resnet:3"], "available: mlp:64x3"),
])
def test_bad_input_exits_2_listing_choices(argv, expect, capsys):
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccurv: error:") and expect in err


def test_tiny_run_writes_all_outputs(tmp_path, capsys):
    out, js = tmp_path / "out", tmp_path / "m.json"
    argv = ["explore", "--arch", "linear:4x2", "--dataset", "wine", "--epochs", "2", "--samples", "40", "--quick",
            "--measures", "D,rho,fisher_rao", "--symmetries", "orthogonal,gl", "--out", str(out), "--json", str(js)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.index("DISAGREEMENTS") < printed.index("Invariance matrix")
    data = json.loads(js.read_text())
    assert set(data) >= {"cells", "seconds"} and len(data["cells"]) == 6
    for c in data["cells"]:
        assert {"measure", "symmetry", "deviation", "predicted", "agrees"} <= set(c)
        assert c["agrees"], c
    for name in ("matrix.md", "matrix.html", "matrix.json", "matrix.txt", "figures/orthogonal.png", "figures/gl.png"):
        assert (out / name).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left behind


def test_conv_diagonals_are_exact_and_permutation_invariant():
    """Conv kernels get an exact diagonal from verified per-sample Gauss–Newton factors at any size,
    so ``sweep_options`` leaves them alone (it raises ``max_dense`` only for other tensors); where the
    factorization is rejected (Tanh, negative control) a kernel above ``max_dense`` gets Hutchinson
    (probes tied to indices), which moves under a permutation, and a dense block does not.
    Reference: the diagonal of ``torch.func.hessian``."""
    import torch
    from torch import nn

    import copy

    from coupled_curvature.commands.explore import sweep_options
    from coupled_curvature.numeric.measures import registry as M
    from coupled_curvature.numeric.symmetries.homogeneous import function_gap

    X, y = torch.randn(12, 1, 4, 4, dtype=torch.float64), torch.randint(0, 3, (12,))
    loss_fn = nn.CrossEntropyLoss()
    base = {"trace": {"probes": 2, "max_dense": 16}, "norm_flat": {"probes": 2, "max_dense": 16}}

    def build(act):
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), act(), nn.Conv2d(2, 4, 3), act(),
                             nn.Flatten(), nn.Linear(4 * 2 * 2, 3)).to(torch.float64).eval()

    def reference(net):
        params = {k: v.detach() for k, v in net.named_parameters()}
        ref = 0.0
        for name, p in params.items():
            def f(t, name=name):
                return loss_fn(torch.func.functional_call(net, {**params, name: t}, (X,)), y)
            ref += float(torch.diagonal(torch.func.hessian(f)(p).reshape(p.numel(), p.numel())).sum())
        return ref

    def permute(net, p=torch.tensor([2, 0, 3, 1])):  # channels of the second conv (any elementwise act)
        new = copy.deepcopy(net)
        with torch.no_grad():
            new[2].weight.copy_(net[2].weight[p])
            new[2].bias.copy_(net[2].bias[p])
            new[5].weight.copy_(net[5].weight.reshape(3, 4, 4)[:, p].reshape(3, 16))
        assert function_gap(net, new, X) < 1e-12
        return new

    relu, tanh = build(nn.ReLU), build(nn.Tanh)
    assert sweep_options(relu, base)["trace"] == base["trace"]  # Linear and Conv2d tensors: factored
    with_bn = nn.Sequential(relu[0], nn.BatchNorm2d(2), *relu[1:])
    assert sweep_options(with_bn, {"trace": {"max_dense": 1}})["trace"]["max_dense"] == 2  # a BN scale: dense
    opts = {m: {**o, "max_dense": 72} for m, o in base.items()}  # covers the 2·4·3·3 kernel
    for net, options, exact in ((relu, base["trace"], True), (tanh, opts["trace"], True), (tanh, base["trace"], False)):
        got = M.hessian_trace(net, loss_fn, (X, y), **options)
        ref = reference(net)
        assert (got["method"] == "exact") == exact
        assert (abs(got["value"] - ref) <= 1e-10 * abs(ref)) == exact
    for net, options, invariant in ((relu, base, True), (tanh, opts, True), (tanh, base, False)):
        perm = permute(net)
        for m in ("trace", "norm_flat"):
            a = M.REGISTRY[m].func(net, loss_fn, (X, y), **options[m])["value"]
            b = M.REGISTRY[m].func(perm, loss_fn, (X, y), **options[m])["value"]
            assert (abs(a - b) <= 1e-12 * abs(a)) == invariant, (m, invariant)
