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
