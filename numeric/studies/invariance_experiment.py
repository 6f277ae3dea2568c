"""The invariance experiment: train many nets, apply symmetry chains, tabulate what moves.

For every (dataset, architecture, seed) a net is trained to a fixed, stated criterion (Adam, fixed
learning rate, batch size and number of epochs; no early stopping), then measured on a fixed
subset of its training data:

* ``max_rel_change_D`` / ``max_rel_change_Dplus``: ``max_b |X_b(T θ) − X_b(θ)| / |X_b(θ)|`` over every
  tensor block ``b`` (``D⁺`` only on blocks of at most ``max_dense`` parameters), ``T`` a random chain
  of layer-wise rescalings (``c = 10^U(−3, 3)``, every hidden layer at least once) and permutations
  of every hidden layer;
* ``neuron_control_median`` / ``_min``: the same figure for ``D`` under random neuron-wise rescalings
  (the negative control, T5: not conformal, ``D`` must move), median and minimum over trials;
* ``rq_change`` and ``top_eig_change``: the same for the Rayleigh quotient and the Hessian's top
  eigenvalue (Lanczos), which are not invariant (T3) and must move;
* ``t9_residual`` (bias-free nets): ``max_l max(|w_lᵀg_l − P|/|P|, |w_lᵀH_ll w_l − Q|/|Q|)`` with
  ``P = d/dt L(t f)|₁``, ``Q = d²/dt² L(t f)|₁`` computed from the outputs ``f`` alone (T9, ``k = 1``);
* blocks whose loss is unchanged when the block is doubled are scale-invariant (T10: ``D ≡ 0``); a
  net with such blocks is reported ``degenerate (T10)``, never ``invariant``.

``D⁺`` of the ReLU and LeakyReLU MLPs (with or without biases) comes from exact per-sample factors
``H_bb = BᵀB`` (:func:`numeric.factors.with_factor_dplus`, checked block by block against autograd's
``wᵀHw``): an eigendecomposition of size ``min(n_b, N(C − 1))`` per block, so every block gets ``D⁺``.
The CNN and BatchNorm nets go through :func:`diagnose` with dense blocks of at most ``max_dense``.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.models.cache import ModelCache, config_key
from coupled_curvature.numeric.models.datasets import Dataset, load
from coupled_curvature.numeric.core.compare import EPS64, relative_change
from coupled_curvature.numeric.core.threads import torch_threads
from coupled_curvature.numeric.core.diagnostics import BlockDiagnosis, Diagnosis, diagnose
from coupled_curvature.numeric.factors.relu_mlp import with_factor_dplus
from coupled_curvature.numeric.studies.invariance import euler_residual, random_symmetry_chain
from coupled_curvature.numeric.measures.hessian import top_eigenvalue
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, neuron_rescale, weight_layers
from coupled_curvature.numeric.symmetries.reparam import bn_rescale
from coupled_curvature.numeric.models.factory import build_for
from coupled_curvature.numeric.models.training import accuracy, fit

ARCHS = ("mlp", "mlp-nobias", "mlp-leaky", "cnn", "mlp-bn")  # kinds of the one vocabulary (models.factory)
FACTOR_ARCHS = ("mlp", "mlp-nobias", "mlp-leaky")  # Linear/(leaky) ReLU Sequentials: exact factors H = BᵀB
DPLUS_ROUTES = ("factor", "diagnose")
TIMING_FIELDS = ("train_seconds", "measure_seconds", "cached")  # stripped when comparing tables

Quantity = Callable[[BlockDiagnosis], "float | None"]
DEFAULT_QUANTITIES: dict[str, Quantity] = {
    "D": lambda b: b.coupled,
    "Dplus": lambda b: b.inverse_coupled,
    "RQ": lambda b: b.rayleigh,
}


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
    key = _model_key(spec, cfg)
    model = build_spec(spec, data)
    entry = cache.load(key)
    if entry is not None:
        model.load_state_dict(entry["state"])
        model.eval()
        return model, data, dict(entry["meta"]), True
    t0 = time.perf_counter()
    _train(model, data, cfg, spec.seed)
    meta = {"train_acc": accuracy(model, *data.train), "test_acc": accuracy(model, *data.test),
            "train_seconds": time.perf_counter() - t0}
    cache.store(key, model.state_dict(), meta)
    return model, data, meta, False


# ---------------------------------------------------------------------------- measurements


def _max_change(before: Diagnosis, after: Diagnosis, q: Quantity, skip: set[str]) -> float | None:
    changes = [relative_change(q(b), q(after[b.name])) for b in before if b.name not in skip]
    changes = [c for c in changes if c is not None]
    return max(changes) if changes else None


def scale_invariant_blocks(model: nn.Module, data: tuple, train_mode: bool) -> list[str]:
    """Blocks ``b`` with ``|L(2w_b) − L(w_b)| ≤ 1e-9·|L|`` (T10: then ``wᵀg = wᵀHw = D = 0``)."""
    net = copy.deepcopy(model).train(train_mode)
    loss_fn = nn.CrossEntropyLoss()
    out = []
    with torch.no_grad():
        base = float(loss_fn(net(data[0]), data[1]))
        for name, p in net.named_parameters():
            p.mul_(2.0)
            moved = float(loss_fn(net(data[0]), data[1]))
            p.div_(2.0)
            if abs(moved - base) <= 1e-9 * abs(base):
                out.append(name)
    return out


def _bn_chain(model: nn.Module, rng: np.random.Generator, X: torch.Tensor) -> tuple[nn.Module, list[str]]:
    """Rescale each weight layer feeding a batch-statistics BatchNorm by ``c = 10^U(−3, 3)`` (T10's
    symmetry, :func:`~coupled_curvature.numeric.symmetries.reparam.bn_rescale`)."""
    mods = list(model)
    at = [next(j for j, mod in enumerate(mods) if mod is m) for m in weight_layers(model)]  # module index per layer
    steps = []
    for layer, i in enumerate(at):
        if i + 1 < len(mods) and isinstance(mods[i + 1], nn.BatchNorm1d):
            c = float(10.0 ** rng.uniform(-3, 3))
            model = bn_rescale(model, layer, c, X).model
            steps.append(f"bn_rescale(module={i}, c={c:.6g})")
    return model, steps


def _verdict(change: float | None, tol: float, moves: float) -> str:
    if change is None:
        return "n/a"
    if change <= tol:
        return "invariant"
    return "moves" if change > moves else "inconclusive"


def measure_net(
    model: nn.Module,
    spec: NetSpec,
    data: Dataset,
    cfg: ExperimentConfig,
    quantities: Mapping[str, Quantity] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """All figures of one trained net (see the module docstring); deterministic under ``spec.seed``.

    ``progress`` receives a line per stage once the net has taken more than 20 s (long nets only)."""
    quantities = dict(DEFAULT_QUANTITIES if quantities is None else quantities)
    started = time.perf_counter()

    def stage(what: str) -> None:
        elapsed = time.perf_counter() - started
        if progress is not None and elapsed > _STAGE_LINES_AFTER_S:
            progress(f"      {spec.dataset} {spec.arch}{list(spec.hidden)}: {what} ({elapsed:.0f}s)")
    n = min(cfg.measure_samples, len(data.X_train))
    sample = (data.X_train[:n], data.y_train[:n])
    loss_fn = nn.CrossEntropyLoss()
    bn = spec.arch == "mlp-bn"
    net = copy.deepcopy(model).train(bn)  # BatchNorm measured with batch statistics (T10's setting)
    degenerate = scale_invariant_blocks(net, sample, bn)
    # the changes skip scale-invariant blocks, so their dense D⁺ (Hessian-vector columns in train mode) is not built
    sizes = [p.numel() for name, p in net.named_parameters() if name not in degenerate]
    opts = {"max_dense": min(cfg.max_dense, max(sizes, default=0)) if degenerate else cfg.max_dense,
            "allow_train_mode": bn}
    rng = np.random.default_rng([spec.seed, 7])
    by_factor = cfg.dplus_route == "factor" and spec.arch in FACTOR_ARCHS

    def diagnosis(m: nn.Module) -> Diagnosis:
        if by_factor:  # every block, exactly, at the cost of an eigendecomposition of size min(n_b, N(C − 1))
            return with_factor_dplus(diagnose(m, loss_fn, sample, inverse=False, **opts), m, sample[0])
        return diagnose(m, loss_fn, sample, inverse=True, **opts)

    before = diagnosis(net)
    stage("D and D⁺ of the trained net done; now the symmetry chain")
    if bn:
        moved, steps = _bn_chain(net, rng, sample[0])
    else:
        n_hidden = len(weight_layers(net)) - 1
        moved, steps = random_symmetry_chain(net, seed=int(rng.integers(2**31)),
                                             n_rescalings=max(cfg.n_rescalings, 2 * n_hidden), permute=True)
    after = diagnosis(moved)
    stage("D and D⁺ after the chain done; now the top eigenvalues")
    changes = {k: _max_change(before, after, q, set(degenerate)) for k, q in quantities.items()}
    tols = {"D": cfg.tol_D, "Dplus": cfg.tol_Dplus}
    verdicts = {k: _verdict(v, tols.get(k, cfg.tol_D), cfg.moves) for k, v in changes.items()}
    if degenerate:
        for k in ("D", "Dplus"):
            if k in verdicts:
                verdicts[k] = "degenerate (T10)"

    eig_before = top_eigenvalue(net, loss_fn, sample, max_iter=cfg.lanczos_iter, seed=0, allow_train_mode=bn)
    eig_after = top_eigenvalue(moved, loss_fn, sample, max_iter=cfg.lanczos_iter, seed=0, allow_train_mode=bn)
    top_change = relative_change(eig_before["value"], eig_after["value"])

    control = []
    if not bn:
        hidden_layers = range(len(weight_layers(net)) - 1)
        for trial in range(cfg.neuron_trials):
            stage(f"neuron-rescaling control {trial + 1}/{cfg.neuron_trials}")
            scaled = net
            for layer in hidden_layers:
                units = weight_layers(scaled)[layer].weight.shape[0]
                scaled = neuron_rescale(scaled, layer, 10.0 ** rng.uniform(-1, 1, size=units))
            d = diagnose(scaled, loss_fn, sample, inverse=False, **opts)
            control.append(_max_change(before, d, DEFAULT_QUANTITIES["D"], set(degenerate)))
    control = [c for c in control if c is not None]

    bounds = [EPS64 / b.min_kept_rel_eig for b in before if b.min_kept_rel_eig]
    row = {
        "dataset": spec.dataset,
        "arch": spec.arch,
        "hidden": list(spec.hidden),
        "seed": spec.seed,
        "params": sum(p.numel() for p in model.parameters()),
        "blocks": len(before),
        "blocks_with_Dplus": sum(1 for b in before if b.inverse_coupled is not None),
        "dplus_route": "factor" if by_factor else f"dense blocks ≤ {cfg.max_dense}",
        "measure_samples": n,
        "max_rel_change_D": changes.get("D"),
        "max_rel_change_Dplus": changes.get("Dplus"),
        "neuron_control_median": statistics.median(control) if control else None,
        "neuron_control_min": min(control) if control else None,
        "rq_change": changes.get("RQ"),
        "top_eig_change": top_change,
        "t9_residual": euler_residual(net, sample, before) if spec.arch == "mlp-nobias" else None,
        "function_gap": function_gap(net, moved, sample[0]),
        "dplus_conditioning_bound": max(bounds) if bounds else None,
        "degenerate_blocks": degenerate,
        "chain": steps,
        "changes": changes,
        "verdicts": verdicts,
    }
    row["status"] = _status(row, cfg)
    return row


def _status(row: dict, cfg: ExperimentConfig) -> str:
    if row["degenerate_blocks"]:
        return "degenerate (T10)"
    v = row["verdicts"]
    raw_moves = (row["rq_change"] or 0.0) > cfg.moves
    if v.get("D") == "invariant" and v.get("Dplus") in ("invariant", "n/a") and raw_moves:
        return "invariant"
    if "moves" in (v.get("D"), v.get("Dplus")):
        return "moves"
    return "inconclusive"


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
_STAGE_LINES_AFTER_S = 20.0  # a net measured for longer than this reports its stages
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
        entry = None if remeasure or quantities is not None else cache.load(mkey)
        if entry is not None and isinstance(entry["meta"].get("row"), dict):
            row, how = dict(entry["meta"]["row"]), "cached"
        else:
            row = measure_net(model, spec, data, cfg, quantities, progress=say)
            how = "trained" if not cached else "model cached"
            row["measure_seconds"] = time.perf_counter() - t1
            if quantities is None:  # custom quantities are code, not part of the key: never cached
                cache.store(mkey, {}, {"row": row})
        row.update(train_acc=meta["train_acc"], test_acc=meta["test_acc"], cached=cached,
                   train_seconds=meta["train_seconds"])
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
