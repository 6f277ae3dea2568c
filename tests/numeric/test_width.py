"""The width-sweep engine on a tiny population: the exact factor route against a brute-force Hessian,
the planted-measure pipeline (τ = 1 for a copy of the gap, ≈ 0 for an unrelated one), the cache
round trip and resumption, and bad input."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.models.cache import ModelCache
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.studies.width_measures import dplus_records
from coupled_curvature.numeric.studies.width import (
    MEASURES,
    antithetic_adaptive_average,
    check_config,
    default_config,
    factor_pinv_forms,
    kendall_table,
    quick_config,
    relu_ce_factors,
    relu_ce_trace,
    reported_measures,
    run_width,
    strip_timing,
)

TINY = replace(quick_config(), widths=(4, 8), depths=(1, 2), seeds=(0, 1), max_epochs=8, measure_samples=50,
               lanczos_iter=20, adaptive_samples=8, lambda_points=8, n_boot=200, name="tiny")


def _brute_blocks(model: nn.Module, X: torch.Tensor, y: torch.Tensor):
    """Full Hessian of the mean cross-entropy by torch.autograd.functional.hessian (double backward
    through the plain model), cut into tensor blocks."""
    names = [n for n, _ in model.named_parameters()]
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    sizes = [params[n].numel() for n in names]
    flat0 = torch.cat([params[n].reshape(-1) for n in names])

    def loss(flat):
        parts = dict(zip(names, (t.reshape(params[n].shape) for t, n in zip(torch.split(flat, sizes), names))))
        return nn.functional.cross_entropy(torch.func.functional_call(model, parts, (X,)), y)

    H = torch.autograd.functional.hessian(loss, flat0).numpy()
    out, start = {}, 0
    for n, s in zip(names, sizes):
        out[n] = (H[start : start + s, start : start + s], flat0[start : start + s].numpy())
        start += s
    return out, float(np.trace(H))


def _np_pinv_form(H: np.ndarray, w: np.ndarray, rtol: float) -> float:
    lam, U = np.linalg.eigh(0.5 * (H + H.T))
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    c = U[:, keep].T @ w
    return float((c * c / lam[keep]).sum())


@pytest.mark.parametrize("hidden,n", [((5,), 12), ((4, 3), 7), ((6,), 2)])
def test_factor_route_matches_brute_force_hessian(hidden, n):
    data = load("wine")
    model = make_mlp(13, hidden, 3, seed=2)
    X, y = data.X_train[:n], data.y_train[:n]
    blocks, trace = _brute_blocks(model, X, y)
    forms = factor_pinv_forms(relu_ce_factors(model, X), dict(model.named_parameters()), 1e-10, 1e-3)
    assert set(forms) == set(blocks)
    routes = {f.route for f in forms.values()}
    assert "gram" in routes  # R = 2n rows < the first weight's size: the Gram route is exercised
    for name, (H, w) in blocks.items():
        assert forms[name].wHw == pytest.approx(float(w @ H @ w), rel=1e-10, abs=1e-14)
        assert forms[name].value == pytest.approx(_np_pinv_form(H, w, 1e-10), rel=1e-7), name
        assert forms[name].value_alt == pytest.approx(_np_pinv_form(H, w, 1e-3), rel=1e-7), name
        assert forms[name].rank == int(np.sum(np.abs(np.linalg.eigvalsh(H)) > 1e-10 * np.abs(np.linalg.eigvalsh(H)).max()))
    assert relu_ce_trace(model, X) == pytest.approx(trace, rel=1e-12)


def test_factor_route_refuses_smooth_activations_and_untrusted_blocks_are_flagged():
    tanh = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    with pytest.raises(UnsupportedModelError, match="Linear and"):
        relu_ce_factors(tanh, torch.randn(5, 3))
    # negative control of the runtime check: a factor whose ‖Bw‖² disagrees with autograd's wᵀHw
    model = make_mlp(3, (4,), 2, seed=0)
    X, y = torch.randn(6, 3, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    d = diagnose(model, nn.CrossEntropyLoss(), (X, y), inverse=False)
    forms = factor_pinv_forms(relu_ce_factors(model, X), dict(model.named_parameters()), 1e-10)
    good = dplus_records(d, forms)
    assert all(r["Dplus_trusted"] for r in good)
    bad = dict(forms)
    f = forms["0.weight"]
    bad["0.weight"] = replace(f, wHw=f.wHw * (1 + 1e-6))
    flagged = {r["block"]: r["Dplus_trusted"] for r in dplus_records(d, bad)}
    assert flagged == {"0.weight": False, "0.bias": True, "2.weight": True, "2.bias": True}


def test_antithetic_adaptive_sharpness_is_exact_on_a_quadratic():
    # linear model + MSE: L is quadratic, so every antithetic pair gives ½δᵀHδ exactly, and the mean
    # over the sphere ‖ε‖ = ρ is ρ²/(2n) Σ_i θ_i² H_ii
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 1)).double()
    X, y = torch.randn(20, 3, dtype=torch.float64), torch.randn(20, 1, dtype=torch.float64)
    theta = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    Xa = torch.cat([X, torch.ones(20, 1, dtype=torch.float64)], dim=1)  # weight then bias
    H = 2.0 * Xa.T @ Xa / 20
    r = antithetic_adaptive_average(net, nn.MSELoss(), (X, y), rho=0.3, samples=600, seed=1)
    expected = 0.3**2 / (2 * 4) * float((theta**2 * torch.diagonal(H)).sum())
    assert abs(r.value - expected) < 4 * r.stderr
    assert r.stderr < 0.1 * expected


def test_kendall_table_planted_and_independent_measures_on_a_synthetic_population():
    rng = np.random.default_rng(0)
    runs = []
    for seed in range(30):
        for depth in (1, 3):
            for width in (8, 32, 128):
                gap = float(rng.normal())
                runs.append({"seed": seed, "depth": depth, "width": width, "gap_loss": gap, "gap_err": -gap,
                             "copy": 3.0 * gap + 1.0, "noise": float(rng.normal()),
                             "partial": None if width == 8 else gap})
    table = kendall_table(runs, ["copy", "noise", "partial"], ["gap_loss", "gap_err"], n_boot=300)
    get = {(e["measure"], e["gap"], e["depth"]): e for e in table}
    assert len(table) == 3 * 2 * 3
    for depth in (None, 1, 3):
        assert get[("copy", "gap_loss", depth)]["tau"] == pytest.approx(1.0)
        assert get[("copy", "gap_loss", depth)]["ci_low"] == pytest.approx(1.0)
        assert get[("copy", "gap_err", depth)]["tau"] == pytest.approx(-1.0)
        e = get[("noise", "gap_loss", depth)]
        assert abs(e["tau"]) < 0.15 and e["ci_low"] < 0.0 < e["ci_high"]
    assert get[("partial", "gap_loss", None)]["n"] == 120 and get[("copy", "gap_loss", None)]["n"] == 180
    assert get[("copy", "gap_loss", 1)]["seeds"] == 30


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """The tiny population through :func:`run_width` with a planted copy of the gap and an unrelated
    measure, then again from the cache."""
    folder = tmp_path_factory.mktemp("width-cache")
    extra = {"planted": lambda model, data, row: row["gap_loss"],
             "unrelated": lambda model, data, row: float(np.random.default_rng(
                 [row["seed"], row["width"], row["depth"], 99]).normal())}
    first = run_width(TINY, cache=ModelCache(str(folder)), extra=extra)
    second = run_width(TINY, cache=ModelCache(str(folder)), extra=extra)
    return folder, extra, first, second


def test_pipeline_planted_measure_gives_tau_one_and_unrelated_one_does_not(tiny_runs):
    _, _, first, _ = tiny_runs
    get = {(e["measure"], e["gap"], e["depth"]): e for e in first.kendall}
    for depth in (None, 1, 2):
        e = get[("planted", "gap_loss", depth)]
        assert e["tau"] == pytest.approx(1.0) and e["ci_low"] == pytest.approx(1.0), e
    e = get[("unrelated", "gap_loss", None)]
    assert abs(e["tau"]) < 0.6 and e["ci_low"] <= 0.0 <= e["ci_high"], e  # 2 seeds: a crude interval
    # every built-in measure (and the cutoff sensitivity rows) has an entry per gap and scope, a value on every net
    assert {m for m, _, _ in get} == set(reported_measures(TINY)) | {"planted", "unrelated"}
    assert {"Dplus_mean_alt", "Dplus_median_alt"} <= set(first.measures)
    assert len(first.runs) == 8
    for r in first.runs:
        assert all(r[m] is not None and math.isfinite(r[m]) for m in reported_measures(TINY)), r
        assert r["Dplus_blocks"] == f"{2 * (r['depth'] + 1)}/{2 * (r['depth'] + 1)}"
        assert r["gap_loss"] == pytest.approx(r["test_loss"] - r["train_loss"])
        assert r["epochs"] <= TINY.max_epochs


def test_cache_round_trip_trains_and_measures_nothing_and_gives_the_same_table(tiny_runs):
    folder, extra, first, second = tiny_runs
    assert not any(r["cached_model"] for r in first.runs)
    assert all(r["cached_model"] and r["cached_measure"] for r in second.runs)
    assert strip_timing(second.runs) == strip_timing(first.runs)
    assert second.kendall == first.kendall
    # remeasuring from the cached models reproduces the table bit for bit
    third = run_width(TINY, cache=ModelCache(str(folder)), extra=extra, remeasure=True)
    assert all(r["cached_model"] and not r["cached_measure"] for r in third.runs)
    assert strip_timing(third.runs) == strip_timing(first.runs)
    assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]


def test_interrupted_run_resumes_from_the_cache(tmp_path):
    cfg = replace(TINY, widths=(4,), depths=(1,), seeds=(5, 6, 7), measures=("D_median", "fisher_rao"))
    calls = []

    def stop_after_two(msg):
        calls.append(msg)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_width(cfg, cache=ModelCache(str(tmp_path)), progress=stop_after_two)
    resumed = run_width(cfg, cache=ModelCache(str(tmp_path)))
    assert [r["cached_model"] for r in resumed.runs] == [True, True, False]
    fresh = run_width(cfg)  # no cache at all: the same table
    assert strip_timing(resumed.runs) == strip_timing(fresh.runs)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_other_seed_gives_another_table():
    cfg = replace(TINY, widths=(4,), depths=(1,), seeds=(0,), measures=("fisher_rao",))
    a = run_width(cfg).runs[0]
    b = run_width(replace(cfg, seeds=(1,))).runs[0]
    assert a["fisher_rao"] != b["fisher_rao"] and a["gap_loss"] != b["gap_loss"]


@pytest.mark.parametrize("change,message", [
    ({"measures": ("D_mean", "sharpness")}, "unknown measure"),
    ({"measures": ()}, "unknown measure"),
    ({"widths": (0, 8)}, "widths"),
    ({"widths": (8, 8)}, "repeated"),
    ({"widths": (2.5,)}, "widths"),
    ({"depths": (100,)}, "depths"),
    ({"seeds": (-1,)}, "seeds"),
    ({"dplus_route": "magic"}, "dplus_route"),
])
def test_bad_config_is_refused_with_a_clear_message(change, message):
    with pytest.raises(InvalidInputError, match=message):
        check_config(replace(TINY, **change))


def test_configs_match_the_documented_sweep():
    d = default_config()
    assert d.widths == (8, 16, 32, 64, 128, 256, 512) and d.depths == (1, 3) and len(d.seeds) >= 5
    assert set(d.measures) == set(MEASURES) and d.dataset == "digits"
    q = quick_config()
    assert q.depths == (1, 3) and len(q.seeds) >= 2
    check_config(d)
    check_config(q)
