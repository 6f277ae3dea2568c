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


def test_sweep_options_make_conv_diagonals_exact_and_permutation_invariant():
    """A Conv kernel above ``max_dense`` got Hutchinson (probes tied to indices): trace moved under a
    permutation. ``sweep_options`` covers it; reference: the diagonal of ``torch.func.hessian``."""
    import torch
    from torch import nn

    from coupled_curvature.commands.explore import sweep_options
    from coupled_curvature.numeric import measures as M
    from coupled_curvature.numeric.symmetries import permute_neurons

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Conv2d(2, 4, 3), nn.ReLU(),
                        nn.Flatten(), nn.Linear(4 * 2 * 2, 3)).to(torch.float64).eval()
    X, y = torch.randn(12, 1, 4, 4, dtype=torch.float64), torch.randint(0, 3, (12,))
    loss_fn = nn.CrossEntropyLoss()
    base = {"trace": {"probes": 2, "max_dense": 16}, "norm_flat": {"probes": 2, "max_dense": 16}}
    opts = sweep_options(net, base)
    assert opts["trace"]["max_dense"] == 72 and opts["trace"]["probes"] == 2  # the 2·4·3·3 kernel

    params = {k: v.detach() for k, v in net.named_parameters()}
    ref = 0.0
    for name, p in params.items():
        def f(t, name=name):
            return loss_fn(torch.func.functional_call(net, {**params, name: t}, (X,)), y)
        ref += float(torch.diagonal(torch.func.hessian(f)(p).reshape(p.numel(), p.numel())).sum())
    got = M.hessian_trace(net, loss_fn, (X, y), **opts["trace"])
    assert got["method"] == "exact" and abs(got["value"] - ref) <= 1e-10 * abs(ref)
    old = M.hessian_trace(net, loss_fn, (X, y), **base["trace"])  # negative control: the estimate
    assert abs(old["value"] - ref) > 1e-6 * abs(ref)

    perm = permute_neurons(net, 1, torch.tensor([2, 0, 3, 1]))
    for m in ("trace", "norm_flat"):
        a = M.REGISTRY[m].func(net, loss_fn, (X, y), **opts[m])["value"]
        b = M.REGISTRY[m].func(perm, loss_fn, (X, y), **opts[m])["value"]
        assert abs(a - b) <= 1e-12 * abs(a)
