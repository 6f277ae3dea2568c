"""``wᵀH_bbw`` of every block where the network is affine in the block, from ``r`` backward passes.

If block ``b`` is the weight and/or bias of one module whose output ``z`` is linear in them
(Linear, Conv, eval-mode BatchNorm, LayerNorm, GroupNorm, Embedding) and the outputs are affine
in ``z`` (:mod:`.affinity`), the outputs' second derivative inside the block vanishes, so with
``S_n = A_nᵀA_n`` (:mod:`.outputs`) and ``t = ∂z/∂w_b · w_b`` the block's own tangent at ``z``::

    w_bᵀH_bbw_b = Σ_n ‖A_nJ_nw_b‖²,   (A_nJ_nw_b)_j = ⟨a_{n,j}ᵀ∂f_n/∂z_n, t_n⟩,

and ``t`` needs no computation: ``z − bias`` for the weight of ``z = W·x + bias`` (``z − β`` for a
normalisation's ``γ``), the broadcast bias for the bias, ``z`` for both. The cotangents
``a_{n,j}ᵀ∂f_n/∂z`` of every module come from the backward pass of each row ``j`` of ``A_n``
(:mod:`.cotangents`, batched): ``r`` rows (``C − 1`` for softmax cross-entropy) for all blocks
at once, plus the gradient's pass, instead of one Hessian-vector product per block. One more row,
a Gaussian combination of all rows, checks that samples do not interact (the cotangent of sample
``n`` must not pick up other samples' outputs). A last row, the absolute output cotangents
``|r_n| = |∂L/∂f_n|``, gives the rounding level of each block's gradient nearly free: its cotangent at
the module's output goes back through the module alone to ``|J_bᵀ|r||`` (the quantity of
:meth:`~coupled_curvature.numeric.core.objective.Objective.cotangent_magnitudes`, which otherwise costs
one more forward and backward pass).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.affinity import affine_outputs, leaf_uses
from coupled_curvature.numeric.factors.cotangents import ShiftedForward, cotangent_rows, shifted_forward
from coupled_curvature.numeric.factors.layers import weight_bias_owner
from coupled_curvature.numeric.factors.outputs import output_factors
from coupled_curvature.numeric.layer_capabilities import layer_capabilities, train_mode_coupled

__all__ = ["TangentForms", "module_block", "tangent_forms"]

_INDEPENDENCE_RTOL = 1e-9


@dataclass(frozen=True)
class TangentForms:
    """``wHw`` for the blocks the route took, ``reasons`` for the others; ``grads`` (``∇L`` per
    parameter) and ``loss`` from the same graphs (over every batch only when ``wHw`` is not empty:
    the route stops at the first batch where no block is left)."""

    wHw: dict[str, float]
    reasons: dict[str, str]
    grads: dict[str, Tensor]
    loss: float
    #: ``Σ_batches |J_bᵀ|r_b||`` per parameter of the blocks in ``wHw`` (see the module docstring)
    magnitudes: dict[str, Tensor] = field(default_factory=dict)
    #: the number ``m`` of output entries those cotangents summed over
    outputs: int = 0


def module_block(model: nn.Module, members: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """``(module path, attributes)`` when ``members`` are the weight and/or bias of one module whose
    output is linear in them, else ``None``.

    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Tanh())
    >>> module_block(net, ["1.weight"]), module_block(net, ["0.weight", "1.bias"])
    (('1', ('weight',)), None)
    """
    found = weight_bias_owner(model, members)
    if found is None:
        return None
    path, module, attrs = found
    # the registry's tangent field: exact types (a subclass may change forward) whose output is linear in weight
    # (and bias), with where the bias and a normalisation's weight broadcast
    if layer_capabilities(module).tangent is None or (type(module) is nn.Bilinear and "weight" in attrs):
        return None  # Bilinear: linear in its bias only
    if type(module) is nn.Embedding and module.max_norm is not None:
        return None  # renormalises the rows it reads
    return path, attrs


def _broadcast(module: nn.Module, value: Tensor, z: Tensor) -> Tensor:
    """A bias (or a normalisation's weight) as it is added to output ``z``."""
    if layer_capabilities(module).tangent in ("last", "shape"):
        return value.expand_as(z)
    return value.reshape(-1, *([1] * (z.dim() - 2))).expand_as(z)


def _tangent(module: nn.Module, attrs: tuple[str, ...], z: Tensor, values: Mapping[str, Tensor],
             path: str) -> Tensor:
    """``∂z/∂w_b · w_b`` for block ``attrs`` of ``module``, from its output ``z``."""
    bias = values.get(f"{path}.bias") if getattr(module, "bias", None) is not None else None
    if set(attrs) == {"weight", "bias"} or bias is None and attrs == ("weight",):
        return z
    assert bias is not None, "a bias block, or a weight block beside a bias"
    if attrs == ("weight",):
        return z - _broadcast(module, bias, z)
    return _broadcast(module, bias, z)


def tangent_forms(objective: Objective, partition: Mapping[str, Sequence[str]], *, seed: int = 0) -> TangentForms:
    """``w_bᵀH_bbw_b = Σ_batches Σ_n ‖A_nJ_nw_b‖²`` for every block of ``partition`` where the route
    applies (see the module docstring), with the reason for every other block.

    Raises what autograd raises on the model (a ``CheckpointError`` under ``torch.utils.checkpoint``);
    the caller falls back to Hessian-vector products.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> tf = tangent_forms(ob, {"0.weight": ["0.weight"], "2.weight": ["2.weight"]})
    >>> tf.reasons["0.weight"]
    'the outputs are not affine in the block: a Tanh operation lies between it and the outputs'
    >>> W = net[2].weight.detach().reshape(-1); h = torch.tanh(net[0](X)).detach()
    >>> H = torch.autograd.functional.hessian(lambda v: nn.CrossEntropyLoss()(h @ v.reshape(2, 4).T + net[2].bias, y), W)
    >>> abs(tf.wHw["2.weight"] - float(W @ H @ W)) < 1e-14
    True
    """
    model = objective.model
    blocks = list(partition)
    reasons: dict[str, str] = {}
    where: dict[str, tuple[str, tuple[str, ...]]] = {}
    for b in blocks:
        found = module_block(model, partition[b])
        if found is None:
            reasons[b] = "the block is not the weight and/or bias of one Linear, Conv, normalisation or Embedding module"
        else:
            where[b] = found
    train = [n for n, _ in train_mode_coupled(model)]
    if train:
        reasons.update({b: f"module {train[0]!r} is in train mode (samples are coupled through the batch)" for b in where})
        where = {}
    forms = {b: 0.0 for b in where}
    grads = {n: torch.zeros_like(v) for n, v in objective.values.items()}
    mags = {n: torch.zeros_like(objective.values[n]) for b in where for n in partition[b]}
    m = 0
    total = 0.0
    gen = torch.Generator().manual_seed(seed)
    for i in range(len(objective.batches)):
        live = {b: where[b] for b in where if b not in reasons}
        if not live:  # every block refused: the caller takes Hessian-vector products, gradient included
            return TangentForms({}, {b: reasons[b] for b in blocks}, grads, total)
        leaves = {n: v.clone().requires_grad_(True) for n, v in objective.values.items()}
        fw = shifted_forward(objective, i, {p for p, _ in live.values()}, leaves)
        out = fw.out
        factors = None
        if live:
            try:
                factors = output_factors(objective, i, outputs=out if isinstance(out, Tensor) else None)
            except ValueError as e:  # not one tensor with the samples along dim 0, too many outputs, a coupling loss
                reasons.update({b: str(e) for b in live})
                live = {}
        loss = objective.output_loss(i, out)
        once = set(fw.once())
        for b, (p, _) in list(live.items()):
            if p not in once:
                reasons[b] = f"module {p!r} runs more than once per forward pass"
                del live[b]
        if live:
            affine = affine_outputs(out.grad_fn, {p: fw.marks[p] for p, _ in live.values()})
            uses = leaf_uses(out.grad_fn)
            for b, (p, _) in list(live.items()):
                shared = [m for m in partition[b] if uses.get(id(leaves[m]), 0) > 1]
                why = affine[p] or (f"{shared[0]} is used by more than one operation" if shared else None)
                if why:
                    reasons[b] = f"the outputs are not affine in the block: {why}" if affine[p] else why
                    del live[b]
        names = list(leaves)
        r_out = (torch.autograd.grad(loss, [out], retain_graph=True, allow_unused=True)[0]
                 if live and out.requires_grad else None)
        r_out = torch.zeros_like(out) if r_out is None else r_out.detach()
        for n, g in zip(names, torch.autograd.grad(loss, [leaves[n] for n in names], retain_graph=bool(live),
                                                   allow_unused=True)):
            if g is not None:
                grads[n] += g
        total += float(loss.detach())
        if live:
            assert factors is not None, "output_factors ran while live was not empty, and live only shrinks"
            _accumulate(model, fw, live, factors.A, objective.values, forms, reasons, gen,
                        (r_out.abs().reshape(r_out.shape[0], 1, -1), {n: leaves[n] for b in live for n in partition[b]},
                         {b: list(partition[b]) for b in live}, mags))
            m += out.numel()
    done = [b for b in blocks if b in forms and b not in reasons]
    return TangentForms({b: forms[b] for b in done}, {b: reasons[b] for b in blocks if b in reasons}, grads, total,
                        {n: mags[n] for b in done for n in partition[b]}, m)


def _accumulate(model: nn.Module, fw: ShiftedForward, live: Mapping[str, tuple[str, tuple[str, ...]]], A: Tensor,
                values: Mapping[str, Tensor], forms: dict[str, float], reasons: dict[str, str],
                gen: torch.Generator, magnitude: tuple[Tensor, dict, dict, dict[str, Tensor]]) -> None:
    """Add ``Σ_n ‖A_nJ_nw_b‖²`` of one batch to ``forms``; a block whose sample-independence check fails
    gets a reason instead. The rows of ``A``, the check's Gaussian combination of them and the absolute
    output cotangents go through one batched backward pass (:func:`.cotangent_rows`); ``magnitude`` is
    ``(|r| as an (N, 1, K) row, the leaves, the live blocks' members, the sums |J_bᵀ|r|| to add to)``."""
    paths = list(dict.fromkeys(p for p, _ in live.values()))
    z = {p: fw.calls[p][0][1] for p in paths}
    tangents = {b: _tangent(model.get_submodule(p), attrs, z[p], values, p) for b, (p, attrs) in live.items()}
    by_path = {p: [b for b, (q, _) in live.items() if q == p] for p in paths}
    n, r = A.shape[0], A.shape[1]
    gamma = torch.randn(n, r, generator=gen, dtype=torch.float64).to(A.device)
    check = (gamma.unsqueeze(2) * A).sum(dim=1, keepdim=True)
    v = {b: torch.zeros(n, r + 1, dtype=torch.float64, device=A.device) for b in live}  # column r: the check
    stacked = {p: torch.stack([tangents[b].reshape(n, -1) for b in bs]) for p, bs in by_path.items()}  # (t, n, m)
    del tangents
    abs_row, leaves, members, mags = magnitude
    at_output: dict[str, Tensor] = {}
    for rows, cots in cotangent_rows(fw, paths, torch.cat([A, check, abs_row.to(A)], dim=1), retain_graph=True):
        for p in paths:
            cot = cots[p]
            if cot is not None and rows.start <= r + 1 < rows.stop:
                at_output[p] = cot[r + 1 - rows.start]
        for p, bs in by_path.items():  # each module's cotangents read once for all its blocks
            cot = cots[p]
            if cot is not None:
                stop = min(rows.stop, r + 1)  # the last row is |r|, not a row of A
                if stop > rows.start:
                    c = cot[:stop - rows.start].reshape(stop - rows.start, n, -1)
                    got = ((c * stacked[p]).sum(-1, keepdim=True) if len(c) == 1  # one row: no einsum set-up
                           else torch.einsum("rnm,tnm->tnr", c, stacked[p]))
                    for b, vb in zip(bs, got):
                        v[b][:, rows.start:stop] = vb
    for p, bs in by_path.items():  # |r| back through the module alone (one pass for all its blocks)
        if p in at_output:
            names = [m for b in bs for m in members[b]]
            back = torch.autograd.grad(fw.outputs[p], [leaves[m] for m in names], at_output[p].reshape(
                fw.outputs[p].shape), retain_graph=True, allow_unused=True)
            for m, g in zip(names, back):
                if g is not None:
                    mags[m] += g.detach().abs()
    for b in live:
        got, rows_b = v[b][:, r], v[b][:, :r]
        want = (gamma * rows_b).sum(dim=1)
        scale = float((gamma * rows_b).abs().sum()) or 1.0
        if float((got - want).abs().max()) > _INDEPENDENCE_RTOL * scale:
            reasons[b] = "samples interact in the forward pass (a sample's output depends on another sample)"
            continue
        forms[b] += float((rows_b * rows_b).sum())
