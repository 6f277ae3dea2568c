"""``ccurv explore`` with the layer symmetry draws a net and its rescaled twin over the radius sweep: the data
behind the figure (raw curves shift, adaptive curves coincide), in the JSON, the notes and the figures."""

from __future__ import annotations

import json

from coupled_curvature.cli import main


def test_layer_symmetry_adds_the_radius_sweep_of_the_twin(tmp_path, capsys):
    out, js = tmp_path / "out", tmp_path / "m.json"
    argv = ["explore", "--arch", "mlp:8x2", "--dataset", "wine", "--epochs", "5", "--samples", "40", "--quick",
            "--measures", "sam,adaptive_worst", "--symmetries", "layer", "--out", str(out), "--json", str(js)]
    assert main(argv) == 0
    assert "radius sweep" in capsys.readouterr().out
    t = json.loads(js.read_text())["sharpness_twin"]
    assert t["function_gap"] < 1e-12 and t["c"] == 4.0 and len(t["radii"]) == 3
    assert t["raw_gap"] > 0.05 and t["adaptive_gap"] < 1e-12  # c = 4: the twin's weights are exact
    assert t["raw_net"] != t["raw_twin"] and t["adaptive_net"] == t["adaptive_twin"]
    for name in ("figures/sharpness_twin.png", "figures/sharpness_twin.svg"):
        assert (out / name).stat().st_size > 0


def test_without_the_layer_symmetry_there_is_no_sweep(tmp_path):
    js = tmp_path / "m.json"
    argv = ["explore", "--arch", "mlp:8x2", "--dataset", "wine", "--epochs", "2", "--samples", "20", "--quick",
            "--measures", "sam", "--symmetries", "perm", "--json", str(js)]
    assert main(argv) == 0
    assert "sharpness_twin" not in json.loads(js.read_text())
