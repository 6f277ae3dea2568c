"""``ccurv experiment transformers``: the study on a tiny model, its tables and figure, and the skip of a kind
that needs the absent transformers package."""

from __future__ import annotations

import json

from coupled_curvature.cli import main
from coupled_curvature.numeric.studies import transformer_study as TS
from coupled_curvature.reporting import transformers_page as P


_STUDY = TS.transformer_study


def _small(kinds=("mha",), **kw):
    return _STUDY(kinds, steps=3, quick=True, measures=["top_eig", "D[head]", "D[gauge]"])


def test_cli_writes_json_markdown_and_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(TS, "transformer_study", _small)
    assert main(["experiment", "transformers", "--quick", "--out", str(tmp_path / "r")]) == 0
    data = json.loads((tmp_path / "r" / "transformers.json").read_text())
    cells = {(c["measure"], c["symmetry"]): c for c in data["models"][0]["cells"]}
    assert all(c["agrees"] for c in cells.values())
    assert cells["D[gauge]", "vo"]["deviation"] <= 1e-9 and cells["D[head]", "vo"]["deviation"] >= 1e-3
    assert cells["top_eig", "qk_general"]["deviation"] >= 1e-6  # raw sharpness moves under the same map
    assert (tmp_path / "r" / "transformers.png").stat().st_size > 0
    assert "| D[gauge] |" in (tmp_path / "r" / "transformers.md").read_text()
    assert "D[head]" in capsys.readouterr().out


def test_a_disagreement_is_marked_and_a_missing_package_skips(monkeypatch):
    data = _STUDY(["mha"], steps=1, quick=True, measures=["D"])
    cell = data["models"][0]["cells"][0]
    cell["agrees"], cell["witness"] = False, "witness text"
    assert "*" in P.terminal_text(data, 100) and "witness text" in P.render_markdown(data)
    monkeypatch.setattr(TS.importlib.util, "find_spec", lambda name: None)
    skipped = TS.transformer_study(["gpt2-tiny"], steps=1, quick=True, measures=["D"])
    assert "transformers is not installed" in skipped["models"][0]["skipped"]
    assert "skipped" in P.terminal_text(skipped) and P.figure(skipped) is not None
