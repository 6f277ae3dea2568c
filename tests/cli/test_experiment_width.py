"""``ccurv experiment width``: a reduced --quick end to end (files, schema, honesty statements, cache on
rerun), bad input, and the real --quick run (slow)."""

from __future__ import annotations

import json
import time

import pytest

from coupled_curvature.cli import main
from coupled_curvature.numeric.studies.width import MEASURES, quick_config, reported_measures, strip_timing

REPORTED = list(reported_measures(quick_config()))

TINY_ARGS = ["--quick", "--widths", "4,8", "--depths", "1,2", "--seeds", "2", "--max-epochs", "6", "--samples", "40"]
RUN_KEYS = {"depth", "width", "seed", "params", "epochs", "reached_target", "train_loss", "test_loss", "train_err",
            "test_err", "gap_loss", "gap_err", "blocks", "Dplus_blocks", *MEASURES}
KENDALL_KEYS = {"measure", "gap", "tau", "ci_low", "ci_high", "depth", "n", "seeds"}


def _check_report(out, n_nets: int, depths: set) -> dict:
    for name in ("width.json", "width.md", "width.html", "width_gap_loss.png", "width_gap_err.png"):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "width.json").read_text())
    assert len(data["runs"]) == n_nets and all(RUN_KEYS <= set(r) for r in data["runs"])
    assert all(KENDALL_KEYS <= set(e) for e in data["kendall"])
    scopes = {e["depth"] for e in data["kendall"]}
    assert scopes == {None} | depths
    assert {(e["measure"], e["gap"]) for e in data["kendall"]} == {(m, g) for m in REPORTED
                                                                  for g in ("gap_loss", "gap_err")}
    md = (out / "width.md").read_text()
    assert "Exploratory" in md and "no generalization bound is claimed" in md
    result = md.split("## Result, one sentence per measure")[1].split("##")[0]
    bullets = [line for line in result.splitlines() if line.startswith("- ")]
    assert len(bullets) == len(REPORTED) and all(f"(`{m}`)" in b for m, b in zip(REPORTED, bullets))
    html = (out / "width.html").read_text()
    assert "<strong>Exploratory.</strong>" in html and "data-figure='width_gap_loss'" in html
    assert "<img" not in html  # the figures are inlined: width.html alone is complete
    return data


def test_tiny_quick_end_to_end_then_rerun_from_the_cache(tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["experiment", "width", *TINY_ARGS, "--out", str(out), "--cache", str(cache)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "[8/8]" in captured.err and "exploratory" in captured.err  # progress on stderr
    assert "tau" in captured.out and "95% CI" in captured.out  # the τ table on stdout
    data = _check_report(out, 8, {1, 2})
    assert data["config"]["widths"] == [4, 8] and data["config"]["seeds"] == [0, 1]
    assert "overridden on the command line" in data["config"]["note"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing half-written left

    assert main(argv) == 0  # rerun: nothing trained or measured, the same table
    again = json.loads((out / "width.json").read_text())
    assert all(r["cached_model"] and r["cached_measure"] for r in again["runs"])
    assert strip_timing(again["runs"]) == strip_timing(data["runs"])
    assert again["kendall"] == data["kendall"]


def _synthetic(n_seeds: int) -> dict:
    """A report payload without training: a planted copy of the gap and an unrelated measure."""
    import numpy as np

    from coupled_curvature.numeric.studies.width import GAPS, kendall_table, quick_config

    rng = np.random.default_rng(1)
    runs = []
    for seed in range(n_seeds):
        for depth in (1, 3):
            for width in (8, 32, 128):
                gap = float(rng.normal())
                runs.append({"seed": seed, "depth": depth, "width": width, "gap_loss": gap, "gap_err": gap / 2,
                             "copy": gap, "noise": float(rng.normal())})
    measures = {"copy": "planted copy of the gap", "noise": "unrelated <noise> & co"}
    cfg = {**quick_config().__dict__, "seeds": list(range(n_seeds))}
    return {"runs": runs, "kendall": kendall_table(runs, list(measures), n_boot=300), "measures": measures,
            "gaps": dict(GAPS), "config": cfg, "criterion": "synthetic", "aggregation": "synthetic",
            "seconds": 0.0}


def test_sentences_state_the_result_and_refuse_to_overclaim_with_few_seeds():
    from coupled_curvature.reporting import width_page as R

    data = _synthetic(30)
    many = R.sentences(data)
    assert len(many) == 2
    assert "τ = +1.00 [+1.00, +1.00] with the loss gap" in many[0] and "positive, the interval excludes 0" in many[0]
    for g, words in (("gap_loss", "the loss gap"), ("gap_err", "the error gap")):
        e = next(e for e in data["kendall"] if e["measure"] == "noise" and e["gap"] == g and e["depth"] is None)
        clause = many[1].split(f"with {words}")[1].split(")")[0]
        expected = ("positive" if e["ci_low"] > 0 else "negative" if e["ci_high"] < 0
                    else "not distinguishable from 0")
        assert expected in clause, (clause, e)
    few = R.sentences(_synthetic(2))
    assert all("only 2 seeds: not evidence either way" in s and "excludes" not in s for s in few)
    html = R.render_html(_synthetic(2))
    assert "&lt;noise&gt; &amp; co" in html and "<noise>" not in html  # escaped
    assert "With only 2 seeds every interval here is crude" in R.render_markdown(_synthetic(2))


@pytest.mark.parametrize("extra,message", [
    (["--measures", "D_mean,sharpness"], "unknown measure.*sharpness.*available"),
    (["--widths", "0,8"], "widths"),
    (["--widths", "eight"], "comma-separated"),
    (["--depths", "1,1"], "repeated"),
    (["--seeds", "0"], "--seeds"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys, extra, message):
    argv = ["experiment", "width", "--quick", *extra, "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ccurv: error:" in err
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "o").exists()


def test_refuses_a_foreign_folder(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("x")
    argv = ["experiment", "width", *TINY_ARGS, "--out", str(tmp_path), "--cache", str(tmp_path / "c")]
    assert main(argv) == 2
    assert "not a ccurv report" in capsys.readouterr().err


def test_invariance_subcommand_still_registered(capsys):
    with pytest.raises(SystemExit):
        main(["experiment", "--help"])
    text = capsys.readouterr().out
    assert "invariance" in text and "width" in text


@pytest.mark.slow
def test_real_quick_run_within_three_minutes(tmp_path, capsys):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main(["experiment", "width", "--quick", "--out", str(out), "--cache", str(tmp_path / "cache")]) == 0
    seconds = time.perf_counter() - t0
    data = _check_report(out, 12, {1, 3})
    assert sorted({r["width"] for r in data["runs"]}) == [8, 32, 128]
    assert all(r["Dplus_blocks"].split("/")[0] == r["Dplus_blocks"].split("/")[1] for r in data["runs"])
    assert seconds < 180, f"--quick took {seconds:.0f} s (budget 180 s on a quiet 2-core machine)"
