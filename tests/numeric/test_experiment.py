"""The invariance experiment engine and the model cache on tiny nets (a reduced ``--quick``)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import torch

from coupled_curvature.numeric.models.cache import ModelCache, config_key
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.studies.invariance_experiment import (
    DEFAULT_QUANTITIES,
    NetSpec,
    default_config,
    euler_residual,
    measure_key,
    quick_config,
    run_invariance,
    strip_timing,
    trained_model,
)

TINY = replace(quick_config(), epochs=3, measure_samples=60, neuron_trials=2, lanczos_iter=15, max_dense=256)


def _cfg(*nets: NetSpec):
    return replace(TINY, nets=tuple(nets))


def test_planted_non_invariant_measure_shows_up_as_moves():
    planted = dict(DEFAULT_QUANTITIES, planted=lambda b: None if b.coupled is None else b.coupled * b.w_sq)
    row = run_invariance(_cfg(NetSpec("wine", "mlp", (6, 6), 0)), quantities=planted).rows[0]
    assert row["verdicts"]["planted"] == "moves", row["changes"]
    assert row["verdicts"]["D"] == "invariant" and row["verdicts"]["Dplus"] == "invariant", row["changes"]
    assert row["status"] == "invariant"
    # the raw quantities and the negative control move by order one or more
    assert row["rq_change"] > 1e-2 and row["top_eig_change"] > 1e-2
    assert row["neuron_control_min"] > 1e-2
    assert row["function_gap"] < 1e-10


def test_planted_measure_alone_makes_the_net_not_invariant():
    swapped = {"D": lambda b: None if b.coupled is None else b.coupled * b.w_sq,
               "Dplus": DEFAULT_QUANTITIES["Dplus"], "RQ": DEFAULT_QUANTITIES["RQ"]}
    row = run_invariance(_cfg(NetSpec("wine", "mlp", (6,), 1)), quantities=swapped).rows[0]
    assert row["status"] == "moves" and row["max_rel_change_D"] > 1e-2


def test_batchnorm_is_flagged_degenerate_never_invariant():
    row = run_invariance(_cfg(NetSpec("wine", "mlp-bn", (5,), 0))).rows[0]
    assert row["status"] == "degenerate (T10)"
    assert "0.weight" in row["degenerate_blocks"]
    assert row["verdicts"]["D"] == "degenerate (T10)"


def test_t9_residual_small_bias_free_and_not_with_biases():
    cfg = _cfg(NetSpec("wine", "mlp-nobias", (5, 5), 0))
    row = run_invariance(cfg).rows[0]
    assert row["t9_residual"] is not None and row["t9_residual"] < 1e-8
    # negative control: with biases, wᵀg of the first layer is no longer P (homogeneity fails)
    model, data, _, _ = trained_model(NetSpec("wine", "mlp", (5, 5), 0), cfg, ModelCache(None))
    sample = (data.X_train[:60], data.y_train[:60])
    d = diagnose(model, torch.nn.CrossEntropyLoss(), sample, inverse=False)
    assert euler_residual(model, sample, d) > 1e-3


def test_same_seed_same_table_other_seed_differs():
    nets = (NetSpec("wine", "mlp", (5,), 3), NetSpec("wine", "mlp-leaky", (4, 4), 3))
    a, b = run_invariance(_cfg(*nets)), run_invariance(_cfg(*nets))
    assert strip_timing(a.rows) == strip_timing(b.rows)
    c = run_invariance(_cfg(*(replace(n, seed=4) for n in nets)))
    assert strip_timing(c.rows) != strip_timing(a.rows)


def test_cache_round_trip_and_damaged_entry(tmp_path):
    cache = ModelCache(str(tmp_path))
    spec, cfg = NetSpec("wine", "mlp", (4,), 0), _cfg()
    m1, _, meta1, cached1 = trained_model(spec, cfg, cache)
    m2, _, meta2, cached2 = trained_model(spec, cfg, cache)
    assert (cached1, cached2) == (False, True) and meta1 == meta2
    for (k, v), (k2, v2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert k == k2 and torch.equal(v, v2)
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].endswith(".pt")  # no temporary files left behind
    (tmp_path / files[0]).write_bytes(b"truncated")  # an interrupted foreign write
    assert cache.load(files[0][:-3]) is None
    _, _, _, cached3 = trained_model(spec, cfg, cache)
    assert cached3 is False and cache.load(files[0][:-3]) is not None
    assert trained_model(replace(spec, seed=1), cfg, cache)[3] is False  # another config, another key


def test_config_key_depends_on_content():
    assert config_key({"a": 1}) != config_key({"a": 2})


def test_default_config_is_the_full_table():
    cfg = default_config()
    depths = {len(n.hidden) for n in cfg.nets if n.arch == "mlp" and n.dataset == "digits"}
    assert {1, 3, 7, 14} <= depths and len({n.seed for n in cfg.nets}) >= 3
    assert {"mlp-nobias", "mlp-leaky", "cnn", "mlp-bn"} <= {n.arch for n in cfg.nets}
    deepest = max((n for n in cfg.nets if n.dataset == "digits"), key=lambda n: len(n.hidden))
    params = 64 * 95 + 95 + 13 * (95 * 95 + 95) + 95 * 10 + 10
    assert deepest.hidden == (95,) * 14 and 120_000 < params < 130_000


def test_factor_route_gives_dplus_on_blocks_the_dense_route_skips():
    """max_dense = 1: the dense route computes no D⁺ at all (control), the factor route every block, and invariantly."""
    spec = NetSpec("wine", "mlp-leaky", (6, 6), 0)
    fac = run_invariance(replace(_cfg(spec), max_dense=1)).rows[0]
    dense = run_invariance(replace(_cfg(spec), max_dense=1, dplus_route="diagnose")).rows[0]
    assert fac["blocks_with_Dplus"] == fac["blocks"] and fac["dplus_route"] == "factor"
    assert dense["blocks_with_Dplus"] == 0 and dense["max_rel_change_Dplus"] is None
    assert fac["verdicts"]["Dplus"] == "invariant" and fac["status"] == "invariant", fac["changes"]


def test_measured_rows_are_cached_and_an_interrupted_run_resumes(tmp_path):
    nets = (NetSpec("wine", "mlp", (4,), 0), NetSpec("wine", "mlp-nobias", (4,), 0))
    cfg, cache = _cfg(*nets), ModelCache(str(tmp_path))
    calls = []

    def interrupt_second(msg):
        calls.append(msg)
        if len(calls) == 1:
            raise KeyboardInterrupt  # after the first net's row is stored

    with pytest.raises(KeyboardInterrupt):
        run_invariance(cfg, cache=cache, progress=interrupt_second)
    assert cache.load(measure_key(nets[0], cfg)) is not None and cache.load(measure_key(nets[1], cfg)) is None
    said = []
    resumed = run_invariance(cfg, cache=cache, progress=said.append)
    assert "(cached," in said[0] and "(cached," not in said[1]
    fresh = run_invariance(cfg)  # no cache at all
    assert strip_timing(resumed.rows) == strip_timing(fresh.rows)
    # a different measurement setting is a different key (negative control), remeasure ignores stored rows
    assert measure_key(nets[0], replace(cfg, neuron_trials=3)) != measure_key(nets[0], cfg)
    said.clear()
    run_invariance(cfg, cache=cache, progress=said.append, remeasure=True)
    assert not any("(cached," in m for m in said)


def test_long_nets_report_their_stages(monkeypatch):
    from coupled_curvature.numeric.studies import invariance_measures as E

    said: list[str] = []
    run_invariance(_cfg(NetSpec("wine", "mlp", (4,), 0)), progress=said.append)
    assert len(said) == 1  # a quick net: one line
    monkeypatch.setattr(E, "_STAGE_LINES_AFTER_S", -1.0)
    said.clear()
    run_invariance(_cfg(NetSpec("wine", "mlp", (4,), 0)), progress=said.append)
    stages = [m for m in said if "neuron-rescaling control" in m or "symmetry chain" in m]
    assert len(stages) == 1 + TINY.neuron_trials and said[-1].startswith("  [1/1]")
