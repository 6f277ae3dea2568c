"""The training experiment's parts: the moons data, ECE (against torchmetrics where installed), the seed
intervals, the verdicts on planted runs (each claim both ways), and a tiny run end to end (deterministic,
cached, the arms really differ)."""

from __future__ import annotations

import math
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.cache import ModelCache
from coupled_curvature.numeric.models.datasets import moons
from coupled_curvature.numeric.studies.calibration import expected_calibration_error
from coupled_curvature.numeric.studies.stats import mean_interval
from coupled_curvature.numeric.studies.training_run import Condition, TrainingConfig, check_config, quick_config, run_training
from coupled_curvature.numeric.studies.training_summary import EvidenceKind, arm_table, lambda_curves, verdicts

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------ data


def test_moons_flips_exactly_the_stated_fraction_of_training_labels_only():
    clean, noisy = moons(n_samples=1000, flip=0.0, seed=3), moons(n_samples=1000, flip=0.3, seed=3)
    assert torch.equal(clean.X_train, noisy.X_train) and torch.equal(clean.y_test, noisy.y_test)
    assert int((clean.y_train != noisy.y_train).sum()) == round(0.3 * len(clean.y_train))
    assert clean.X_train.shape == (700, 2) and clean.X_test.shape == (300, 2)
    assert torch.allclose(clean.X_train.mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("kw", [{"flip": 0.5}, {"flip": -0.1}, {"noise": float("nan")}, {"n_samples": 5},
                                {"test_fraction": 1.0}])
def test_moons_refuses_bad_input(kw):
    with pytest.raises(InvalidInputError):
        moons(**kw)


# ------------------------------------------------------------------ ECE


def test_ece_of_a_hand_worked_example():
    # confidences 0.95 (right), 0.65 (wrong), 0.65 (right): bins (0.9, 1] -> |1 − 0.95| = 0.05 over 1 point,
    # (0.6, 0.7] -> |0.5 − 0.65| = 0.15 over 2 points: ECE = (0.05 + 2·0.15)/3
    p = torch.tensor([[0.95, 0.05], [0.35, 0.65], [0.65, 0.35]], dtype=torch.float64)
    assert expected_calibration_error(p, torch.tensor([0, 0, 0])) == pytest.approx((0.05 + 0.3) / 3, abs=1e-15)


def test_ece_separates_calibrated_from_overconfident_predictions():
    g = torch.Generator().manual_seed(0)
    conf = 0.5 + 0.5 * torch.rand(20000, generator=g, dtype=torch.float64)
    right = torch.rand(20000, generator=g, dtype=torch.float64) < conf  # right with probability = confidence
    p = torch.stack([conf, 1 - conf], 1)
    y = torch.where(right, 0, 1)
    assert expected_calibration_error(p, y) < 0.02
    sharp = torch.stack([torch.full_like(conf, 0.99), torch.full_like(conf, 0.01)], 1)
    assert expected_calibration_error(sharp, y) > 0.2  # the negative control: same hits, overconfident


@given(st.integers(0, 10_000), st.integers(2, 12))
def test_ece_agrees_with_torchmetrics(seed, classes):
    tm = pytest.importorskip("torchmetrics.functional.classification")
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(300, classes, generator=g, dtype=torch.float64), 1)
    y = torch.randint(0, classes, (300,), generator=g)
    ours = expected_calibration_error(p, y, bins=10)
    theirs = float(tm.multiclass_calibration_error(p, y, num_classes=classes, n_bins=10, norm="l1"))
    assert ours == pytest.approx(theirs, abs=1e-6)  # torchmetrics works in float32


@pytest.mark.parametrize("args", [(torch.ones(3, 2), torch.zeros(2, dtype=torch.long)),
                                  (torch.full((2, 2), float("nan")), torch.zeros(2, dtype=torch.long))])
def test_ece_refuses_bad_input(args):
    with pytest.raises(InvalidInputError):
        expected_calibration_error(*args)


# ------------------------------------------------------------------ intervals


def test_mean_interval_covers_the_mean_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(1)
    few, many = mean_interval(list(rng.normal(2.0, 1.0, 8))), mean_interval(list(rng.normal(2.0, 1.0, 200)))
    assert few.low < few.mean < few.high and many.low < 2.0 < many.high
    assert many.high - many.low < few.high - few.low
    c = mean_interval([1.5] * 5)
    assert (c.mean, c.low, c.high, c.n) == (1.5, 1.5, 1.5, 5)


# ------------------------------------------------------------------ verdicts on planted runs


def _rows(crr_dlambda: float, crr_derr: float, sam_derr: float, rise: float, seeds: int = 12) -> list[dict]:
    """Planted runs: per seed a baseline, CRR 0.001 and SAM, with known paired differences plus noise."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(seeds):
        lam, err, ece = 1.0 + 0.05 * rng.normal(), 0.1 + 0.002 * rng.normal(), 0.05 + 0.002 * rng.normal()
        noise = 0.005 * rng.normal()
        for arm, dl, de in (("baseline", 0.0, 0.0), ("CRR 0.001", crr_dlambda, crr_derr),
                            ("SAM ρ=0.05", 0.0, crr_derr - sam_derr)):
            rows.append({"condition": "c", "arm": arm, "seed": s, "lambda_boundary": lam + dl + noise,
                         "test_error": err + de, "ece": ece, "D": {"a": 1.0}, "Dplus": {"a": 2.0},
                         "lambda_curve": [lam - rise, lam]})
    return rows


def _verdict(rows, claim):
    return next(v for v in verdicts(rows, (1e-3,), 1e-3, n_boot=400) if v.claim.startswith(claim))


def test_verdicts_follow_the_planted_effects_both_ways():
    assert _verdict(_rows(-0.3, 0.0, 0.0, 0.5), "CRR lowers").verdict == "reproduced"
    assert _verdict(_rows(+0.3, 0.0, 0.0, 0.5), "CRR lowers").verdict == "not reproduced"
    assert _verdict(_rows(-0.3, 0.05, 0.0, 0.5), "CRR lowers").verdict == "not reproduced"  # error moved
    wide = _rows(-0.3, 0.0, 0.0, 0.5)
    for i, r in enumerate(x for x in wide if x["arm"] == "CRR 0.001"):  # error noise ±0.05 around no change
        r["test_error"] += 0.05 * (-1) ** i
    assert _verdict(wide, "CRR lowers").verdict == "inconclusive"
    assert _verdict(_rows(-0.3, 0.0, 0.0, 0.5), "CRR matches").verdict == "reproduced"
    assert _verdict(_rows(-0.3, 0.0, 0.05, 0.5), "CRR matches").verdict == "not reproduced"  # SAM better
    assert _verdict(_rows(-0.3, 0.0, -0.05, 0.5), "CRR matches").verdict == "reproduced (CRR better)"
    assert _verdict(_rows(0.0, 0.0, 0.0, 0.5), "λ rises").verdict == "reproduced"
    assert _verdict(_rows(0.0, 0.0, 0.0, -0.5), "λ rises").verdict == "contradicted"
    few = _verdict(_rows(-0.3, 0.0, 0.0, 0.5, seeds=3), "CRR lowers")
    assert few.seeds == 3 and "indicative only" in few.evidence
    assert few.verdict.startswith("indicative") and "3 seeds < 10" in few.verdict
    assert few.outcome == "reproduced" and few.kind is EvidenceKind.INDICATIVE
    many = _verdict(_rows(-0.3, 0.0, 0.0, 0.5), "CRR lowers")  # negative control: 12 seeds are not indicative
    assert many.verdict == many.outcome == "reproduced" and many.kind is EvidenceKind.STATISTICAL


def test_only_an_exact_result_is_styled_as_proved():
    from coupled_curvature.reporting.training_page import mark_kind

    for v in verdicts(_rows(-0.3, 0.0, 0.0, 0.5), (1e-3,), 1e-3, n_boot=400) + \
            verdicts(_rows(-0.3, 0.0, 0.0, 0.5, seeds=3), (1e-3,), 1e-3, n_boot=400):
        d = asdict(v)
        assert mark_kind(d) != "proved"  # bootstrap verdicts are evidence, whatever their word
        assert mark_kind({**d, "kind": "exact"}) == ("failed" if v.outcome in ("not reproduced", "contradicted")
                                                     else "proved")
    against = asdict(_verdict(_rows(+0.3, 0.0, 0.0, 0.5), "CRR lowers"))
    assert mark_kind(against) == "failed"


def test_arm_table_and_curves_average_over_seeds():
    rows = _rows(-0.3, 0.0, 0.0, 0.5)
    t = {e["arm"]: e for e in arm_table(rows, n_boot=100)}
    base = [r["lambda_boundary"] for r in rows if r["arm"] == "baseline"]
    assert t["baseline"]["lambda_boundary"]["mean"] == pytest.approx(sum(base) / len(base), rel=1e-14)
    assert t["baseline"]["D_median"]["mean"] == 1.0 and t["baseline"]["seeds"] == 12
    c = {e["arm"]: e for e in lambda_curves(rows)}["baseline"]
    assert c["seeds"] == [12, 12] and c["lambda"][1] - c["lambda"][0] == pytest.approx(0.5, rel=1e-12)


# ------------------------------------------------------------------ a tiny run


TINY = replace(quick_config(), conditions=(Condition("moons", 0.3),), seeds=(0, 1), epochs=2, crr_scales=(1e-1,),
               moons_samples=300, lambda_points=8, probe=32, n_boot=100)


def test_tiny_run_is_deterministic_cached_and_its_arms_differ(tmp_path):
    strip = ("train_seconds", "measure_seconds", "cached")
    first = run_training(TINY, cache=ModelCache(str(tmp_path)))
    again = run_training(TINY, cache=ModelCache(None))
    cached = run_training(TINY, cache=ModelCache(str(tmp_path)))
    assert [{k: v for k, v in r.items() if k not in strip} for r in first] == \
        [{k: v for k, v in r.items() if k not in strip} for r in again]
    assert all(r["cached"] for r in cached) and not any(r["cached"] for r in first)
    by = {(r["arm"], r["seed"]): r for r in first}
    assert [r["arm"] for r in first[::2]] == ["baseline", "CRR 0.1", "SAM ρ=0.05", "ASAM ρ=0.5"]
    for arm in ("CRR 0.1", "SAM ρ=0.05", "ASAM ρ=0.5"):  # the objectives really train differently
        assert by[(arm, 0)]["D"] != by[("baseline", 0)]["D"]
    r = by[("baseline", 0)]
    assert len(r["lambda_curve"]) == TINY.epochs + 1 and len(r["D_curve"]) == TINY.epochs + 1
    assert 0.0 <= r["test_error"] <= 1.0 and 0.0 <= r["ece"] <= 1.0 and math.isfinite(r["top_eig"])
    assert r["Dplus_missing"] == {"2.weight": r["Dplus_missing"]["2.weight"]}  # the 4096-parameter block, with why


def test_worker_processes_give_the_same_rows(tmp_path):
    one = TINY.__class__(**{**TINY.__dict__, "seeds": (0,), "crr_scales": ()})
    strip = ("train_seconds", "measure_seconds", "cached")
    serial = run_training(one, cache=ModelCache(None))
    parallel = run_training(one, cache=ModelCache(str(tmp_path)), jobs=2)
    assert [{k: v for k, v in r.items() if k not in strip} for r in parallel] == \
        [{k: v for k, v in r.items() if k not in strip} for r in serial]
    with pytest.raises(InvalidInputError):
        run_training(one, jobs=0)


@pytest.mark.parametrize("change", [{"seeds": ()}, {"epochs": 0}, {"crr_scales": (0.0,)}, {"band": (0.7, 0.6)},
                                    {"conditions": (Condition("digits", 0.3),)}, {"sam_rho": float("inf")}])
def test_config_refused_before_work(change):
    with pytest.raises(InvalidInputError):
        check_config(replace(TINY, **change))


def test_default_config_is_the_described_protocol():
    from coupled_curvature.numeric.studies.training_run import default_config

    cfg: TrainingConfig = default_config()
    assert len(cfg.seeds) >= 20 and cfg.epochs == 25 and cfg.lr == 1e-2 and cfg.batch_size == 128
    assert {(c.dataset, c.flip) for c in cfg.conditions} == {("moons", 0.0), ("moons", 0.3), ("moons", 0.45),
                                                             ("digits", 0.0)}
    assert cfg.moons_samples == 3000 and cfg.sam_rho == 0.05 and max(cfg.crr_scales) == 1e-2
