"""The engine's first half: :func:`plan` checks the inputs, copies the model and picks every block's routes.

Spectral route (when ``D⁺`` is asked for), by ``method``:

- ``"gram"`` (the default): the exact Gram route, checked when it runs; a block it refuses falls back
  to a dense eigendecomposition up to ``max_dense`` parameters, and to none above;
- ``"auto"``: Gram, else dense up to ``max_dense``, else Krylov;
- ``"dense"``: dense up to ``max_dense``, none above; ``"krylov"``: Krylov for every block.

A per-head attention block above ``max_dense`` counts as dense when the matrix its eigendecomposition runs on fits:
its Hessian lies in ``R^C ⊗ span(rows of the projection input)``, so the route eigendecomposes at most
``C·min(rows, F)`` rows (:func:`~..factors.head_hessians.projected_sizes`, the tokens counted in one forward pass
per batch; not on the data-parallel path, where the dense block is summed over ranks whole, nor with
``check_inputs=False``, which runs no forward pass here).

On the data-parallel path (a ``process_group``) every route sums over ranks; the Gram route gathers
the rows of ``B`` from every rank within ``gram_memory``. ``wᵀHw`` takes the
tangent route on a Gram block and, when no block is dense or Krylov, on a block without a spectral
route (``D`` only), if no parameter is tied and no process group is given; else Hessian-vector products.

>>> import torch
>>> from coupled_curvature.numeric.core.options import run_options
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 40), torch.nn.ReLU(), torch.nn.Linear(40, 2))
>>> X, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
>>> p = plan(net, torch.nn.CrossEntropyLoss(), (X, y), run_options(method="dense", max_dense=100))
>>> [(b.name, b.spectral.value) for b in p.blocks.values()]
[('0.weight', 'none'), ('0.bias', 'dense'), ('2.weight', 'dense'), ('2.bias', 'dense')]
>>> p.blocks["0.weight"].spectral_reason[:40], p.blocks["2.weight"].spectral_reason
('block has 120 parameters, above max_dens', 'dense: 80 parameters ≤ max_dense = 100')
>>> p = plan(net, torch.nn.CrossEntropyLoss(), (X, y), run_options(inverse=False))
>>> p.blocks["0.weight"].wHw.value, p.blocks["0.weight"].spectral_reason
('tangent', 'D⁺ not asked for (inverse=False)')
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import map_inputs
from coupled_curvature.numeric.core.hvp import attention_calls
from coupled_curvature.numeric.core.inputs import (
    Batch,
    check_loss_fn,
    float64_copy,
    loss_reduction,
    prepare_batches,
)
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.options import RunOptions
from coupled_curvature.numeric.core.probe import probe_batches
from coupled_curvature.numeric.core.routes import (
    BlockPlan,
    Plan,
    SpectralRoute,
    WHwRoute,
)
from coupled_curvature.numeric.core.slices import model_partition
from coupled_curvature.numeric.factors.head_hessians import projected_sizes
from coupled_curvature.numeric.symmetries.gauge import balance

__all__ = ["plan"]

#: tests switch a route off to see what blocks fall back to (pass ``routes=`` to :func:`plan` instead)
ALL_ROUTES = frozenset({*WHwRoute, *SpectralRoute})


def plan(model: nn.Module, loss_fn: Callable, data: object, options: RunOptions, *,
         rtol: float | None = None, spectral_required: bool = False,
         routes: frozenset = ALL_ROUTES, check_inputs: bool = True) -> Plan:
    """Check the model, loss and data, copy the model to float64 on its device and pick every block's routes.

    ``rtol`` is the cutoff the Krylov runs target (``options.pinv_rtol`` by default);
    ``spectral_required`` refuses, before any work, a block that no allowed route can take;
    ``routes`` is the set of routes that may be taken (all by default: tests take one away to
    compare the others). ``check_inputs=False`` skips the probing forward pass of every batch
    (:func:`~.probe.probe_batches`), for a caller that has probed the same model and data before
    (the tracker, whose worker thread must not fork the process-wide random stream).
    """
    check_loss_fn(loss_fn)
    o = options
    source_dtypes = sorted({str(p.dtype) for p in model.parameters()}) if isinstance(model, nn.Module) else []
    net = float64_copy(model, allow_train_mode=o.allow_train_mode)
    device = o.device or _model_device(model)
    net = net.to(device)
    gauge_notes = []
    if o.gauge == "balanced":
        fixed = balance(net, inplace=True)  # net is the engine's own float64 copy: no second copy
        net = fixed.model
        gauge_notes = [f"gauge='balanced': computed at the balanced point of the model's orbit ({fixed.heads} "
                       f"attention head(s), {fixed.units} ReLU unit(s) in {fixed.sweeps} sweep(s); T14)", *fixed.notes]
    source = "argument" if o.reduction is not None else "loss_fn" if hasattr(loss_fn, "reduction") else "assumed"
    reduction = loss_reduction(loss_fn, o.reduction)
    batches = [Batch(map_inputs(b.X, lambda t: t.to(device)), b.y.to(device), b.weight)
               for b in prepare_batches(data, loss_fn, reduction, target=o.target)]
    attention: dict[str, int] = {}
    if check_inputs:
        with attention_calls(net) as attention:
            probe_batches(net, loss_fn, batches, o.call)
    notes = list(gauge_notes)
    if attention:
        notes.append(f"attention ({', '.join(attention)}) runs on the math kernel: "
                     "the fused kernels have no second derivative")
    if source == "assumed" and len(batches) > 1:
        notes.append("loss_fn has no .reduction: taken as a mean over each batch, so batches are weighted "
                     "by their size; pass reduction='sum' if it sums")
    dist_on = o.process_group is not None
    if dist_on:
        from coupled_curvature.numeric import distributed as dist

        batches = dist.global_batches(batches, loss_fn, o.process_group, reduction=reduction)
    shapes = {n: p.shape for n, p in net.named_parameters()}
    if not shapes:
        raise InvalidInputError("the model has no parameters to diagnose; pass a model with at least one parameter")
    frozen = [n for n, p in net.named_parameters() if not p.requires_grad]
    skipped = frozen if o.frozen == "skip" else []
    sliced = model_partition(net, o.blocks, skipped)
    notes.extend(sliced.notes)
    objective = Objective(net, loss_fn, batches, reduction, o.call, pieces=sliced.pieces)
    partition = sliced.partition
    if skipped:
        notes.append(f"skipped {len(skipped)} frozen parameter(s) (requires_grad=False): {', '.join(skipped)}; "
                     "pass frozen='include' to diagnose them")
    gram_ok = SpectralRoute.GRAM in routes
    sizes = {b: sum(objective.values[m].numel() for m in ms) for b, ms in partition.items()}
    above = {b: ms for b, ms in partition.items() if sizes[b] > o.max_dense}
    projected = projected_sizes(objective, above) if (above and check_inputs and o.inverse and not dist_on
                                                       and o.method != "krylov" and SpectralRoute.DENSE in routes) else {}
    blocks = {b: _block_plan(b, ms, sizes[b], o, gram_ok, projected.get(b)) for b, ms in partition.items()}
    if spectral_required:
        stuck = [bp for bp in blocks.values() if bp.spectral is SpectralRoute.NONE]
        if stuck:
            raise InvalidInputError(f"block {stuck[0].name!r}: {stuck[0].spectral_reason}")
    tied = len(list(net.named_parameters(remove_duplicate=False))) != len(list(net.named_parameters()))
    _choose_wHw(blocks, tied, dist_on, WHwRoute.TANGENT in routes)
    if tied and all(bp.spectral is SpectralRoute.NONE for bp in blocks.values()) and not dist_on:
        notes.append("the model shares (ties) parameters between layers: wᵀHw comes from "
                     "Hessian-vector products, not the tangent route")
    return Plan(o, objective, batches, partition, blocks, notes, frozen, skipped, reduction, source, source_dtypes,
                device, o.pinv_rtol if rtol is None else rtol, dist_on)


def _block_plan(name: str, members: list[str], size: int, o: RunOptions, gram_ok: bool,
                projected: tuple[int, int] | None = None) -> BlockPlan:
    """One block's spectral route with its reason, and its fallback if the route is Gram; ``projected``: a
    per-head block's bound on the size it is eigendecomposed at, and its tokens (module docstring)."""
    reduced = projected is not None and projected[0] <= o.max_dense
    dense_size = projected[0] if projected is not None and projected[0] < size else None

    def plain(method: str) -> tuple[SpectralRoute, str]:
        if method == "krylov" or (method == "auto" and size > o.max_dense and not reduced):
            why = "method='krylov'" if method == "krylov" else f"{size:,} parameters > max_dense = {o.max_dense:,}"
            return SpectralRoute.KRYLOV, f"Krylov: Lanczos quadrature from w/‖w‖ ({why})"
        if size <= o.max_dense:
            return SpectralRoute.DENSE, f"dense: {size:,} parameters ≤ max_dense = {o.max_dense:,}"
        if projected is not None and reduced:
            return SpectralRoute.DENSE, (
                f"dense: a per-head attention block of {size:,} parameters whose Hessian lies in at most "
                f"{projected[0]:,} dimensions (its output columns × the row space of {projected[1]:,} input "
                f"token(s)) ≤ max_dense = {o.max_dense:,}: eigendecomposed there, exact")
        to = "" if dense_size is None else f" to {dense_size} (its per-head Hessian's dimension)"
        return SpectralRoute.NONE, (f"block has {size} parameters, above max_dense={o.max_dense} "
                                    f"(raise max_dense{to} to build the dense block, or use method='krylov' or 'auto')")

    bp = BlockPlan(name, members, size, WHwRoute.HVP, "", SpectralRoute.NONE, "D⁺ not asked for (inverse=False)",
                   dense_size=dense_size)
    if not o.inverse:
        return bp
    if o.method in ("gram", "auto") and gram_ok:
        bp.spectral, bp.spectral_reason = SpectralRoute.GRAM, "Gram: exact at any block size where the network " \
            "is piecewise affine in the block (checked when it runs)"
        bp.fallback, bp.fallback_reason = plain("dense" if o.method == "gram" else "auto")
    else:
        bp.spectral, bp.spectral_reason = plain("dense" if o.method == "gram" else o.method)
    return bp


def _choose_wHw(blocks: dict[str, BlockPlan], tied: bool, dist_on: bool, tangent_ok: bool) -> None:
    """The tangent route for a Gram block (whose check compares ``‖Bw‖²`` with it) and, when no block is
    dense or Krylov, for a block without a spectral route, when nothing rules it out; else Hessian-vector
    products (a dense or Krylov block uses ``H_bb w``, and one pass then serves every block)."""
    why = ("the model ties parameters" if tied else "the data-parallel path sums Hessian-vector products over ranks"
           if dist_on else "the tangent route is switched off" if not tangent_ok else "")
    uses_hw = any(bp.spectral in (SpectralRoute.DENSE, SpectralRoute.KRYLOV) for bp in blocks.values())
    for bp in blocks.values():
        if why:
            bp.wHw, bp.wHw_reason = WHwRoute.HVP, f"Hessian-vector product: {why}"
        elif bp.spectral is SpectralRoute.GRAM or (bp.spectral is SpectralRoute.NONE and not uses_hw):
            bp.wHw, bp.wHw_reason = WHwRoute.TANGENT, ("tangent: Σ_n ‖A_n J_n w‖², exact where the outputs are "
                                                       "affine in the block (checked when it runs)" +
                                                       ("; the Gram route's check ‖Bw‖² = wᵀHw compares with it"
                                                        if bp.spectral is SpectralRoute.GRAM else ""))
        else:
            bp.wHw, bp.wHw_reason = WHwRoute.HVP, "Hessian-vector product: a spectral route runs and uses H_bb w"


def _model_device(model: nn.Module) -> torch.device:
    for t in [*model.parameters(), *model.buffers()]:
        return t.device
    return torch.device("cpu")
