"""Exact ``wᵀH_bbw`` and ``wᵀH_bb⁺w`` of any network that is piecewise affine in a block: the Gram route.

If the outputs ``f_n`` of sample ``n`` are affine in block ``b`` near ``θ`` (Linear, Conv, (leaky)
ReLU, pooling, eval-mode BatchNorm, residual additions, flatten), their second derivative inside the
block vanishes and, with ``J_n = ∂f_n/∂w_b`` and ``S_n = ∂²L/∂f_n²`` (the output Hessian of the loss,
block-diagonal over samples when the loss is a sum of per-sample terms)::

    H_bb = Σ_n J_nᵀ S_n J_n + Σ_n Σ_k (∂L/∂f_nk) ∇²_bb f_nk = Σ_n J_nᵀ A_nᵀ A_n J_n = BᵀB,

with ``S_n = A_nᵀA_n`` and ``B`` stacking the rows ``A_nJ_n`` (``m = N·r`` of them;
:mod:`.outputs` factors ``S_n``, :mod:`.rows` computes the rows). On the side of the smaller
matrix, ``G = BBᵀ`` (``m × m``) or ``H = BᵀB`` (:mod:`.forms`), with ``u = Bw``::

    wᵀHw = ‖u‖²,      wᵀH⁺_τ w = Σ_{λ_i(G) > τ} (q_iᵀu)² / λ_i(G)²,      τ = rtol·λ_max(G),

exactly, for any block size. ``S_n`` comes from autograd on the loss, so batch weights and the
reduction are built in. Chunks (a block's columns are split when it alone is too big) keep the
rows held at once under ``memory_budget`` bytes.

Before a block's value is trusted, :func:`gram_forms` proves the route applies there: on the first
``check_samples`` samples the outputs' second directional derivative along ``w_b`` and along two random
in-block directions (projected on a random Gaussian ``v``: :func:`second_derivative_ratios`) is at most
``1e-8`` of the first derivative,
and ``‖u‖²`` reproduces the engine's ``wᵀHw`` (all samples: the tangent route's, or a Hessian-vector
product's) to ``1e-8`` relative. A block that fails
gets a reason instead of a form.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.calling import Inputs, take_samples
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.forms import columns_gram, factor_side, factor_spectrum, reproduces_wHw
from coupled_curvature.numeric.factors.layers import layer_rows, linear_module_of
from coupled_curvature.numeric.factors.outputs import OutputFactors, output_factors
from coupled_curvature.numeric.factors.patch_gram import patch_gram, patch_gram_cost, rows_cost
from coupled_curvature.numeric.factors.rows import block_rows
from coupled_curvature.numeric.layer_capabilities import train_mode_coupled
from coupled_curvature.numeric.linalg.pinv import PinvForm
from coupled_curvature.base.run_settings import DEFAULTS

if TYPE_CHECKING:
    from coupled_curvature.numeric.distributed import RankCollective

#: the rows ``B`` held at once stay under this many bytes by default
MEMORY_BUDGET: int = DEFAULTS["gram_memory"]  # type: ignore[assignment]
#: the second-derivative check runs on this many samples of the first batch by default
CHECK_SAMPLES = 4
SECOND_DERIVATIVE_RTOL = 1e-8


@dataclass(frozen=True, kw_only=True)
class GramForm(PinvForm):
    """One block by the Gram route: the :class:`~coupled_curvature.numeric.linalg.pinv.PinvForm` of
    ``wᵀH⁺_τw``, with ``wHw = ‖Bw‖²``; ``side`` is ``"gram"`` (``m × m`` matrix ``G = BBᵀ``) or ``"factor"``
    (``n_b × n_b`` matrix ``BᵀB``, when ``n_b ≤ m``); ``second_derivative`` the largest ``‖f''‖/‖f'‖`` the check
    found (``None`` where it did not run) and ``affinity`` how the outputs were found affine in the block (the
    premise of ``H_bb = BᵀB``)."""

    wHw: float
    side: str
    rows: int
    second_derivative: float | None
    evals: np.ndarray
    weights: np.ndarray
    affinity: str = ""


@dataclass(frozen=True)
class GramResult:
    """``form`` when the route applies to the block, else ``reason`` says why not."""

    form: GramForm | None
    reason: str | None


def second_derivative_ratios(objective: Objective, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
                             X: Inputs, seed: int = 0) -> dict[str, float]:
    """Per block: ``max_d |vᵀ∂²_t f(θ + t·d)| / (‖v‖·‖∂_t f(θ + t·d)‖)`` at ``t = 0`` over ``d = w_b``
    and two random in-block directions (each scaled to ``‖w_b‖``), on inputs ``X``, for one random
    Gaussian projection ``v`` of the outputs: 0 when ``f`` is affine in the block, and, when it is
    not, non-zero with probability one.

    One graph of ``s = vᵀf(θ)`` with ``∇s`` retained (``create_graph=True``); per block one batched
    backward of ``∇_b s · d`` into ``(w_b, v)`` gives ``∇²_bb s · d`` (so ``vᵀf''[d, d] = dᵀ∇²_bb s d``)
    and ``J_b d`` at once. (Forward-over-forward ``jvp`` of ``jvp`` gives the same numbers but cost about
    ten forward passes per direction through float64 convolutions.)

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X = torch.randn(3, 2, dtype=torch.float64)
    >>> for act in (nn.ReLU(), nn.Tanh()):
    ...     _ = torch.manual_seed(0); net = nn.Sequential(nn.Linear(2, 4), act, nn.Linear(4, 2)).double()
    ...     ob = Objective(net, nn.MSELoss(), prepare_batches((X, X), nn.MSELoss()))
    ...     r = second_derivative_ratios(ob, {"0.weight": ["0.weight"], "2.weight": ["2.weight"]}, ["0.weight", "2.weight"], X)
    ...     print(type(act).__name__, r["0.weight"] > 1e-8, r["2.weight"] > 1e-8)
    ReLU False False
    Tanh True False
    """
    gen = torch.Generator().manual_seed(seed)
    names = [m for b in blocks for m in partition[b]]
    leaves = {n: v.clone().requires_grad_(n in names) for n, v in objective.values.items()}
    with torch.enable_grad():
        out = objective.forward(leaves, X)
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype).requires_grad_(True)
        grads = dict(zip(names, torch.autograd.grad((v * out).sum(), [leaves[m] for m in names], create_graph=True,
                                                    allow_unused=True)))
    ratios = {}
    for block in blocks:
        members = partition[block]
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        norm = float(w.norm()) or 1.0
        dirs = [w] + [torch.randn(w.shape, generator=gen, dtype=w.dtype) for _ in range(2)]
        D = torch.stack([d * (norm / (float(d.norm()) or 1.0)) for d in dirs])
        live = [m for m in members if grads[m] is not None and grads[m].requires_grad]
        if not live:  # the outputs do not depend on the block at all
            ratios[block] = 0.0
            continue
        offsets = dict(zip(members, torch.split(D, [objective.values[m].numel() for m in members], dim=1)))
        cot = [offsets[m].reshape((3, *objective.values[m].shape)) for m in live]
        res = torch.autograd.grad([grads[m] for m in live], [leaves[m] for m in members] + [v], cot, retain_graph=True,
                                  allow_unused=True, is_grads_batched=True)
        hv = torch.cat([torch.zeros(3, objective.values[m].numel(), dtype=w.dtype, device=w.device) if r is None else r.reshape(3, -1)
                        for m, r in zip(members, res[:-1])], dim=1)
        second = (hv * D).sum(dim=1).abs()
        first = float(v.detach().norm()) * res[-1].reshape(3, -1).norm(dim=1)
        ratio = torch.where(first > 0, second / first.clamp(min=1e-300),
                            torch.where(second > 0, torch.full_like(second, float("inf")), torch.zeros_like(second)))
        ratios[block] = float(ratio.max())
    return ratios


@dataclass
class _Acc:
    """Per block: ``G`` (or ``BᵀB`` on the factor side) and ``u = Bw``, summed over chunks."""

    side: str
    mat: Tensor
    u: list[Tensor]


def gram_forms(
    objective: Objective,
    partition: Mapping[str, Sequence[str]],
    wHw: Mapping[str, float] | None,
    *,
    rtol: float,
    memory_budget: int = MEMORY_BUDGET,
    check_samples: int = CHECK_SAMPLES,
    force: bool = False,
    collective: RankCollective | None = None,
    affine: Collection[str] = (),
) -> dict[str, GramResult]:
    """``wᵀH_bb⁺w = Σ_{λ_i(G) > τ} (q_iᵀu)²/λ_i(G)²`` and ``wᵀH_bbw = ‖u‖²`` (``u = B_bw``,
    ``G = B_bB_bᵀ``, ``τ = rtol·λ_max``) for every block of ``partition`` where the route applies.

    ``wHw`` holds the engine's ``wᵀH_bbw`` per block (the check ``‖u‖² = wᵀHw``: from the tangent route,
    whose affinity is read off the autograd graph and whose samples are checked independent, or from a
    Hessian-vector product where that route does not take the block); ``force=True`` skips
    both checks (a negative control: on a network that is not piecewise affine the value is wrong).
    ``affine`` names blocks whose affinity is already established for every sample (the tangent route
    read it off the autograd graph): the numeric second-derivative check skips them.
    A block whose checks fail, or a model the route cannot take, gets a :class:`GramResult` with a
    ``reason``. ``collective`` (a :class:`~coupled_curvature.numeric.distributed.RankCollective`) runs
    the route over data-parallel ranks: ``BᵀB`` and ``‖Bw‖²`` are sums over ranks (all-reduce), the rows
    of ``B`` for ``G = BBᵀ`` are gathered from every rank chunk by chunk within ``memory_budget``, and
    every verdict (a refusal, the second-derivative check) is the same on every rank.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> torch.manual_seed(0); net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    <torch._C.Generator object at ...>
    >>> X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> res = gram_forms(ob, {"0.weight": ["0.weight"]}, None, rtol=1e-10, force=True)
    >>> res["0.weight"].form.side, res["0.weight"].form.rows  # m = N·(C − 1) = 5 < 12 parameters
    ('gram', 5)
    """
    names = list(partition)
    bad = [n for n, _ in train_mode_coupled(objective.model)]
    if bad:
        return _refuse(names, f"module {bad[0]!r} is in train mode (samples are coupled through the batch)")

    def agree(reason: str | None) -> str | None:  # one verdict on every rank: the first rank's that has one
        if collective is None:
            return reason
        said = [(r, why) for r, why in enumerate(collective.objects(reason)) if why is not None]
        return None if not said else said[0][1] if said[0][0] == 0 else f"rank {said[0][0]}: {said[0][1]}"

    factors, why = [], None
    try:
        factors = [output_factors(objective, i) for i in range(len(objective.batches))]
    except ValueError as e:
        why = str(e)
    why = agree(why)
    if why is not None:
        return _refuse(names, why)
    out: dict[str, GramResult] = {}
    ratios: dict[str, float | None] = {}
    if force:
        ratios = dict.fromkeys(names)
    else:
        why = None
        try:
            checked = [b for b in names if b not in affine]
            ratios = dict.fromkeys(names)
            if checked:
                ratios.update(second_derivative_ratios(objective, partition, checked,
                                                       take_samples(objective.batches[0].X, slice(0, check_samples))))
        except (RuntimeError, NotImplementedError) as e:
            why = f"the second-derivative check failed to run ({str(e).splitlines()[0]})"
        why = agree(why)
        if why is not None:
            return _refuse(names, why)
        if collective is not None:  # the largest ratio any rank saw
            ratios = {b: max(r[b] for r in collective.objects(ratios)) for b in names}
        for block, ratio in ratios.items():
            if ratio is not None and not ratio <= SECOND_DERIVATIVE_RTOL:
                out[block] = GramResult(None, f"the outputs are not affine in the block (|vᵀf''|/‖v‖‖f'‖ = "
                                              f"{ratio:.2e} > {SECOND_DERIVATIVE_RTOL:g} along w or a random direction)")
    todo = [b for b in names if b not in out]
    why, accs = None, {}
    try:
        accs = _assemble(objective, partition, todo, factors, memory_budget, collective)
    except (RuntimeError, ValueError, NotImplementedError) as e:
        why = f"the per-sample Jacobians could not be computed ({str(e).splitlines()[0]})"
    why = agree(why)
    if why is not None:
        for b in todo:
            out[b] = GramResult(None, why)
        return {b: out[b] for b in names}
    for block in todo:
        acc = accs[block]
        u = torch.cat(acc.u)
        w = torch.cat([objective.values[m].reshape(-1) for m in partition[block]])
        u_sq, rows = float(u @ u), u.numel()
        if collective is not None and acc.side == "factor":  # the rows of u are this rank's only
            total = collective.sum(torch.tensor([u_sq, float(rows)], dtype=torch.float64))
            u_sq, rows = float(total[0]), int(round(float(total[1])))
        spectrum = factor_spectrum(acc.side, acc.mat, u, w)
        pf = spectrum.form(rtol)
        if not force and wHw is not None and not reproduces_wHw(u_sq, wHw[block]):
            out[block] = GramResult(None, f"‖Bw‖² = {u_sq:.10g} does not reproduce the engine's wᵀHw = "
                                          f"{wHw[block]:.10g} (the network is not piecewise affine in the block)")
            continue
        how = ("not checked (forced)" if force else "read off the autograd graph by the tangent route (every sample)"
               if ratios[block] is None else f"|vᵀf''|/‖v‖‖f'‖ = {ratios[block]:.1e} ≤ {SECOND_DERIVATIVE_RTOL:g} "
               f"on {min(check_samples, objective.batches[0].n)} sample(s)")
        out[block] = GramResult(GramForm(pf.value, pf.rank, pf.cutoff, pf.max_abs_eig, pf.min_kept_rel_eig,
                                         pf.noise_kept, pf.scaled, wHw=u_sq, side=acc.side, rows=rows,
                                         second_derivative=ratios[block], evals=spectrum.evals,
                                         weights=spectrum.weights, affinity=how), None)
    return {b: out[b] for b in names}


def _refuse(names: Sequence[str], reason: str) -> dict[str, GramResult]:
    return {b: GramResult(None, reason) for b in names}


def _assemble(objective: Objective, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
              factors: Sequence[OutputFactors], budget: int, collective: RankCollective | None = None) -> dict[str, _Acc]:
    """``G = BBᵀ`` (or ``BᵀB`` when ``n_b ≤ m``) and ``u = Bw`` of every block, in memory-bounded chunks;
    with ``collective``, ``m`` counts the rows of every rank and ``B`` stacks them (see :func:`gram_forms`)."""
    m = sum(f.A.shape[0] * f.rows for f in factors)
    if collective is not None:
        m = sum(collective.objects(m))
    per_col = 8 * m
    gram_side = [b for b in blocks if factor_side(sum(objective.values[p].numel() for p in partition[b]), m) == "gram"]
    if gram_side and per_col > budget:
        raise ValueError(f"one column of B has m = {m:,} rows ({per_col:,} bytes), above the memory budget "
                         f"gram_memory = {budget:,} bytes; raise gram_memory")
    units: list[tuple[str, int, int]] = []  # (block, first column, stop) on the gram side
    accs: dict[str, _Acc] = {}
    if collective is None:
        accs.update(_patch_blocks(objective, partition, [b for b in gram_side], factors, m, budget))
    for block in (b for b in blocks if b not in accs):
        n_b = sum(objective.values[p].numel() for p in partition[block])
        side = factor_side(n_b, m)
        dev = objective.values[partition[block][0]].device
        accs[block] = _Acc(side, torch.zeros((n_b, n_b) if side == "factor" else (m, m), dtype=torch.float64, device=dev),
                           [])
        step = n_b if side == "factor" else max(1, budget // per_col)
        units.extend((block, s, min(n_b, s + step)) for s in range(0, n_b, step))
    # blocks of one Linear/Conv2d layer first, the others after, never in one chunk: block_rows takes the
    # generic per-sample route for a whole chunk that holds any other block, a pass over the whole network
    layered = {b: linear_module_of(objective.model, partition[b]) is not None for b in blocks}
    units.sort(key=lambda unit: not layered[unit[0]])
    chunks: list[list[tuple[str, int, int]]] = [[]]
    used = 0
    for unit in units:
        cost = (unit[2] - unit[1]) * per_col
        if chunks[-1] and (used + cost > budget or layered[chunks[-1][-1][0]] != layered[unit[0]]):
            chunks.append([])
            used = 0
        chunks[-1].append(unit)
        used += cost
    for chunk in chunks:
        wanted = list(dict.fromkeys(b for b, _, _ in chunk))
        cols: dict[tuple[str, int, int], list[Tensor]] = {u: [] for u in chunk}
        for i, f in enumerate(factors):
            for _, rows in block_rows(objective, i, partition, wanted, f.A, budget=budget):
                for unit in chunk:
                    block, lo, hi = unit
                    cols[unit].append(rows[block][:, :, lo:hi].reshape(-1, hi - lo))
                del rows
        for unit in chunk:
            block, lo, hi = unit
            B = torch.cat(cols.pop(unit))
            w = torch.cat([objective.values[p].reshape(-1) for p in partition[block]])[lo:hi]
            acc = accs[block]
            if acc.side == "factor":
                acc.mat += columns_gram(B)
                acc.u.append(B @ w)
            else:
                if collective is not None:
                    B = collective.gather_rows(B)
                acc.mat += B @ B.T
                acc.u = [B @ w + (acc.u[0] if acc.u else 0.0)]
            del B
    if collective is not None:
        for acc in accs.values():
            if acc.side == "factor":
                collective.sum(acc.mat)
    return accs


def _patch_blocks(objective: Objective, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
                  factors: Sequence[OutputFactors], m: int, budget: int) -> dict[str, _Acc]:
    """``G`` and ``u`` of the gram-side blocks of one Linear/Conv2d layer for which :mod:`.patch_gram` costs
    under half of forming ``B`` (few output positions, many parameters), within ``budget`` bytes; the
    factored rows of every batch come from one :func:`~.layers.layer_rows` pass for all of them."""
    n = sum(f.A.shape[0] for f in factors)
    layer = {b: linear_module_of(objective.model, partition[b]) for b in blocks}
    positions = _positions(objective, {p for p in layer.values() if p is not None})
    chosen: dict[str, tuple[str, list[str]]] = {}
    for b, path in layer.items():
        pos = None if path is None else positions.get(path)
        if path is None or pos is None or 3 * 8 * (m * pos) ** 2 > budget:
            continue
        weight = objective.values[f"{path}.weight"]
        C, Q = weight.shape[0], weight[0].numel()
        if patch_gram_cost(m, n, C, Q, pos) < rows_cost(m, C * Q, pos) / 2:
            chosen[b] = (path, [x.rpartition(".")[2] for x in partition[b]])
    if not chosen:
        return {}
    paths = list(dict.fromkeys(p for p, _ in chosen.values()))
    parts: dict[str, list] = {p: [] for p in paths}
    for i, f in enumerate(factors):
        got = layer_rows(objective, i, paths, f.A)
        for p in paths:
            parts[p].append(got.get(p))
    out = {}
    for b, (path, attrs) in chosen.items():
        if any(x is None for x in parts[path]):
            continue  # the layer ran twice or its layout is not supported: the rows route takes it
        weight = objective.values[f"{path}.weight"]
        G, u = patch_gram(parts[path], attrs, weight.reshape(weight.shape[0], -1), objective.values.get(f"{path}.bias"))
        out[b] = _Acc("gram", G, [u])
    return out


def _positions(objective: Objective, paths: set[str]) -> dict[str, int]:
    """Output positions per sample of each Linear (tokens) or Conv2d (pixels) layer at ``paths`` that runs
    once, from one forward pass of one sample of the first batch."""
    seen: dict[str, list[int]] = {p: [] for p in paths}

    def hook(path: str):
        def record(mod, inputs, output):
            if isinstance(output, Tensor) and output.dim() >= 2:
                seen[path].append(output[0, 0].numel() if isinstance(mod, nn.Conv2d)
                                  else output.numel() // (output.shape[0] * output.shape[-1]))
        return record

    handles = [objective.model.get_submodule(p).register_forward_hook(hook(p)) for p in paths]
    try:
        with torch.no_grad():
            objective.forward(objective.values, take_samples(objective.batches[0].X, slice(0, 1)))
    finally:
        for h in handles:
            h.remove()
    return {p: v[0] for p, v in seen.items() if len(v) == 1}


__all__ = ["CHECK_SAMPLES", "GramForm", "GramResult", "MEMORY_BUDGET", "gram_forms", "second_derivative_ratios"]
