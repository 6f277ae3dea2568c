"""The curvature-rate training experiment: arms (baseline, CRR at a sweep of scales, SAM, ASAM) trained
under seeds on Two Moons (label-flip noise) and digits, then measured.

One run is one (condition, arm, seed): a fresh model trained with Adam for ``epochs`` epochs, λ (the
curvature rate at the decision boundary) recorded after every epoch, ``D`` per block through the
:class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker` once per epoch, then the final
measurements (test error, boundary λ, ECE, ``D`` and ``D⁺`` per block, the raw top eigenvalue). Finished
runs are cached by the hash of everything that determines them, so an interrupted run resumes.
:mod:`~coupled_curvature.numeric.studies.training_summary` turns the runs into the table and the verdicts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.inputs import check_count
from coupled_curvature.numeric.core.threads import torch_threads
from coupled_curvature.numeric.measures.curvature_rate import curvature_rate
from coupled_curvature.numeric.measures.registry import evaluate
from coupled_curvature.numeric.models.cache import ModelCache, config_key
from coupled_curvature.numeric.models.datasets import Dataset, digits, moons
from coupled_curvature.numeric.models.factory import build_model, make_mlp
from coupled_curvature.numeric.studies.calibration import expected_calibration_error
from coupled_curvature.numeric.tracking.tracker import CurvatureTracker
from coupled_curvature.numeric.training.step import make_optimizer, training_step

__all__ = ["Condition", "TrainingArm", "TrainingConfig", "arm_label", "check_config", "default_config", "load_condition",
           "quick_config", "run_one", "run_training"]


@dataclass(frozen=True)
class Condition:
    """A data set and its training-label noise: ``("moons", 0.3)`` or ``("digits", 0.0)``."""

    dataset: str
    flip: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.dataset} flip {self.flip:g}" if self.dataset == "moons" else self.dataset


@dataclass(frozen=True)
class TrainingArm:
    """One training objective: ``kind`` a method of :func:`~coupled_curvature.numeric.training.step.training_step`
    (``baseline``, ``crr``, ``sam``, ``asam``); ``value`` CRR's scale or SAM's / ASAM's radius ρ."""

    kind: str
    value: float = 0.0


@dataclass(frozen=True)
class TrainingConfig:
    """Everything that determines the experiment (the cache key of a run is built from it)."""

    name: str
    conditions: tuple[Condition, ...]
    seeds: tuple[int, ...]
    crr_scales: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
    sam_rho: float = 0.05
    asam_rho: float = 0.5
    epochs: int = 25
    lr: float = 1e-2
    batch_size: int = 128
    moons_samples: int = 3000
    moons_noise: float = 0.2
    crr_orders: tuple[int, ...] = (2, 3)
    crr_points: int = 32
    band: tuple[float, float] = (0.45, 0.65)
    lambda_orders: int = 6
    lambda_points: int = 64
    probe: int = 256
    n_boot: int = 2000
    boot_seed: int = 0
    threads: int = 1
    headline_scale: float = 1e-3

    def arm_list(self) -> list[TrainingArm]:
        """Baseline, CRR at every scale, SAM and ASAM, in that order."""
        return [TrainingArm("baseline"), *(TrainingArm("crr", s) for s in self.crr_scales),
                TrainingArm("sam", self.sam_rho), TrainingArm("asam", self.asam_rho)]


def quick_config(seed: int = 0) -> TrainingConfig:
    """Three seeds, one noise level, two CRR scales, five epochs on 600 moons (well under 2 minutes)."""
    return TrainingConfig("quick", (Condition("moons", 0.3), Condition("digits")), tuple(range(seed, seed + 3)),
                          crr_scales=(1e-3, 1e-2), epochs=5, moons_samples=600, lambda_points=32, probe=128,
                          n_boot=500)


def default_config(seed: int = 0, n_seeds: int = 20) -> TrainingConfig:
    """The described protocol: moons at flip 0, 0.3, 0.45 and digits; ``n_seeds`` seeds; 25 epochs."""
    return TrainingConfig("default", (Condition("moons", 0.0), Condition("moons", 0.3), Condition("moons", 0.45),
                                      Condition("digits")), tuple(range(seed, seed + n_seeds)))


def arm_label(arm: TrainingArm) -> str:
    """``baseline``, ``CRR 0.001``, ``SAM ρ=0.05``, ``ASAM ρ=0.5``."""
    if arm.kind == "baseline":
        return "baseline"
    if arm.kind == "crr":
        return f"CRR {arm.value:g}"
    return f"{arm.kind.upper()} ρ={arm.value:g}"


def check_config(cfg: TrainingConfig) -> TrainingConfig:
    """Refuse a configuration that cannot run, before any training (``InvalidInputError``)."""
    for v, what in ((cfg.epochs, "epochs"), (cfg.batch_size, "batch_size"), (cfg.lambda_points, "lambda_points"),
                    (cfg.probe, "probe"), (cfg.n_boot, "n_boot"), (cfg.crr_points, "crr_points")):
        check_count(v, what, 1)
    if not cfg.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in cfg.seeds):
        raise InvalidInputError(f"seeds must be a non-empty tuple of ints ≥ 0, got {cfg.seeds!r}")
    if not cfg.conditions:
        raise InvalidInputError("conditions must name at least one data set")
    for c in cfg.conditions:
        if c.dataset not in ("moons", "digits") or not 0.0 <= c.flip < 0.5 or (c.dataset == "digits" and c.flip):
            raise InvalidInputError(f"a condition is ('moons', flip in [0, 0.5)) or ('digits', 0), got {c!r}")
    for rate, what in ((cfg.lr, "lr"), (cfg.sam_rho, "sam_rho"), (cfg.asam_rho, "asam_rho")):
        if not (math.isfinite(rate) and rate > 0):
            raise InvalidInputError(f"{what} must be a finite number > 0, got {rate!r}")
    if any(not (math.isfinite(s) and s > 0) for s in cfg.crr_scales):
        raise InvalidInputError(f"crr_scales must be finite and > 0 (scale 0 is the baseline arm), got {cfg.crr_scales}")
    lo, hi = cfg.band
    if not 0.0 <= lo < hi <= 1.0:
        raise InvalidInputError(f"band must be 0 ≤ lo < hi ≤ 1 (top-class probabilities), got {cfg.band}")
    if cfg.lambda_orders < 2:
        raise InvalidInputError(f"lambda_orders must be ≥ 2, got {cfg.lambda_orders}")
    return cfg


def load_condition(cfg: TrainingConfig, cond: Condition, seed: int) -> Dataset:
    """The data of one run: moons drawn from ``seed`` (data, split and flipped labels), or digits as 8×8 images."""
    if cond.dataset == "moons":
        return moons(n_samples=cfg.moons_samples, noise=cfg.moons_noise, flip=cond.flip, seed=seed)
    return digits(image=True)


def _model(cond: Condition, seed: int) -> nn.Module:
    if cond.dataset == "moons":
        return make_mlp(2, [64, 64], 2, activation="tanh", seed=seed)
    return build_model("cnn", (8, 16), 1, 10, seed=seed, image_side=8)


def _boundary(model: nn.Module, X: torch.Tensor, y: torch.Tensor, band: tuple[float, float]):
    with torch.no_grad():
        top = torch.softmax(model(X), dim=1).max(dim=1).values
    keep = (top >= band[0]) & (top <= band[1])
    return X[keep], y[keep]


def _lambda(model: nn.Module, X: torch.Tensor, y: torch.Tensor, cfg: TrainingConfig, seed: int) -> tuple[float | None, int]:
    """λ at the decision boundary (test points whose top probability lies in ``cfg.band``) and how many."""
    Xb, yb = _boundary(model, X, y, cfg.band)
    if Xb.shape[0] == 0:
        return None, 0
    r = curvature_rate(model, nn.CrossEntropyLoss(), (Xb, yb), orders=cfg.lambda_orders,
                       points=cfg.lambda_points, seed=seed)
    return r.value, min(int(Xb.shape[0]), cfg.lambda_points)


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _measure(model: nn.Module, data: Dataset, cfg: TrainingConfig, final: tuple[float | None, int]) -> dict:
    """The final measurements; ``final`` is the last epoch's boundary λ and its point count."""
    loss = nn.CrossEntropyLoss()
    X, y = data.test
    with torch.no_grad():
        probs = torch.softmax(model(X), dim=1)
    lam, n_band = final
    probe = (data.X_train[: cfg.probe], data.y_train[: cfg.probe])
    # D⁺ by the exact routes only (Gram, or dense up to 1024 parameters): the 4096-parameter hidden tanh
    # block of the moons MLP would cost a 4096-column dense Hessian per run; its D⁺ is left out with the reason
    d = diagnose(model, loss, probe, inverse=True, max_dense=1024, progress=False)
    D = {b.name: _finite(b.coupled) for b in d}
    Dp = {b.name: _finite(b.inverse_coupled) for b in d}
    Dp_missing = {b.name: b.method_reason for b in d if b.inverse_coupled is None}
    top = evaluate("top_eig", model, loss, probe)
    return {"test_error": float((probs.argmax(dim=1) != y).double().mean()),
            "ece": expected_calibration_error(probs, y, bins=10),
            "lambda_boundary": _finite(lam), "boundary_points": n_band,
            "D": D, "Dplus": Dp, "Dplus_missing": Dp_missing, "top_eig": _finite(float(top["value"]))}


def run_one(cfg: TrainingConfig, cond: Condition, arm: TrainingArm, seed: int,
            cache: ModelCache | None = None, remeasure: bool = False) -> dict:
    """Train and measure one (condition, arm, seed), or read it from ``cache``; returns the run's row."""
    cache = cache or ModelCache(None)
    settings = {k: v for k, v in asdict(cfg).items() if k not in ("name", "conditions", "seeds", "crr_scales",
                                                                    "n_boot", "boot_seed", "threads",
                                                                    "headline_scale", "sam_rho", "asam_rho")}
    key = config_key({"kind": "training-experiment", "condition": asdict(cond), "arm": asdict(arm), "seed": seed,
                      "settings": settings})
    stored = None if remeasure else cache.load_row(key)
    if stored is not None:
        return {**stored, "cached": True}
    data = load_condition(cfg, cond, seed)
    model = _model(cond, seed)
    loss = nn.CrossEntropyLoss()
    opt = make_optimizer(model, arm.kind, lr=cfg.lr, rho=arm.value if arm.kind in ("sam", "asam") else None)
    directions = torch.Generator().manual_seed(seed + 2)  # CRR's direction stream, one per run
    X, y = data.train
    n_batches = math.ceil(len(X) / cfg.batch_size)
    probe = (data.X_train[: cfg.probe], data.y_train[: cfg.probe])
    tracker = CurvatureTracker(model, loss, probe, every=n_batches)
    gen = torch.Generator().manual_seed(seed + 1)
    t0, step = time.perf_counter(), 0
    final = _lambda(model, data.X_test, data.y_test, cfg, seed)
    lam_curve = [_finite(final[0])]
    tracker.step(0)
    for _epoch in range(cfg.epochs):
        model.train()
        order = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), cfg.batch_size):
            idx = order[start: start + cfg.batch_size]
            training_step(model, loss, X[idx], y[idx], opt, arm.kind, crr_scale=arm.value or 1.0,
                          crr_orders=cfg.crr_orders, crr_points=cfg.crr_points, generator=directions)
            step += 1
        model.eval()
        tracker.step(step)
        final = _lambda(model, data.X_test, data.y_test, cfg, seed)
        lam_curve.append(_finite(final[0]))
    tracker.close()
    train_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    row = {"condition": cond.label, "dataset": cond.dataset, "flip": cond.flip, "arm": arm_label(arm),
           "arm_kind": arm.kind, "arm_value": arm.value, "seed": seed, **_measure(model, data, cfg, final),
           "lambda_curve": lam_curve,
           "D_curve": [{k[2:]: v for k, v in r.items() if k.startswith("D/")} for r in tracker.history],
           "piecewise_linear": cond.dataset == "digits",
           "train_seconds": train_seconds, "measure_seconds": time.perf_counter() - t1}
    cache.store_row(key, row)
    return {**row, "cached": False}


def _worker_run(args: tuple) -> dict:
    """One run in a worker process, with the configuration's torch thread count."""
    cfg, cond, arm, seed, folder, remeasure = args
    with torch_threads(cfg.threads):
        return run_one(cfg, cond, arm, seed, ModelCache(folder), remeasure)


def run_training(cfg: TrainingConfig, *, cache: ModelCache | None = None,
                 progress: Callable[[str], None] | None = None, remeasure: bool = False, jobs: int = 1) -> list[dict]:
    """Every (condition, arm, seed) of ``cfg``: a list of run rows in that order (see :func:`run_one`).

    ``jobs > 1`` trains that many runs at a time in worker processes (each with ``cfg.threads`` torch
    threads); every run seeds itself, so the rows are the same bits whatever ``jobs`` is.

    >>> cfg = replace(quick_config(), conditions=(Condition("moons", 0.3),), seeds=(0,), epochs=1,
    ...               crr_scales=(1e-2,), moons_samples=200, lambda_points=8, probe=32)
    >>> rows = run_training(cfg)
    >>> [r["arm"] for r in rows]
    ['baseline', 'CRR 0.01', 'SAM ρ=0.05', 'ASAM ρ=0.5']
    """
    check_config(cfg)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidInputError(f"jobs must be an int ≥ 1 (processes training at once), got {jobs!r}")
    cache = cache or ModelCache(None)
    say = progress or (lambda s: None)
    runs = [(c, a, s) for c in cfg.conditions for a in cfg.arm_list() for s in cfg.seeds]
    rows: list[dict | None] = [None] * len(runs)
    t0 = time.perf_counter()

    def done(i: int, row: dict) -> None:
        rows[i] = row
        cond, arm, seed = runs[i]
        lam = row["lambda_boundary"]
        say(f"  [{sum(r is not None for r in rows)}/{len(runs)}] {cond.label}, {arm_label(arm)}, seed {seed}: "
            f"{'cached' if row['cached'] else 'trained'}; test error {row['test_error']:.3f}, "
            f"λ {'–' if lam is None else round(lam, 3)}; {time.perf_counter() - t0:.0f}s so far")

    if jobs == 1:
        with torch_threads(cfg.threads):
            for i, (cond, arm, seed) in enumerate(runs):
                done(i, run_one(cfg, cond, arm, seed, cache, remeasure))
        return rows  # type: ignore[return-value]
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_worker_run, (cfg, c, a, s, cache.folder, remeasure)): i
                   for i, (c, a, s) in enumerate(runs)}
        for f in as_completed(futures):
            done(futures[f], f.result())
    return rows  # type: ignore[return-value]
