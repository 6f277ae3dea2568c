"""``ccurv experiment training --quick`` end to end: the files, their schema, the verdicts, the terminal width,
the cache on a rerun, and bad input refused before any training."""

from __future__ import annotations

import json

import pytest

from coupled_curvature.cli import main

FILES = ("training.json", "training.md", "training.html", "training_scale.png", "training_scale.svg",
         "training_epochs.png", "training_epochs.svg")


def test_quick_run_writes_the_pages_and_a_rerun_comes_from_the_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(["experiment", "training", "--quick", "--out", str(out), "--cache", str(cache), "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= 100
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "training.json").read_text())
    arms = ["baseline", "CRR 0.001", "CRR 0.01", "SAM ρ=0.05", "ASAM ρ=0.5"]
    assert len(data["rows"]) == 2 * len(arms) * 3
    assert [t["arm"] for t in data["table"]][: len(arms)] == arms
    claims = {(v["claim"], v["condition"]) for v in data["verdicts"]}
    assert len(claims) == 6 and all(v["seeds"] == 3 and "indicative only" in v["evidence"] for v in data["verdicts"])
    assert all(v["kind"] == "indicative" and v["verdict"].startswith("indicative: ") and "3 seeds < 10" in v["verdict"]
               for v in data["verdicts"])
    verdict_lines = [line for line in printed.splitlines() if any(f"{c} (" in line for c, _ in claims)]
    assert verdict_lines and all("indicative" in line for line in verdict_lines)
    html = (out / "training.html").read_text()
    assert "class='proved'" not in html  # a bootstrap over 3 seeds is never styled as proved
    assert "data-figure='training_scale'" in html and "data-figure='training_epochs'" in html and "<img" not in html
    md = (out / "training.md").read_text()
    assert "piecewise linear" in md and "## Verdicts" in md  # what λ means on the ReLU CNN is said
    assert main(["experiment", "training", "--quick", "--out", str(tmp_path / "again"), "--cache", str(cache)]) == 0
    again = json.loads((tmp_path / "again" / "training.json").read_text())
    assert all(r["cached"] for r in again["rows"])
    strip = ("train_seconds", "measure_seconds", "cached")
    assert [{k: v for k, v in r.items() if k not in strip} for r in again["rows"]] == \
        [{k: v for k, v in r.items() if k not in strip} for r in data["rows"]]


@pytest.mark.parametrize("extra", [["--seeds", "0"], ["--seed", "-1"]])
def test_bad_arguments_are_refused_before_work(tmp_path, capsys, extra):
    code = main(["experiment", "training", "--quick", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c"),
                 *extra])
    assert code != 0
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()
