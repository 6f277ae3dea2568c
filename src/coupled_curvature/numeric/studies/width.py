"""The width sweep: does a curvature measure rank nets by their generalization gap?

A population of ReLU MLPs on digits (train/test split of :func:`datasets.load`), one per
(depth, width, seed), is trained to a fixed, stated criterion that looks only at the training
split (Adam; stop at the first epoch end where the full training cross-entropy is ≤
``target_loss``, capped at ``max_epochs``; nets that hit the cap are flagged). Per net:

* gaps: ``gap_loss = L_test − L_train`` (mean cross-entropy on the full splits) and
  ``gap_err = err_test − err_train`` (top-1 error);
* ``D`` and ``D⁺`` of every tensor block on a fixed training subset (the first
  ``measure_samples`` points), aggregated per net as the arithmetic **mean** and the **median**
  over blocks; ``D⁺`` only over blocks where it is trustworthy, counted per net. By default
  ``wᵀH⁺w`` comes from the exact per-sample factorisation ``H_bb = BᵀB`` of a piecewise-linear
  net under cross-entropy (:func:`factor_pinv_forms`; a dense eigendecomposition of size
  ``min(n_b, N(C−1))``, so every block of every width gets ``D⁺``), trusted when ``‖Bw‖²``
  reproduces the autograd ``wᵀHw``; ``dplus_route="dense"|"krylov"|"auto"`` uses
  :func:`diagnose` instead (trusted when computed and, for Krylov, converged);
* baselines on the same subset: Hessian top eigenvalue (Lanczos), Hessian trace (exact, see
  :func:`relu_ce_trace`), average adaptive sharpness (antithetic common random numbers, see
  :func:`antithetic_adaptive_average`), Fisher–Rao norm and the input curvature rate λ.

Statistics: Kendall ``τ_b`` of every measure against every gap over the population and within
each depth, each with a 95% percentile cluster-bootstrap interval over seeds
(:mod:`stats`). Exploratory: nothing here is, or implies, a generalization bound. One net's
measurements are :mod:`.width_measures`; this module holds the configuration, the training, the
population and the statistics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.cache import ModelCache, config_key
from coupled_curvature.numeric.models.datasets import Dataset, load
from coupled_curvature.numeric.factors.relu_mlp import (  # re-exported: the width sweep's exact D⁺ route
    factor_pinv_forms,
    relu_ce_factors,
    relu_ce_trace,
)
from coupled_curvature.numeric.core.threads import torch_threads
from coupled_curvature.numeric.studies.stats import cluster_bootstrap_tau
from coupled_curvature.numeric.studies.width_measures import (  # re-exported: one net's measurements
    antithetic_adaptive_average,
    loss_and_error,
    measure_net,
)
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.models.training import fit
from coupled_curvature.numeric.vocabulary import WIDTH_GAPS, WIDTH_MEASURES

MEASURES, GAPS = WIDTH_MEASURES, WIDTH_GAPS
DPLUS_ROUTES = ("factor", "dense", "krylov", "auto")
TIMING_FIELDS = ("train_seconds", "measure_seconds", "cached_model", "cached_measure")
MAX_WIDTH = 4096
MAX_DEPTH = 16
_MEASURE_VERSION = 2


@dataclass(frozen=True)
class WidthConfig:
    """Everything that fixes the population, the training criterion, the measurements and the statistics."""

    name: str
    widths: tuple[int, ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    dataset: str = "digits"
    lr: float = 3e-3
    batch_size: int = 128
    target_loss: float = 0.01
    max_epochs: int = 300
    measure_samples: int = 256
    dplus_route: str = "factor"
    max_dense: int = 1024
    krylov_max_iter: int = 300
    krylov_tol: float = 1e-6
    pinv_rtol: float = 1e-10
    pinv_rtol_alt: float = 1e-8
    lanczos_iter: int = 100
    lanczos_tol: float = 1e-6
    adaptive_rho: float = 0.5
    adaptive_samples: int = 64
    lambda_orders: int = 6
    lambda_points: int = 32
    measures: tuple[str, ...] = tuple(MEASURES)
    n_boot: int = 2000
    boot_seed: int = 0
    threads: int = 1
    note: str = ""

    @property
    def criterion(self) -> str:
        return (
            f"Adam lr={self.lr}, batch {self.batch_size} (reshuffled each epoch from the seed), cross-entropy, "
            f"float64; stop at the first epoch end where the full training-split loss is ≤ {self.target_loss}, "
            f"at most {self.max_epochs} epochs; the test split is never looked at during training"
        )

    def nets(self) -> list[tuple[int, int, int]]:
        """``(depth, width, seed)`` in run order: seeds outermost, so a partial run covers every width."""
        return [(d, w, s) for s in self.seeds for d in self.depths for w in self.widths]


def quick_config(seed: int = 0) -> WidthConfig:
    """Widths 8, 32, 128 at depths 1 and 3, two seeds, 128 measurement samples (a few minutes at most)."""
    return WidthConfig("quick", (8, 32, 128), (1, 3), (seed, seed + 1), max_epochs=120, measure_samples=128,
                       lanczos_iter=60, n_boot=1000,
                       note="--quick: widths 8, 32, 128; two seeds; at most 120 epochs; 128 measurement samples")


def default_config(seed: int = 0, n_seeds: int = 5) -> WidthConfig:
    """Widths 8 … 512 at depths 1 and 3, ``n_seeds`` seeds (70 nets), 256 measurement samples."""
    return WidthConfig("default", (8, 16, 32, 64, 128, 256, 512), (1, 3), tuple(range(seed, seed + n_seeds)),
                       threads=2, note=f"default: widths 8–512; depths 1 and 3; {n_seeds} seeds")


def check_config(cfg: WidthConfig) -> WidthConfig:
    """Validate ``cfg`` (clear errors for unknown measures, bad widths, depths or seeds); returns it."""
    def positive_ints(values, what, top):
        if not values:
            raise InvalidInputError(f"{what}: give at least one value")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise InvalidInputError(f"{what}: {v!r} is not an integer in 1..{top}")
        if len(set(values)) != len(values):
            raise InvalidInputError(f"{what}: repeated values in {list(values)}")

    positive_ints(cfg.widths, "widths", MAX_WIDTH)
    positive_ints(cfg.depths, "depths", MAX_DEPTH)
    if not cfg.seeds or len(set(cfg.seeds)) != len(cfg.seeds) or not all(isinstance(s, int) and s >= 0 for s in cfg.seeds):
        raise InvalidInputError(f"seeds must be distinct non-negative integers, got {list(cfg.seeds)}")
    unknown = [m for m in cfg.measures if m not in MEASURES]
    if unknown or not cfg.measures:
        raise InvalidInputError(f"unknown measure(s): {', '.join(unknown) or '(none given)'}; "
                                f"available: {', '.join(MEASURES)}")
    if cfg.dplus_route not in DPLUS_ROUTES:
        raise InvalidInputError(f"dplus_route must be one of {', '.join(DPLUS_ROUTES)}, got {cfg.dplus_route!r}")
    if cfg.measure_samples < 2 or cfg.max_epochs < 1 or cfg.batch_size < 1 or not cfg.lr > 0:
        raise InvalidInputError("measure_samples must be ≥ 2, max_epochs and batch_size ≥ 1, lr > 0")
    return cfg


# ---------------------------------------------------------------------------- training


def model_key(cfg: WidthConfig, depth: int, width: int, seed: int) -> str:
    """Cache key of a trained net: everything that fixes its weights (not the measurement settings)."""
    return config_key({"kind": "width-sweep-model", "dataset": cfg.dataset, "depth": depth, "width": width,
                       "seed": seed, "lr": cfg.lr, "batch_size": cfg.batch_size, "target_loss": cfg.target_loss,
                       "max_epochs": cfg.max_epochs, "torch": torch.__version__.split("+")[0], "version": 1})


def train_net(data: Dataset, depth: int, width: int, seed: int, cfg: WidthConfig) -> tuple[nn.Sequential, dict]:
    """Train ``depth`` hidden ReLU layers of ``width`` units to ``cfg``'s criterion (deterministic
    under ``seed``: initialisation from ``seed``, minibatch order from ``seed + 1``; one thread)."""
    model = make_mlp(data.n_features, [width] * depth, data.n_classes, seed=seed)
    X, y = data.X_train, data.y_train
    t0 = time.perf_counter()
    train_loss = math.inf

    def reached(epoch: int, _batch_loss: float) -> bool:
        nonlocal train_loss
        train_loss = loss_and_error(model, X, y)[0]
        if not math.isfinite(train_loss):
            raise InvalidInputError(f"training diverged (depth {depth}, width {width}, seed {seed}); lower lr")
        return train_loss <= cfg.target_loss

    epochs = fit(model, X, y, epochs=cfg.max_epochs, seed=seed, lr=cfg.lr, batch_size=cfg.batch_size, on_epoch=reached)
    model.eval()
    return model, {"epochs": epochs, "reached_target": train_loss <= cfg.target_loss,
                   "train_seconds": time.perf_counter() - t0}


def trained_net(cfg: WidthConfig, data: Dataset, depth: int, width: int, seed: int,
                cache: ModelCache) -> tuple[nn.Sequential, dict, bool]:
    """``(model, meta, cached)``: from ``cache`` if present, else trained (one thread) and stored atomically."""

    def train() -> tuple[nn.Sequential, dict]:
        with torch_threads(1):  # the same bits on every machine with this torch build
            return train_net(data, depth, width, seed, cfg)

    model = make_mlp(data.n_features, [width] * depth, data.n_classes, seed=seed)
    return cache.load_or_train(model_key(cfg, depth, width, seed), model, train)  # a stale entry is rebuilt


# ---------------------------------------------------------------------------- measurements


def _measure_settings(cfg: WidthConfig) -> dict:
    keys = ("measure_samples", "dplus_route", "max_dense", "krylov_max_iter", "krylov_tol", "pinv_rtol", "pinv_rtol_alt",
            "lanczos_iter", "lanczos_tol", "adaptive_rho", "adaptive_samples", "lambda_orders", "lambda_points")
    settings = {k: getattr(cfg, k) for k in keys}
    settings.update(measures=sorted(cfg.measures), version=_MEASURE_VERSION)
    return settings


# ---------------------------------------------------------------------------- population and statistics


ExtraMeasure = Callable[[nn.Module, Dataset, dict], float]


@dataclass
class WidthResult:
    config: WidthConfig
    runs: list[dict] = field(default_factory=list)
    kendall: list[dict] = field(default_factory=list)
    measures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        cfg = asdict(self.config)
        return {"runs": self.runs, "kendall": self.kendall, "config": cfg, "criterion": self.config.criterion,
                "measures": self.measures, "gaps": dict(GAPS), "seconds": self.seconds,
                "aggregation": AGGREGATION}


AGGREGATION = (
    "per net, D and D⁺ of every tensor block (weights and biases separately) on the measurement subset; "
    "'mean' is the arithmetic mean over blocks, 'median' the median over blocks; D⁺ aggregates use only "
    "blocks whose D⁺ is trustworthy (see the D⁺ route), counted in 'Dplus_blocks' as trusted/total"
)


def kendall_table(
    runs: Sequence[Mapping],
    measures: Sequence[str],
    gaps: Sequence[str] = tuple(GAPS),
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> list[dict]:
    """One entry per (measure, gap, scope): ``τ_b`` with a cluster-bootstrap interval over seeds.

    Scopes: every net (``depth: None``) and each depth alone. Nets where the measure is
    undefined (``None``) are left out of that entry (``n`` says how many remain).

    >>> runs = [{"depth": 1, "seed": s % 3, "m": float(s), "gap_loss": float(s)} for s in range(9)]
    >>> e = kendall_table(runs, ["m"], ["gap_loss"], n_boot=50)[0]
    >>> (e["tau"], e["ci_low"], e["ci_high"], e["n"], e["depth"])
    (1.0, 1.0, 1.0, 9, None)
    """
    depths = sorted({r["depth"] for r in runs})
    out = []
    for m in measures:
        for g in gaps:
            for depth in [None, *depths] if len(depths) > 1 else [None]:
                keep = [r for r in runs if (depth is None or r["depth"] == depth)
                        and r.get(m) is not None and r.get(g) is not None
                        and math.isfinite(r[m]) and math.isfinite(r[g])]
                ci = cluster_bootstrap_tau([r[m] for r in keep], [r[g] for r in keep], [r["seed"] for r in keep],
                                           n_boot=n_boot, level=level, seed=seed)
                out.append({"measure": m, "gap": g, "depth": depth, "tau": ci.tau, "ci_low": ci.low,
                            "ci_high": ci.high, "n": ci.n, "seeds": ci.n_clusters, "level": level})
    return out


def reported_measures(cfg: WidthConfig) -> dict[str, str]:
    """The selected measures with their labels, each ``D⁺`` aggregate followed (factor route) by the same
    aggregate at the second cutoff ``pinv_rtol_alt``, a sensitivity check of the cutoff.

    >>> list(reported_measures(replace(quick_config(), measures=("Dplus_median", "trace"))))
    ['Dplus_median', 'Dplus_median_alt', 'trace']
    """
    out = {}
    for m in MEASURES:
        if m not in cfg.measures:
            continue
        out[m] = MEASURES[m]
        if m.startswith("Dplus") and cfg.dplus_route == "factor":
            out[f"{m}_alt"] = f"{MEASURES[m]}, at cutoff {cfg.pinv_rtol_alt:g} (sensitivity check)"
    return out


def run_width(
    cfg: WidthConfig,
    *,
    cache: ModelCache | None = None,
    extra: Mapping[str, ExtraMeasure] | None = None,
    progress: Callable[[str], None] | None = None,
    remeasure: bool = False,
) -> WidthResult:
    """Train (or load) and measure every net of ``cfg``, then the Kendall table.

    ``extra`` adds measures ``f(model, data, row) -> float`` (``row`` holds the gaps), never cached;
    used to plant a known answer in the pipeline. Measurements are cached beside the models (a
    rerun or a resumed run recomputes nothing) unless ``remeasure``.

    >>> cfg = replace(quick_config(), widths=(4,), depths=(1,), seeds=(0, 1), max_epochs=2,
    ...               measures=("D_median", "fisher_rao"), measure_samples=50, n_boot=20)
    >>> r = run_width(cfg)
    >>> len(r.runs), sorted({e["measure"] for e in r.kendall})
    (2, ['D_median', 'fisher_rao'])
    """
    check_config(cfg)
    extra = dict(extra or {})
    clash = [k for k in extra if k in MEASURES or k in GAPS]
    if clash:
        raise InvalidInputError(f"extra measure names clash with built-in ones: {', '.join(clash)}")
    cache = cache or ModelCache(None)
    say = progress or (lambda s: None)
    data = load(cfg.dataset)
    result = WidthResult(cfg, measures={**reported_measures(cfg), **{k: "planted (extra) measure" for k in extra}})
    t0 = time.perf_counter()
    with torch_threads(cfg.threads):
        nets = cfg.nets()
        for i, (depth, width, seed) in enumerate(nets, 1):
            row = _one_net(cfg, data, depth, width, seed, cache, extra, remeasure)
            result.runs.append(row)
            say(f"  [{i}/{len(nets)}] depth {depth} width {width} seed {seed}: "
                f"{'cached' if row['cached_model'] else 'trained'} ({row['epochs']} epochs), "
                f"{'cached' if row['cached_measure'] else 'measured in %.1fs' % row['measure_seconds']}; "
                f"gap {row['gap_loss']:.3f}; {time.perf_counter() - t0:.0f}s so far")
    names = [*result.measures]
    result.kendall = kendall_table(result.runs, names, n_boot=cfg.n_boot, seed=cfg.boot_seed)
    result.seconds = time.perf_counter() - t0
    return result


def _one_net(cfg, data, depth, width, seed, cache, extra, remeasure) -> dict:
    model, meta, cached_model = trained_net(cfg, data, depth, width, seed, cache)
    mkey = config_key({"kind": "width-sweep-measure", "model": model_key(cfg, depth, width, seed),
                       "settings": _measure_settings(cfg)})
    stored = None if remeasure else cache.load_row(mkey)
    t = time.perf_counter()
    if stored is not None:
        measured, cached_measure = stored, True
    else:
        measured, cached_measure = measure_net(model, data, cfg), False
        cache.store_row(mkey, measured)
    row = {"depth": depth, "width": width, "seed": seed, "params": sum(p.numel() for p in model.parameters()),
           "epochs": meta["epochs"], "reached_target": meta["reached_target"], **measured,
           "train_seconds": meta["train_seconds"], "measure_seconds": time.perf_counter() - t,
           "cached_model": cached_model, "cached_measure": cached_measure}
    for name, fn in extra.items():
        row[name] = float(fn(model, data, row))
    return row


def strip_timing(runs: Sequence[Mapping]) -> list[dict]:
    """Rows without the timing and cache fields (what reproducibility compares)."""
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS and k != "measure_timings"} for r in runs]


__all__ = [
    "AGGREGATION", "GAPS", "MEASURES", "WidthConfig", "WidthResult", "antithetic_adaptive_average", "check_config",
    "default_config", "factor_pinv_forms", "relu_ce_factors", "reported_measures",
    "kendall_table", "measure_net", "model_key", "quick_config", "relu_ce_trace", "run_width",
    "strip_timing", "train_net", "trained_net",
]
