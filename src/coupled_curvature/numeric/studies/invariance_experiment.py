"""The invariance experiment: train many nets, apply symmetry chains, tabulate what moves.

For every (dataset, architecture, seed) a net is trained to a fixed, stated criterion (Adam, fixed
learning rate, batch size and number of epochs; no early stopping), then measured on a fixed
subset of its training data by :mod:`.invariance_measures`, which lists the row's fields. A table
row per net; a cache folder makes an interrupted run resume where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.cache import ModelCache, config_key
from coupled_curvature.numeric.models.datasets import Dataset, load
from coupled_curvature.numeric.core.threads import torch_threads
from coupled_curvature.numeric.studies.invariance import euler_residual  # re-exported
from coupled_curvature.numeric.studies.invariance_certified import certified_fields
from coupled_curvature.numeric.studies.invariance_measures import (  # re-exported: one net's measurements
    DEFAULT_QUANTITIES,
    FACTOR_ARCHS,
    Quantity,
    measure_net,
    scale_invariant_blocks,
)
from coupled_curvature.numeric.models.factory import build_for
from coupled_curvature.numeric.models.training import accuracy, fit

ARCHS = ("mlp", "mlp-nobias", "mlp-leaky", "cnn", "mlp-bn")  # kinds of the one vocabulary (models.factory)
DPLUS_ROUTES = ("factor", "diagnose")
TIMING_FIELDS = ("train_seconds", "measure_seconds", "cached")  # stripped when comparing tables



@dataclass(frozen=True)
class NetSpec:
    """One net to train: dataset, architecture, hidden widths (channels for ``cnn``), seed."""

    dataset: str
    arch: str
    hidden: tuple[int, ...]
    seed: int


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that fixes the table (besides the seeds inside ``nets``)."""

    name: str
    nets: tuple[NetSpec, ...]
    epochs: int = 40
    lr: float = 3e-3
    batch_size: int = 128
    measure_samples: int = 256
    max_dense: int = 1024
    n_rescalings: int = 6
    neuron_trials: int = 5
    lanczos_iter: int = 80
    tol_D: float = 1e-8
    tol_Dplus: float = 1e-5
    moves: float = 1e-3
    threads: int = 1  # torch threads while running: tiny nets run far faster on one thread on a shared machine
    dplus_route: str = "factor"  # MLP archs: D⁺ from exact per-sample factors; "diagnose": dense blocks ≤ max_dense
    note: str = ""
    certify: bool = False  # add the certified T3 check per net (invariance_certified; cached on its own key)
    certify_prec: int = 256

    @property
    def criterion(self) -> str:
        return (
            f"Adam lr={self.lr}, batch {self.batch_size}, {self.epochs} epochs on the training split, cross-entropy, "
            "float64, no early stopping"
        )


def quick_config(seed: int = 0) -> ExperimentConfig:
    """Small nets on digits and breast cancer, one seed, 128 measurement samples; ``D⁺`` on every block."""
    nets = []
    for ds in ("digits", "breast_cancer"):
        nets += [NetSpec(ds, "mlp", (12,), seed), NetSpec(ds, "mlp", (8, 8, 8), seed),
                 NetSpec(ds, "mlp-nobias", (8, 8), seed), NetSpec(ds, "mlp-leaky", (8, 8), seed),
                 NetSpec(ds, "mlp-bn", (8, 8), seed)]
    nets.append(NetSpec("digits", "cnn", (2, 4), seed))
    return ExperimentConfig("quick", tuple(nets), epochs=15, measure_samples=128, max_dense=1024,
                            neuron_trials=4, lanczos_iter=40,
                            note="--quick: small widths, one seed, 15 epochs, 128 measurement samples")


def default_config(seed: int = 0, n_seeds: int = 3) -> ExperimentConfig:
    """The full run: ReLU depths 1, 3, 7, 14 (width 95; 14 × 95 on digits ≈ 126k parameters), bias-free,
    LeakyReLU, BatchNorm, a CNN on 8×8 digits, wine as a third dataset, ``n_seeds`` seeds each.

    Measured on the first 512 training points (digits; breast cancer and wine use all of theirs), so
    the 9025-parameter blocks of the 95-wide nets take the ``N(C − 1) = 4608``-row Gram route.
    """
    nets = []
    for s in range(seed, seed + n_seeds):
        for ds in ("digits", "breast_cancer"):
            for depth in (1, 3, 7, 14):
                nets.append(NetSpec(ds, "mlp", (95,) * depth, s))
            nets += [NetSpec(ds, "mlp-nobias", (64,) * 3, s), NetSpec(ds, "mlp-leaky", (64,) * 3, s),
                     NetSpec(ds, "mlp-bn", (64,) * 3, s)]
        nets += [NetSpec("digits", "cnn", (8, 16), s), NetSpec("wine", "mlp", (64,) * 3, s)]
    return ExperimentConfig("default", tuple(nets), epochs=60, measure_samples=512, max_dense=4096,
                            n_rescalings=28, neuron_trials=9, lanczos_iter=150,
                            note="default: 512 measurement samples (all of breast cancer's and wine's training "
                            "sets); D⁺ of the MLPs on every block from exact factors, of the CNN and BatchNorm "
                            "nets on blocks ≤ 4096 parameters")


# ---------------------------------------------------------------------------- models


def build_spec(spec: NetSpec, data: Dataset) -> nn.Sequential:
    """The untrained float64 net for ``spec`` (initialised from ``spec.seed``; global RNG untouched)."""
    if spec.arch not in ARCHS:
        raise InvalidInputError(f"unknown arch {spec.arch!r}; available: {', '.join(ARCHS)}")
    return build_for(spec.arch, spec.hidden, data, seed=spec.seed)


def _dataset(name: str, arch: str) -> Dataset:
    return load(name, image=arch == "cnn")


def _train(model: nn.Module, data: Dataset, cfg: ExperimentConfig, seed: int) -> None:
    model.train()
    fit(model, data.X_train, data.y_train, epochs=cfg.epochs, seed=seed, lr=cfg.lr, batch_size=cfg.batch_size)
    model.eval()


def _model_key(spec: NetSpec, cfg: ExperimentConfig) -> str:
    return config_key({"spec": asdict(spec), "epochs": cfg.epochs, "lr": cfg.lr, "batch_size": cfg.batch_size,
                       "torch": torch.__version__.split("+")[0], "version": 2})


def trained_model(spec: NetSpec, cfg: ExperimentConfig, cache: ModelCache) -> tuple[nn.Module, Dataset, dict, bool]:
    """Train ``spec`` (or load it from ``cache``); returns model (eval mode), data, meta and whether cached."""
    data = _dataset(spec.dataset, spec.arch)
    model = build_spec(spec, data)

    def train() -> tuple[nn.Sequential, dict]:
        t0 = time.perf_counter()
        _train(model, data, cfg, spec.seed)
        return model, {"train_acc": accuracy(model, *data.train), "test_acc": accuracy(model, *data.test),
                       "train_seconds": time.perf_counter() - t0}

    model, meta, cached = cache.load_or_train(_model_key(spec, cfg), model, train)
    return model, data, meta, cached


@dataclass
class ExperimentResult:
    config: ExperimentConfig
    rows: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        cfg = asdict(self.config)
        cfg["nets"] = len(self.config.nets)
        return {"rows": self.rows, "config": cfg, "criterion": self.config.criterion, "seconds": self.seconds}


def run_invariance(
    cfg: ExperimentConfig,
    *,
    cache: ModelCache | None = None,
    quantities: Mapping[str, Quantity] | None = None,
    progress: Callable[[str], None] | None = None,
    remeasure: bool = False,
) -> ExperimentResult:
    """Train (or load) and measure every net of ``cfg``; one row per (dataset, arch, seed).

    With a ``cache`` folder, trained models and (for the default quantities) measured rows are
    stored atomically as they finish, so an interrupted run resumes where it stopped; ``remeasure``
    ignores stored rows.

    >>> cfg = replace(quick_config(), nets=(NetSpec("wine", "mlp", (4,), 0),), epochs=2, neuron_trials=1)
    >>> r = run_invariance(cfg)
    >>> r.rows[0]["status"]
    'invariant'
    """
    cache = cache or ModelCache(None)
    say = progress or (lambda s: None)
    t0 = time.perf_counter()
    result = ExperimentResult(cfg)
    with torch_threads(cfg.threads):
        _run_all(cfg, cache, quantities, say, t0, result, remeasure)
    result.seconds = time.perf_counter() - t0
    return result


_MEASURE_VERSION = 1
_MEASURE_FIELDS = ("measure_samples", "max_dense", "n_rescalings", "neuron_trials", "lanczos_iter", "tol_D",
                   "tol_Dplus", "moves", "dplus_route")


def measure_key(spec: NetSpec, cfg: ExperimentConfig) -> str:
    """Cache key of one net's measurements: its model key plus every setting the row depends on."""
    settings = {k: getattr(cfg, k) for k in _MEASURE_FIELDS}
    return config_key({"model": _model_key(spec, cfg), "measure": settings, "version": _MEASURE_VERSION,
                       "kind": "invariance-row"})


def _run_all(cfg, cache, quantities, say, t0, result, remeasure: bool = False) -> None:
    for i, spec in enumerate(cfg.nets, 1):
        model, data, meta, cached = trained_model(spec, cfg, cache)
        t1 = time.perf_counter()
        mkey = measure_key(spec, cfg)
        stored = None if remeasure or quantities is not None else cache.load_row(mkey)
        if stored is not None:
            row, how = stored, "cached"
        else:
            row = measure_net(model, spec, data, cfg, quantities, progress=say)
            how = "trained" if not cached else "model cached"
            row["measure_seconds"] = time.perf_counter() - t1
            if quantities is None:  # custom quantities are code, not part of the key: never cached
                cache.store_row(mkey, row)
        row.update(train_acc=meta["train_acc"], test_acc=meta["test_acc"], cached=cached,
                   train_seconds=meta["train_seconds"])
        if cfg.certify:
            n = min(cfg.measure_samples, len(data.X_train))
            row.update(certified_fields(model, data.X_train[:n], data.y_train[:n], _model_key(spec, cfg), cache,
                                        prec=cfg.certify_prec, batch_statistics=spec.arch == "mlp-bn"))
        result.rows.append(row)
        say(f"  [{i}/{len(cfg.nets)}] {spec.dataset} {spec.arch}{list(spec.hidden)} seed={spec.seed}: "
            f"{row['status']} ({how}, measured in {row['measure_seconds']:.1f}s; {time.perf_counter() - t0:.1f}s "
            "elapsed)")


def strip_timing(rows: list[dict]) -> list[dict]:
    """Rows without the timing and cache fields (what reproducibility compares)."""
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in rows]


__all__ = [
    "ARCHS", "DEFAULT_QUANTITIES", "ExperimentConfig", "ExperimentResult", "NetSpec", "build_spec",
    "default_config", "euler_residual", "measure_key", "measure_net", "quick_config", "run_invariance",
    "scale_invariant_blocks", "strip_timing", "trained_model",
]
