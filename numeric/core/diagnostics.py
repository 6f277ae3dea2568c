"""The coupled diagnostic ``D`` and its pseudo-inverse twin ``D⁺``, per parameter block."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import (
    check_count, check_flag, check_loss_fn, float64_copy, loss_reduction, prepare_batches, probe_batches,
)
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.hvp import (
    BlockCurvature, attention_calls, block_curvature, block_krylov, hidden_dependence, math_attention,
    route_failure,
)
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.progress import AUTO_DELAY, Progress, progress_enabled
from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis, derived_quantities, missing_note
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form, rounding_level
from coupled_curvature.numeric.factors.gram import MEMORY_BUDGET, GramForm, GramResult, gram_forms
from coupled_curvature.numeric.factors.tangent_forms import tangent_forms


def diagnose(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    blocks: str | Mapping[str, Sequence[str]] = "tensor",
    inverse: bool = True,
    pinv_rtol: float = 1e-10,
    max_dense: int = 4096,
    allow_train_mode: bool = False,
    method: str | None = None,
    krylov_max_iter: int = 1000,
    krylov_tol: float = 1e-7,
    process_group: object | None = None,
    frozen: str = "skip",
    reduction: str | None = None,
    gram_memory: int = MEMORY_BUDGET,
    progress: bool | None = None,
) -> Diagnosis:
    """Coupled diagnostics of every parameter block of ``model`` in float64.

    For block ``b`` with value ``w``, gradient ``g = ∇_b L`` and Hessian block
    ``H = ∇²_bb L`` of ``L = Σ_batches weight·loss_fn(model(X), y)``::

        D  = (wᵀHw / wᵀw) / ‖g‖²
        D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖²,  H⁺ = Σ_{|λ_i| > pinv_rtol·max|λ|} λ_i⁻¹ u_i u_iᵀ

    ``wᵀHw`` comes from Hessian-vector products on one retained gradient graph per
    batch, or, when no ``H⁺`` is asked for, by the tangent route wherever it applies
    (:mod:`~coupled_curvature.numeric.factors.tangent_forms`): for a block that is one Linear/Conv/
    normalisation module's weight and/or bias, with only linear and piecewise-linear operations
    (ReLU, pooling, eval BatchNorm, residual sums) between its output and the network outputs
    (read off the autograd graph), ``wᵀH_bbw = Σ_n ‖A_nJ_nw_b‖²`` exactly, from one backward pass
    per row of ``A_n`` (``S_n = A_nᵀA_n``) for all blocks at once; ``BlockDiagnosis.wHw_route``
    records each block's route and ``meta["tangent_refused"]`` why the others did not take it. By
    default ``D⁺`` comes from the exact Gram route wherever the network is piecewise affine in the
    block (any block size), else from a dense float64 eigendecomposition for blocks of at most
    ``max_dense`` parameters (larger blocks get ``None`` and a note). Mean-reduction
    losses are weighted by batch size. The model is copied to float64; the user's
    model and data are never modified.

    ``method`` chooses how ``wᵀH⁺w`` is computed: ``None`` (default) is ``"gram"``, with the
    blocks the Gram route does not take listed in ``meta["gram_refused"]`` instead of a note each;
    ``"dense"`` (eigendecomposition of
    blocks up to ``max_dense``, ``None`` above), ``"krylov"`` (Lanczos quadrature from
    ``w/‖w‖`` for every block, :mod:`krylov`, at most ``krylov_max_iter`` products,
    target relative accuracy ``krylov_tol``), ``"gram"`` (the exact Gram route of
    :mod:`gram` wherever the network is piecewise affine in the block, proved per block; dense
    up to ``max_dense`` elsewhere) or ``"auto"`` (Gram where it applies, else dense up to
    ``max_dense``, else Krylov). With the Gram route ``wᵀH⁺_τw = Σ_{λ_i(G)>τ}(q_iᵀu)²/λ_i(G)²``
    for ``u = Bw``, ``G = BBᵀ`` and ``H_bb = BᵀB``; the rows of ``B`` held at once stay under
    ``gram_memory`` bytes; a block where it does not apply says why in a note, and
    ``BlockDiagnosis.method`` records every block's route. A Krylov block that does not converge keeps its estimate in
    ``inverse_coupled`` with a note giving the error estimate; ``krylov_converged``
    says which. ``process_group`` (a ``torch.distributed`` group; each rank holds its
    own shard of ``data``) weights mean-reduction batches by the sample count of all
    ranks and sums gradients, Hessian-vector products (every Lanczos product too),
    dense blocks, the loss and the sample count over ranks, so every rank returns the
    same result (:mod:`distributed`); it does not take the Gram route (a note says so).

    ``frozen`` says what happens to parameters with ``requires_grad=False``: ``"skip"``
    (default) leaves them out of the blocks (``Diagnosis.skipped`` lists them, and a
    model-level note); ``"include"`` diagnoses them like the others. ``reduction``
    (``"mean"``/``"sum"``) says how ``loss_fn`` reduces over a batch, which sets the batch
    weights; by default it is ``loss_fn.reduction``, and a plain function without one is
    taken as a mean (with a model-level note when there are several batches, where it
    matters). On a model with shared (tied) parameters ``wᵀHw`` always comes from
    Hessian-vector products. A block whose cutoff keeps eigenvalues at rounding level
    (``pinv_rtol`` below ``n·ε``) has ``noise_kept > 0`` and a note.

    ``progress`` prints a progress line on stderr (the curvature, Gram and Krylov stages, then
    block by block): ``None`` (default) when stderr is a terminal and the call has run 2 s,
    ``True``/``False`` always/never. It changes nothing in the result.

    Every graph is built with ``scaled_dot_product_attention`` on its math kernel (the fused
    kernels have no second derivative; a model-level note names the modules that call it, found
    by :func:`attention_calls`). A fast route that fails to run on the model — the per-sample
    factors, the tangent pass or the Gram route under ``torch.utils.checkpoint``, or an operation
    without a second derivative — gives way to Hessian-vector products on the retained graph,
    with a note naming the route and the error; any other error propagates. A parameter whose
    gradient is exactly 0 but which moves the loss (autograd reaches it by no path: a reentrant
    checkpoint, a ``.detach()``) is an ``InvalidInputError``, never a ``D`` read off a cut graph.

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> d = diagnose(net, torch.nn.CrossEntropyLoss(), (X, y))
    >>> d.names()
    ['0.weight', '0.bias', '2.weight', '2.bias']
    >>> d["0.weight"].coupled > 0
    True
    """
    if isinstance(pinv_rtol, bool) or not isinstance(pinv_rtol, (int, float)) or not (0.0 <= pinv_rtol < 1.0):
        raise InvalidInputError(f"pinv_rtol must be a number in [0, 1), got {pinv_rtol!r}; pass e.g. 1e-10")
    check_count(max_dense, "max_dense")
    check_flag(inverse, "inverse")
    if frozen not in FROZEN:
        raise InvalidInputError(f"frozen must be 'skip' or 'include', got {frozen!r}; pass one of them")
    check_loss_fn(loss_fn)
    explicit = method is not None
    method = "gram" if method is None else method
    _check_krylov_options(method, krylov_max_iter, krylov_tol)
    show = progress_enabled(progress)
    source_dtypes = sorted({str(p.dtype) for p in model.parameters()}) if isinstance(model, nn.Module) else []
    net = float64_copy(model, allow_train_mode=allow_train_mode)
    source = "argument" if reduction is not None else "loss_fn" if hasattr(loss_fn, "reduction") else "assumed"
    reduction = loss_reduction(loss_fn, reduction)
    batches = prepare_batches(data, loss_fn, reduction)
    with attention_calls(net) as attention:
        probe_batches(net, loss_fn, batches)
    model_notes = []
    if attention:
        model_notes.append(f"attention ({', '.join(attention)}) runs on the math kernel: "
                           "the fused kernels have no second derivative")
    if source == "assumed" and len(batches) > 1:
        model_notes.append("loss_fn has no .reduction: taken as a mean over each batch, so batches are weighted "
                           "by their size; pass reduction='sum' if it sums")
    dist = None
    if process_group is not None:  # data-parallel: weight this shard as part of all ranks' data
        from coupled_curvature.numeric import distributed as dist

        batches = dist.global_batches(batches, loss_fn, process_group, reduction=reduction)
    objective = Objective(net, loss_fn, batches, reduction)
    if not objective.names:
        raise InvalidInputError("the model has no parameters to diagnose; pass a model with at least one parameter")
    frozen_names = [n for n, p in net.named_parameters() if not p.requires_grad]
    skipped = frozen_names if frozen == "skip" else []
    partition = _partition(objective.names, blocks, skipped)
    if skipped:
        model_notes.append(f"skipped {len(skipped)} frozen parameter(s) (requires_grad=False): {', '.join(skipped)}; "
                           "pass frozen='include' to diagnose them")
    sizes = {b: sum(objective.values[m].numel() for m in ms) for b, ms in partition.items()}
    bar = Progress("diagnose", len(partition), enabled=show, delay=AUTO_DELAY if progress is None else 0.0)
    bar.stage(f"curvature of {len(partition)} block(s) over {len(batches)} batch(es)")
    check_count(gram_memory, "gram_memory", 1)
    gram: dict[str, GramForm] = {}
    curv = None
    gram_refused: dict[str, str] = {}
    if inverse and method in ("gram", "auto") and dist is not None:
        if explicit:
            model_notes.append("the data-parallel path (process_group) does not take the Gram route: D⁺ is dense "
                               "up to max_dense" + (", Krylov above" if method == "auto" else ""))
    elif inverse and method in ("gram", "auto") and _gram_route:
        curv = block_curvature(objective, partition, set())
        bar.stage("Gram route")
        wHw_hvp = {b: float(torch.cat([objective.values[m].reshape(-1) for m in ms]) @ curv[b].Hw)
                   for b, ms in partition.items()}
        try:
            with math_attention():
                results = gram_forms(objective, partition, wHw_hvp, rtol=pinv_rtol, memory_budget=gram_memory)
        except RuntimeError as e:  # a checkpointed model, a missing derivative: not any error
            reason = route_failure(e)
            if reason is None:
                raise
            results = {b: GramResult(None, f"it failed to run ({reason})") for b in partition}
        for b, r in results.items():
            if r.form is not None:
                gram[b] = r.form
            elif explicit:
                curv[b].notes.append(f"the Gram route does not apply: {r.reason}")
            else:
                gram_refused[b] = r.reason
    dense_ok = method != "krylov"
    dense = {b for b, n in sizes.items() if inverse and dense_ok and n <= max_dense and b not in gram}
    krylov = [b for b, n in partition.items() if inverse and b not in gram and
              (method == "krylov" or (method == "auto" and sizes[b] > max_dense))]
    retained: list | None = [] if krylov and len(batches) <= KRYLOV_RETAIN_BATCHES else None
    wHw: dict[str, float] = {}  # the blocks whose wᵀHw came from the tangent route
    tangent_reasons: dict[str, str] = {}
    if curv is None and not dense and not krylov and dist is None and _tangent_route:
        if _shares_parameters(net):
            model_notes.append("the model shares (ties) parameters between layers: wᵀHw comes from "
                               "Hessian-vector products, not the tangent route")
        else:
            bar.stage("tangent route")
            try:
                with math_attention():
                    tf = tangent_forms(objective, partition)
            except RuntimeError as e:
                if route_failure(e) is None:
                    raise
                tf = None
                model_notes.append(f"the tangent route failed ({route_failure(e)}): "
                                   "wᵀHw comes from Hessian-vector products")
            if tf is not None:
                tangent_reasons = dict(tf.reasons)
            if tf is not None and tf.wHw:
                wHw = tf.wHw
                curv = {b: BlockCurvature(torch.cat([tf.grads[m].reshape(-1) for m in partition[b]]), None, None)
                        for b in wHw}
                rest = {b: ms for b, ms in partition.items() if b not in wHw}
                loss = tf.loss
                if rest:
                    bar.stage(f"Hessian-vector products of {len(rest)} block(s)")
                    curv.update(block_curvature(objective, rest, set()))
                curv = {b: curv[b] for b in partition}
    if curv is not None and not wHw:  # the Gram pre-pass has g and Hw; build the fallback blocks it left
        if dense or retained is not None:
            again = block_curvature(objective, partition if retained is not None else
                                    {b: partition[b] for b in dense}, dense, retain=retained)
            for b in dense:
                again[b].notes[:0] = curv[b].notes
                curv[b] = again[b]
        loss = objective.loss()
    elif not wHw:
        curv = block_curvature(objective, partition, dense, retain=retained)
        if dist is not None:
            dist.reduce_block_curvature(curv, process_group)
        loss = objective.loss()
    n_samples = sum(b.X.shape[0] for b in batches)
    if dist is not None:
        total = dist.all_reduce_sum(torch.tensor([loss, float(n_samples)], dtype=torch.float64), process_group)
        loss, n_samples = float(total[0]), int(round(float(total[1])))
    forms: dict[str, KrylovForm] = {}
    if krylov:
        reduce = None if dist is None else (lambda t: dist.all_reduce_sum(t, process_group))
        bar.stage(f"Krylov D⁺ of {len(krylov)} block(s)")
        forms = block_krylov(objective, partition, curv, krylov, rtol=pinv_rtol, max_iter=krylov_max_iter,
                             tol=krylov_tol, graphs=retained, reduce=reduce)
    del retained
    zero_grad = [m for b, ms in partition.items() if not bool(curv[b].grad.any()) for m in ms]
    hidden = hidden_dependence(objective, zero_grad)
    if hidden:
        raise InvalidInputError(
            f"{', '.join(hidden)} change(s) the loss but autograd finds no path to them (a torch.utils.checkpoint "
            "with use_reentrant=True, a .detach() or torch.no_grad() in forward), so g and H would read as 0; "
            "pass use_reentrant=False, or set requires_grad=False on them to leave them out")

    records = []
    for block, members in partition.items():
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        c = curv[block]
        records.append(_block_record(block, members, w, c, inverse, pinv_rtol, max_dense, forms.get(block),
                                     wHw.get(block), gram.get(block), explicit))
        bar.update(len(records), block)
    bar.close()
    meta = {
        "n_samples": n_samples,
        "n_batches": len(batches),
        "reduction": reduction,
        "reduction_source": source,
        "loss": loss,
        "blocks": blocks if isinstance(blocks, str) else "custom",
        "pinv_rtol": pinv_rtol,
        "max_dense": max_dense,
        "source_dtypes": source_dtypes,
        "method": method,
        "wHw_route": "tangent" if len(wHw) == len(partition) else "mixed" if wHw else "hvp",
    }
    if gram_refused:
        meta["gram_refused"] = gram_refused
    if tangent_reasons:
        meta["tangent_refused"] = tangent_reasons
    if gram:
        meta["gram_memory"] = gram_memory
    if krylov:
        meta["krylov_max_iter"], meta["krylov_tol"] = krylov_max_iter, krylov_tol
    return Diagnosis(records, meta, notes=model_notes, frozen=frozen_names, skipped=skipped)


METHODS = ("dense", "krylov", "auto", "gram")
FROZEN = ("skip", "include")
_tangent_route = True  # tests switch it off to compare with the Hessian-vector-product route
_gram_route = True  # tests switch it off to see the dense/Krylov split that blocks fall back to
KRYLOV_RETAIN_BATCHES = 8  # Krylov keeps up to this many batch graphs; more are rebuilt per step


def _partition(names: list[str], blocks, skipped: list[str]) -> dict[str, list[str]]:
    """The blocks over the parameters that are not skipped; a mapping may not name a skipped one."""
    if not skipped:
        return resolve_blocks(names, blocks)
    if isinstance(blocks, Mapping):
        for block, members in blocks.items():
            for m in [members] if isinstance(members, str) else members:
                if m in skipped:
                    raise InvalidInputError(
                        f"block {block!r} names {m!r}, a frozen parameter (requires_grad=False) that "
                        "frozen='skip' leaves out; pass frozen='include' to diagnose it, or drop it from the block"
                    )
    kept = [n for n in names if n not in skipped]
    if not kept:
        raise InvalidInputError("every parameter is frozen (requires_grad=False); pass frozen='include' to "
                                "diagnose them anyway")
    return resolve_blocks(kept, blocks)


def _shares_parameters(model: nn.Module) -> bool:
    """Whether one parameter tensor appears under two names (tied weights)."""
    return len(list(model.named_parameters(remove_duplicate=False))) != len(list(model.named_parameters()))


def _check_krylov_options(method: object, max_iter: object, tol: object) -> None:
    if not isinstance(method, str) or method not in METHODS:
        raise InvalidInputError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}; pass one of them")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise InvalidInputError(f"krylov_max_iter must be a positive int, got {max_iter!r}; pass e.g. 1000")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0.0 < tol < 1.0):
        raise InvalidInputError(f"krylov_tol must be a number in (0, 1), got {tol!r}; pass e.g. 1e-7")


def _block_record(block, members, w, c, inverse, pinv_rtol, max_dense, form: KrylovForm | None,
                  wHw: float | None = None, gram: GramForm | None = None, gram_note: bool = True) -> BlockDiagnosis:
    """One block's record; ``wHw`` is given where the tangent route computed it (else ``wᵀ(H_bb w)``)."""
    notes: list[str] = list(c.notes)
    w_sq = float(w @ w)
    g_sq = float(c.grad @ c.grad)
    route = "hvp" if wHw is None else "tangent"
    wHw = float(w @ c.Hw) if wHw is None else wHw
    wHpinvw = cutoff = rank = min_rel = noise_kept = None
    krylov: dict = {}
    if gram is not None:
        pf = gram
        krylov = {"method": "gram"}
        if gram_note:  # by default the route is the method field alone
            notes.append(f"D⁺ by the exact Gram route ({'G = BBᵀ' if gram.side == 'gram' else 'BᵀB'} from "
                         f"{gram.rows} rows of B, rank {gram.rank}; piecewise affine in the block: checked)")
    elif c.dense is not None:
        pf = pinv_quadratic_form(c.dense, w, pinv_rtol)
    if gram is not None or c.dense is not None:
        wHpinvw, rank, cutoff, min_rel = pf.value, pf.rank, pf.cutoff, pf.min_kept_rel_eig
        noise_kept = pf.noise_kept
        if pf.rank == 0:
            notes.append("H_bb = 0 under the cutoff: H⁺ = 0")
        if pf.noise_kept:
            notes.append(
                f"the cutoff kept {pf.noise_kept} eigenvalue(s) at rounding level (|λ| ≤ n·ε·max|λ| = "
                f"{rounding_level(w.numel()):.1e}·max|λ|): D⁺ is dominated by rounding noise; use "
                f"pinv_rtol ≥ {rounding_level(w.numel()):.1e} (the default is 1e-10)"
            )
    elif form is not None:
        wHpinvw, rank, cutoff = form.value, form.rank, form.cutoff
        krylov = {"method": "krylov", "krylov_iterations": form.iterations, "krylov_converged": form.converged,
                  "krylov_error": form.error_estimate, "ritz_extremes": form.ritz_extremes}
        if pinv_rtol < rounding_level(w.numel()):
            notes.append(f"pinv_rtol = {pinv_rtol:g} is below rounding level n·ε = {rounding_level(w.numel()):.1e}: "
                         "Krylov may keep Ritz values that are rounding noise; use pinv_rtol ≥ that")
        if form.converged and form.rank == 0 and w_sq != 0.0:
            notes.append("H_bb = 0 on the Krylov space of w under the cutoff: wᵀH⁺w = 0")
        if not form.converged:
            notes.append(
                f"Krylov D⁺ did not converge in {form.iterations} Hessian-vector products: the value is an "
                f"estimate with relative error up to about {form.error_estimate:.1e} (raise krylov_max_iter, "
                "or use method='dense' if the block fits)"
            )
    rayleigh, coupled, inverse_coupled = derived_quantities(w_sq, g_sq, wHw, wHpinvw, notes)
    missing = None
    if c.dense is None and form is None and gram is None and inverse:
        missing = (f"block has {w.numel()} parameters, above max_dense={max_dense} "
                   "(raise max_dense to build the dense block, or use method='krylov' or 'auto')")
    record = BlockDiagnosis(
        name=block, params=tuple(members), size=w.numel(), w_sq=w_sq, g_sq=g_sq,
        w_dot_g=float(w @ c.grad), wHw=wHw, rayleigh=rayleigh, coupled=coupled,
        wHpinvw=wHpinvw, inverse_coupled=inverse_coupled, rank=rank, cutoff=cutoff,
        min_kept_rel_eig=min_rel, noise_kept=noise_kept, dplus_missing=missing,
        wHw_route=route, **krylov,
    )
    if missing is not None:
        notes.append(missing_note(missing))
    if record.scale_invariant:
        notes.append("wᵀg ≈ 0: the block may be scale-invariant (T10); D is then uninformative")
    return replace(record, notes=tuple(notes))
