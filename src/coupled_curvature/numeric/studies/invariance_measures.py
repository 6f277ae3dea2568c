"""The invariance experiment's measurements of one trained net (:func:`measure_net`), on a fixed
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
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from coupled_curvature.numeric.linalg.tolerance import EPS64, relative_change
from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.factors.relu_mlp import with_factor_dplus
from coupled_curvature.numeric.measures.hessian import top_eigenvalue
from coupled_curvature.numeric.models.datasets import Dataset
from coupled_curvature.numeric.studies.invariance import euler_residual, random_symmetry_chain
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, layer_weight, neuron_rescale, weight_layers
from coupled_curvature.numeric.symmetries.reparam import bn_rescale

if TYPE_CHECKING:
    from coupled_curvature.numeric.studies.invariance_experiment import ExperimentConfig, NetSpec

__all__ = ["DEFAULT_QUANTITIES", "FACTOR_ARCHS", "Quantity", "measure_net", "scale_invariant_blocks"]

FACTOR_ARCHS = ("mlp", "mlp-nobias", "mlp-leaky")  # Linear/(leaky) ReLU Sequentials: exact factors H = BᵀB
_STAGE_LINES_AFTER_S = 20.0  # a net measured for longer than this reports its stages

Quantity = Callable[[BlockDiagnosis], "float | None"]
DEFAULT_QUANTITIES: dict[str, Quantity] = {
    "D": lambda b: b.coupled,
    "Dplus": lambda b: b.inverse_coupled,
    "RQ": lambda b: b.rayleigh,
}


def _max_change(before: Diagnosis, after: Diagnosis, q: Quantity, skip: set[str]) -> float | None:
    changes = [relative_change(q(b), q(after[b.name])) for b in before if b.name not in skip]
    defined = [c for c in changes if c is not None]
    return max(defined) if defined else None


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
    assert isinstance(model, nn.Sequential)  # the mlp-bn nets (weight_layers below refuses anything else)
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
    opts: dict[str, Any] = {"max_dense": min(cfg.max_dense, max(sizes, default=0)) if degenerate else cfg.max_dense,
            "allow_train_mode": bn, "method": "dense"}
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

    control: list[float | None] = []
    if not bn:
        hidden_layers = range(len(weight_layers(net)) - 1)
        for trial in range(cfg.neuron_trials):
            stage(f"neuron-rescaling control {trial + 1}/{cfg.neuron_trials}")
            scaled = net
            for layer in hidden_layers:
                units = layer_weight(weight_layers(scaled)[layer]).shape[0]
                scaled = neuron_rescale(scaled, layer, (10.0 ** rng.uniform(-1, 1, size=units)).tolist())
            d = diagnose(scaled, loss_fn, sample, inverse=False, **opts)
            control.append(_max_change(before, d, DEFAULT_QUANTITIES["D"], set(degenerate)))
    controls = [c for c in control if c is not None]

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
        "neuron_control_median": statistics.median(controls) if controls else None,
        "neuron_control_min": min(controls) if controls else None,
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
