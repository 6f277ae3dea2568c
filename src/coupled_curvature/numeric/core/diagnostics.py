"""The coupled diagnostic ``D`` and its pseudo-inverse twin ``D⁺``, per parameter block."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any
from dataclasses import replace

import torch
from torch import nn

from coupled_curvature.numeric.core.curvature_operator import check_curvature, skip_spectral, with_curvature
from coupled_curvature.numeric.core.execution import execute
from coupled_curvature.numeric.linalg.pinv import rounding_level
from coupled_curvature.numeric.core.options import RunOptions, run_options
from coupled_curvature.base.run_settings import with_settings
from coupled_curvature.numeric.core.planning import ALL_ROUTES, plan
from coupled_curvature.numeric.core.progress import progress_bar
from coupled_curvature.numeric.core.derived import fitting_value, gradient_at_rounding, rounding_note
from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis, derived_quantities, missing_note
from coupled_curvature.numeric.core.routes import BlockCurvature, Plan, SpectralRoute, WHwRoute


@with_settings()
def diagnose(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    routes: Iterable[WHwRoute | SpectralRoute] | None = None,
    curvature: Mapping[str, object] | None = None,
    **settings: Any,
) -> Diagnosis:
    """Coupled diagnostics of every parameter block of ``model`` in float64.

    For block ``b`` with value ``w``, gradient ``g = ∇_b L`` and Hessian block
    ``H = ∇²_bb L`` of ``L = Σ_batches weight·loss_fn(model(X), y)``::

        D  = (wᵀHw / wᵀw) / ‖g‖²
        D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖²,  H⁺ = Σ_{|λ_i| > pinv_rtol·max|λ|} λ_i⁻¹ u_i u_iᵀ

    ``settings`` are the run settings (blocks, inverse, pinv_rtol, method, max_dense, …): each one's default
    and meaning are declared once in :data:`~coupled_curvature.base.run_settings.SETTINGS` (``help(diagnose)``
    shows them in the signature), and :func:`~coupled_curvature.numeric.core.options.run_options` checks them
    before any work.

    ``wᵀHw`` comes from Hessian-vector products on one retained gradient graph per
    batch, or, when no ``H⁺`` is asked for or it comes from the Gram route, by the tangent route wherever it applies
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
    ``BlockDiagnosis.method`` records every block's route. A Krylov block that does not converge gets ``D⁺ = None`` with the
    reason in ``dplus_missing`` (steps and error estimate); its estimate is kept apart in ``krylov_estimate``,
    and ``krylov_converged`` is ``False``. ``process_group`` (a ``torch.distributed`` group; each rank holds its
    own shard of ``data``) weights mean-reduction batches by the sample count of all
    ranks and sums gradients, Hessian-vector products (every Lanczos product too),
    dense blocks, the loss and the sample count over ranks, so every rank returns the
    same result (:mod:`distributed`); the Gram route sums ``BᵀB`` over ranks, or gathers the rows of ``B``
    from every rank within ``gram_memory`` for ``G = BBᵀ`` (a block whose column of ``B`` alone is above
    the budget falls back with the budget named).

    ``frozen`` says what happens to parameters with ``requires_grad=False``: ``"skip"``
    (default) leaves them out of the blocks (``Diagnosis.skipped`` lists them, and a
    model-level note); ``"include"`` diagnoses them like the others. ``reduction``
    (``"mean"``/``"sum"``) says how ``loss_fn`` reduces over a batch, which sets the batch
    weights; by default it is ``loss_fn.reduction``, and a plain function without one is
    taken as a mean (with a model-level note when there are several batches, where it
    matters). On a model with shared (tied) parameters ``wᵀHw`` always comes from
    Hessian-vector products. A block whose cutoff keeps eigenvalues at rounding level
    (``pinv_rtol`` below ``n·ε``) has ``noise_kept > 0`` and a note.

    Every option is checked by :func:`~coupled_curvature.numeric.core.options.run_options` before any
    work, and the work is one :func:`~coupled_curvature.numeric.core.engine.plan` and
    :func:`~coupled_curvature.numeric.core.engine.execute` of the curvature engine, the same that
    ``spectral_profile`` and ``cutoff_sensitivity`` run: ``BlockDiagnosis.method`` and ``wHw_route`` are
    the routes that ran (:class:`~coupled_curvature.numeric.core.routes.SpectralRoute`,
    :class:`~coupled_curvature.numeric.core.routes.WHwRoute`), ``method_reason`` and ``wHw_reason`` say why
    in words. ``device`` is where the float64 copy runs (by default the model's own device;
    ``meta["device"]`` records it). ``routes`` restricts the routes that may be taken (all by default;
    e.g. ``routes={WHwRoute.HVP, SpectralRoute.DENSE}`` compares the Hessian-vector-product route with
    the tangent one).

    **Any model's output, any batch.** The loss receives one tensor of the model's output: a tensor as is,
    a mapping's (a ``transformers`` ``ModelOutput``'s) ``"logits"`` entry, a tuple's or list's first
    element; ``output=`` (a key, an index or a callable ``output(out) -> Tensor``) picks another
    (:mod:`~coupled_curvature.numeric.core.calling`). ``data`` may hold mapping batches
    (``{"input_ids", "attention_mask", "labels"}``): the targets are the ``target`` entry (``"labels"``;
    or a callable ``target(batch) -> Tensor``), the other entries go to the model as keyword arguments
    (:mod:`~coupled_curvature.numeric.core.dict_batches`).

    **Gauge fixing** (T14). ``D`` and ``D⁺`` are exact under maps conformal on a block (T4), not under
    attention's per-head ``W_Q -> W_QA``, ``W_K -> W_KA⁻ᵀ`` (nor V/O) or non-uniform neuron rescaling.
    ``gauge="balanced"`` computes every quantity at the balanced point of the model's orbit under those
    groups (:func:`~coupled_curvature.numeric.symmetries.gauge.balance`), unique up to maps orthogonal on
    every block, so the values are invariant under the whole group; a note says what was balanced.

    **Another curvature.** ``curvature={block: G}`` measures those blocks with a symmetric operator ``G``
    (a Gauss–Newton, Fisher or K-FAC matrix: a tensor, an array, a SciPy ``LinearOperator`` or a torch
    linear operator such as curvlinops') in place of ``H_bb``: ``D = (wᵀGw/wᵀw)/‖g‖²`` and ``D⁺`` from ``G⁺``;
    ``BlockDiagnosis.curvature`` records which was used (:mod:`~.curvature_operator`, which also hands
    ``H_bb`` out as a ``LinearOperator``: ``block_hessian``).

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

    Args:
        model: the network, any ``nn.Module``; measured on a float64 copy, never modified.
        loss_fn: ``loss_fn(output, target)``, a scalar (a torch loss module such as ``nn.CrossEntropyLoss()`` or a
            function); its ``reduction`` sets the batch weights.
        data: one batch ``(X, y)``, a mapping batch (``{"input_ids", …, "labels"}``) or an iterable of batches (a
            ``DataLoader``).
        routes: the routes that may be taken (:class:`~coupled_curvature.numeric.core.routes.WHwRoute`,
            :class:`~coupled_curvature.numeric.core.routes.SpectralRoute`); all by default.
        curvature: ``{block: G}``: a symmetric operator (Gauss–Newton, Fisher, K-FAC) measured in place of
            ``H_bb`` on those blocks.
        **settings: the run settings, by keyword (``blocks``, ``inverse``, ``pinv_rtol``, ``method``, ``max_dense``,
            ``krylov_max_iter``, ``krylov_tol``, ``gram_memory``, ``frozen``, ``reduction``, ``allow_train_mode``,
            ``process_group``, ``progress``, ``device``, ``output``, ``target``, ``gauge``): each one's default and
            meaning are declared once in :data:`~coupled_curvature.base.run_settings.SETTINGS`.

    Returns:
        Diagnosis: one
        :class:`~coupled_curvature.numeric.core.results.BlockDiagnosis` per block, in partition order, with ``D``
        (``coupled``), ``D⁺`` (``inverse_coupled``), the sums they come from, the routes taken and the notes.

    Raises:
        InvalidInputError: a setting out of range, data the model or loss cannot take (the shapes named), non-finite
            weights or inputs, or a parameter cut from the graph; checked before any work where it can be.
        TrainModeError: the model is in training mode (dropout, batch statistics) and ``allow_train_mode`` is off.

    See also:
        :func:`~coupled_curvature.numeric.core.profile.spectral_profile` (the spectrum behind ``D`` and ``D⁺``),
        :func:`~coupled_curvature.numeric.core.compare.compare` (two diagnoses side by side),
        :func:`~coupled_curvature.numeric.certify.api.certify` (certified balls of the same numbers),
        :func:`~coupled_curvature.numeric.core.curvature_operator.block_hessian` (``H_bb`` as an operator).

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
    o = run_options(**settings)
    check_curvature(curvature, None)
    p = plan(model, loss_fn, data, o, routes=ALL_ROUTES if routes is None else frozenset(routes))
    supplied = check_curvature(curvature, p.partition)
    skip_spectral(p, list(supplied))
    return with_curvature(diagnose_plan(p), p, supplied)


def diagnose_plan(p: Plan) -> Diagnosis:
    """The :class:`Diagnosis` of a :func:`~coupled_curvature.numeric.core.engine.plan`: what
    :func:`diagnose` returns, for a caller that plans itself (the tracker plans a snapshot without
    probing its inputs again). Options, progress included, are the plan's.

    >>> import torch
    >>> from coupled_curvature.numeric.core.options import run_options
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.tensor([0, 1] * 4)
    >>> o = run_options(inverse=False)
    >>> d = diagnose_plan(plan(net, torch.nn.CrossEntropyLoss(), (X, y), o, check_inputs=False))
    >>> d["0.weight"].coupled == diagnose(net, torch.nn.CrossEntropyLoss(), (X, y), inverse=False)["0.weight"].coupled
    True
    """
    o = p.options
    blocks, inverse, progress = o.blocks, o.inverse, o.progress
    bar = progress_bar("diagnose", len(p.partition), progress)
    run = execute(p, bar)
    records = []
    for c in run.blocks.values():
        records.append(_block_record(c, o, p.blocks[c.name].dense_size))
        bar.update(len(records), c.name)
    bar.close()
    notes = list(run.notes)
    if not inverse:
        notes.append("D⁺ was not asked for (inverse=False): its fields are None; wᵀHw by the cheapest exact route")
    meta = {
        "n_samples": run.n_samples,
        "n_batches": len(p.batches),
        "reduction": p.reduction,
        "reduction_source": p.reduction_source,
        "loss": run.loss,
        "blocks": blocks if isinstance(blocks, str) else "custom",
        "pinv_rtol": o.pinv_rtol,
        "max_dense": o.max_dense,
        "source_dtypes": p.source_dtypes,
        "method": o.method if inverse else None,
        "wHw_route": _overall(b.wHw_route for b in records),
        "device": str(p.device),
    }
    if not inverse:
        meta["dplus"] = "not asked for (inverse=False)"
    if run.gram_refused:
        meta["gram_refused"] = run.gram_refused
    if run.tangent_refused:
        meta["tangent_refused"] = run.tangent_refused
    if any(b.spectral is SpectralRoute.GRAM for b in run.blocks.values()):
        meta["gram_memory"] = o.gram_memory
    if any(b.spectral is SpectralRoute.KRYLOV for b in run.blocks.values()):
        meta["krylov_max_iter"], meta["krylov_tol"] = o.krylov_max_iter, o.krylov_tol
    return Diagnosis(records, meta, notes=notes, frozen=p.frozen, skipped=p.skipped)


def _overall(routes) -> str:
    """``"tangent"``, ``"hvp"`` or ``"mixed"`` over the blocks' ``wᵀHw`` routes."""
    seen = {str(r.value if isinstance(r, WHwRoute) else r) for r in routes}
    return seen.pop() if len(seen) == 1 else "mixed"


def _block_record(c: BlockCurvature, o: RunOptions, dense_size: int | None = None) -> BlockDiagnosis:
    """One block's record from the engine's result, with ``D⁺`` at the run's cutoff ``o.pinv_rtol``;
    ``dense_size``: the plan's :attr:`~.routes.BlockPlan.dense_size`, named when Lanczos did not converge."""
    notes: list[str] = list(c.notes)
    w = c.w
    w_sq = float(w @ w)
    g_sq = float(c.grad @ c.grad)
    pinv_rtol = o.pinv_rtol
    wHpinvw = cutoff = rank = min_rel = noise_kept = None
    krylov: dict = {}
    if c.spectrum is not None:
        pf = c.spectrum.form(pinv_rtol)
        wHpinvw, rank, cutoff, min_rel = pf.exact, pf.rank, pf.cutoff, pf.min_kept_rel_eig
        noise_kept = pf.noise_kept
        if pf.rank == 0:
            notes.append("H_bb = 0 under the cutoff: H⁺ = 0")
        if pf.noise_kept:
            notes.append(
                f"the cutoff kept {pf.noise_kept} eigenvalue(s) at rounding level (|λ| ≤ n·ε·max|λ| = "
                f"{rounding_level(w.numel()):.1e}·max|λ|): D⁺ is dominated by rounding noise; use "
                f"pinv_rtol ≥ {rounding_level(w.numel()):.1e} (the default is 1e-10)"
            )
    elif c.krylov is not None:
        form = c.krylov
        wHpinvw, rank, cutoff = form.exact, form.rank, form.cutoff
        krylov = {"krylov_iterations": form.iterations, "krylov_converged": form.converged,
                  "krylov_error": form.error_estimate, "ritz_extremes": form.ritz_extremes}
        if pinv_rtol < rounding_level(w.numel()):
            notes.append(f"pinv_rtol = {pinv_rtol:g} is below rounding level n·ε = {rounding_level(w.numel()):.1e}: "
                         "Krylov may keep Ritz values that are rounding noise; use pinv_rtol ≥ that")
        if form.converged and form.rank == 0 and w_sq != 0.0:
            notes.append("H_bb = 0 on the Krylov space of w under the cutoff: wᵀH⁺w = 0")
    missing = c.spectral_reason if o.inverse and c.spectral is SpectralRoute.NONE else None
    if c.g_rounding is not None and gradient_at_rounding(g_sq, c.g_rounding) and w_sq != 0.0:
        notes.append(rounding_note(g_sq, c.g_rounding))
        rayleigh = derived_quantities(w_sq, g_sq, c.wHw, None, notes)[0]
        coupled = inverse_coupled = None
        if o.inverse and missing is None:
            missing = "the gradient is zero to rounding"
    else:
        rayleigh, coupled, inverse_coupled = derived_quantities(w_sq, g_sq, c.wHw, wHpinvw, notes)
    record = BlockDiagnosis(
        name=c.name, params=tuple(c.members), size=w.numel(), w_sq=w_sq, g_sq=g_sq,
        w_dot_g=float(w @ c.grad), wHw=c.wHw, rayleigh=rayleigh, coupled=coupled,
        wHpinvw=fitting_value(wHpinvw, "wᵀH⁺w", notes), inverse_coupled=inverse_coupled, rank=rank, cutoff=cutoff,
        min_kept_rel_eig=min_rel, noise_kept=noise_kept, dplus_missing=missing,
        method=c.spectral, method_reason=c.spectral_reason, wHw_route=c.wHw_route, wHw_reason=c.wHw_reason,
        g_rounding=c.g_rounding, **krylov,
    )
    if missing is not None:
        notes.append(missing_note(missing))
    elif c.krylov is not None and not c.krylov.converged:
        record = replace(record, notes=tuple(notes)).unconverged(c.krylov.iterations, c.krylov.error_estimate,
                                                                    dense_size=dense_size)
        notes = list(record.notes)
    if record.scale_invariant and not record.g_at_rounding:
        notes.append("wᵀg ≈ 0: the block may be scale-invariant (T10); D is then uninformative")
    return replace(record, notes=tuple(notes))
