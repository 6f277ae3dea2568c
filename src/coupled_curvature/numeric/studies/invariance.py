"""Run a random chain of function-preserving maps and measure how each block quantity moves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from coupled_curvature.numeric.linalg.tolerance import EPS64, relative_change
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.symmetries.homogeneous import (
    function_gap,
    layer_rescale,
    layer_weight,
    permute_neurons,
    weight_layers,
)



@dataclass
class BlockChange:
    name: str
    D: float | None
    Dplus: float | None
    rq: float | None
    dD: float | None
    dDplus: float | None
    drq: float | None
    dplus_bound: float | None


class _LargestChange:
    """A computed attribute of :class:`ChainResult`: the largest of its blocks' relative change
    ``change`` (``dD``, ``dDplus`` or ``drq``), 0.0 where no block has one."""

    def __init__(self, change: str) -> None:
        self.change = change

    def __get__(self, result: ChainResult, owner: type | None = None) -> float:
        return max((v for b in result.blocks if (v := getattr(b, self.change)) is not None), default=0.0)


@dataclass
class ChainResult:
    """The maps applied, the function gap they left, and per-block changes."""

    steps: list[str]
    function_gap: float
    blocks: list[BlockChange]
    before: Diagnosis
    after: Diagnosis
    tol_D: float
    tol_Dplus: float
    notes: list[str] = field(default_factory=list)

    max_dD = _LargestChange("dD")
    max_dDplus = _LargestChange("dDplus")
    max_drq = _LargestChange("drq")

    @property
    def passed(self) -> bool:
        """D within ``tol_D``, D⁺ within ``tol_Dplus``, and the raw Rayleigh quotient moved."""
        return self.max_dD <= self.tol_D and self.max_dDplus <= self.tol_Dplus and self.max_drq > 1e-3

    def table(self) -> str:
        head = ["block", "D", "max rel ΔD", "D⁺", "max rel ΔD⁺", "ε/λmin_rel", "RQ", "rel ΔRQ"]
        f = lambda x: "-" if x is None else f"{x:.3e}"  # noqa: E731
        rows = [head] + [
            [b.name, f(b.D), f(b.dD), f(b.Dplus), f(b.dDplus), f(b.dplus_bound), f(b.rq), f(b.drq)]
            for b in self.blocks
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join(
            "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in rows
        )


def random_symmetry_chain(
    model: nn.Module, *, seed: int = 0, n_rescalings: int = 6, log10_range: float = 3.0, permute: bool = True
) -> tuple[nn.Module, list[str]]:
    """Apply ``n_rescalings`` layer-wise rescalings (``c = 10^U(−r, r)``, layers in random order) and, with
    ``permute``, a random permutation of every hidden layer. Returns the new model and the steps."""
    rng = np.random.default_rng(seed)
    n_hidden = len(weight_layers(model)) - 1
    steps = []
    order = rng.permutation(n_hidden)  # every hidden layer is rescaled when n_rescalings ≥ depth
    for k in range(n_rescalings):
        layer = int(order[k % n_hidden])
        c = float(10.0 ** rng.uniform(-log10_range, log10_range))
        model = layer_rescale(model, layer, c)
        steps.append(f"layer_rescale(layer={layer}, c={c:.6g})")
    if permute:
        for layer in range(n_hidden):
            units = layer_weight(weight_layers(model)[layer]).shape[0]
            model = permute_neurons(model, layer, rng.permutation(units).tolist())
            steps.append(f"permute_neurons(layer={layer})")
    return model, steps


def chain_check(
    model: nn.Module,
    loss_fn: Callable,
    data: tuple[torch.Tensor, torch.Tensor],
    *,
    seed: int = 0,
    n_rescalings: int = 6,
    permute: bool = True,
    inverse: bool = True,
    tol_D: float = 1e-10,
    tol_Dplus: float = 1e-5,
    progress: Callable[[str], None] | None = None,
    **diagnose_options,
) -> ChainResult:
    """Diagnose ``model``, apply :func:`random_symmetry_chain`, diagnose again and compare.

    ``dplus_bound = ε_64 / (smallest kept |λ| / max |λ|)`` is the float64 conditioning
    limit on the D⁺ change quoted beside the measurement.
    """
    say = progress or (lambda s: None)
    say("diagnosing the original model")
    before = diagnose(model, loss_fn, data, inverse=inverse, **diagnose_options)
    moved, steps = random_symmetry_chain(model, seed=seed, n_rescalings=n_rescalings, permute=permute)
    gap = function_gap(model, moved, data[0])
    say(f"applied {len(steps)} symmetry maps (function gap {gap:.2e}); diagnosing the transformed model")
    after = diagnose(moved, loss_fn, data, inverse=inverse, **diagnose_options)
    blocks = []
    for b in before:
        a = after[b.name]
        bound = None if b.min_kept_rel_eig is None else EPS64 / b.min_kept_rel_eig
        blocks.append(
            BlockChange(
                name=b.name, D=b.coupled, Dplus=b.inverse_coupled, rq=b.rayleigh,
                dD=relative_change(b.coupled, a.coupled),
                dDplus=relative_change(b.inverse_coupled, a.inverse_coupled),
                drq=relative_change(b.rayleigh, a.rayleigh), dplus_bound=bound,
            )
        )
    return ChainResult(steps, gap, blocks, before, after, tol_D, tol_Dplus)


def euler_PQ(model: nn.Module, loss_fn: Callable, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """T9's ``P = d/dt L(t f)|₁`` and ``Q = d²/dt² L(t f)|₁`` from the outputs ``f = model(X)`` alone
    (for cross-entropy ``P = E⟨p − e_y, f⟩``, ``Q = E[fᵀ(diag p − ppᵀ)f]``). For a bias-free net of
    degree 1 every layer has ``w_lᵀg_l = P`` and ``w_lᵀH_ll w_l = Q``.

    >>> net = nn.Sequential(nn.Linear(2, 2, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.copy_(torch.eye(2))
    >>> P, Q = euler_PQ(net, nn.MSELoss(reduction="sum"), torch.eye(2), torch.zeros(2, 2))
    >>> P, Q  # L(t) = t²·‖f‖² = 2t²
    (4.0, 4.0)
    """
    with torch.no_grad():
        f = model(X)
    t = torch.ones((), dtype=f.dtype, requires_grad=True)
    (dP,) = torch.autograd.grad(loss_fn(t * f, y), t, create_graph=True)
    (dQ,) = torch.autograd.grad(dP, t)
    return float(dP.detach()), float(dQ.detach())


def euler_residual(model: nn.Module, data: tuple, diagnosis: Diagnosis, loss_fn: Callable | None = None) -> float:
    """T9 (bias-free, degree 1): ``max_l max(|w_lᵀg_l − P|/|P|, |w_lᵀH_ll w_l − Q|/|Q|)`` over the
    weight blocks, ``P``, ``Q`` from :func:`euler_PQ` (``loss_fn`` defaults to mean cross-entropy).

    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False)).double()
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.arange(8) % 2
    >>> euler_residual(net, (X, y), diagnose(net, nn.CrossEntropyLoss(), (X, y), inverse=False)) < 1e-12
    True
    """
    P, Q = euler_PQ(model, loss_fn or nn.CrossEntropyLoss(), *data)
    res = 0.0
    for b in diagnosis:
        if b.name.endswith("weight"):
            changes = (relative_change(P, b.w_dot_g), relative_change(Q, b.wHw))
            res = max(res, *(math.inf if c is None else c for c in changes))  # undefined: no agreement shown
    return res
