"""The engine's second half: :func:`execute` runs a :class:`~.routes.Plan` and returns each block's curvature.

Order of work: when a Gram block needs ``g`` and ``wᵀH_bbw`` for its check, the tangent route for
the Gram blocks it takes and Hessian-vector products for the others (one pass over the data each);
the Gram route; the tangent route (``D`` only); dense blocks and the graphs Lanczos reuses; Lanczos. A block the Gram checks refuse takes its planned fallback, with both reasons
recorded. A fast route that fails to run on the model (:func:`~.hvp.route_failure`: a checkpoint,
a missing second derivative) gives way to Hessian-vector products with a note; any other error
propagates.
"""

from __future__ import annotations

import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.gradient_level import unresolved_gradients
from coupled_curvature.numeric.core.hvp import (
    CurvatureSums, block_curvature, block_krylov, hidden_dependence, math_attention, route_failure,
)
from coupled_curvature.numeric.core.progress import Progress
from coupled_curvature.numeric.core.routes import (
    BlockCurvature, Execution, Plan, SpectralRoute, WHwRoute, spectrum_of_dense, spectrum_of_gram,
)
from coupled_curvature.numeric.factors.gram import GramResult, gram_forms
from coupled_curvature.numeric.factors.tangent_forms import TangentForms, tangent_forms
from coupled_curvature.numeric.linalg.pinv import rounding_level

__all__ = ["execute"]

#: Krylov keeps the graphs of up to this many batches for its products; more are rebuilt per step
KRYLOV_RETAIN_BATCHES = 8


def execute(p: Plan, bar: Progress | None = None) -> Execution:
    """Run every block's planned routes and return ``w``, ``g``, ``wᵀHw`` and the spectral data per block.

    >>> import torch
    >>> from coupled_curvature.numeric.core.options import run_options
    >>> from coupled_curvature.numeric.core.planning import plan
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> run = execute(plan(net, torch.nn.CrossEntropyLoss(), (X, y), run_options()))
    >>> b = run.blocks["0.weight"]
    >>> b.spectral.value, b.pinv_form(1e-10).rank > 0, abs(b.spectrum.form(1e-10).value) > 0
    ('gram', True, True)
    """
    objective, partition, o = p.objective, p.partition, p.options
    stage = bar.stage if bar is not None else (lambda _: None)
    routes = {b: (bp.spectral, bp.spectral_reason) for b, bp in p.blocks.items()}
    notes: dict[str, list[str]] = {b: [] for b in partition}
    values = {b: torch.cat([objective.values[m].reshape(-1) for m in ms]) for b, ms in partition.items()}
    stage(f"curvature of {len(partition)} block(s) over {len(p.batches)} batch(es)")
    curv: dict[str, CurvatureSums] | None = None
    wHw: dict[str, float] = {}
    wHw_routes = {b: (bp.wHw, bp.wHw_reason) for b, bp in p.blocks.items()}
    tangent_refused: dict[str, str] = {}
    model_notes = list(p.notes)
    loss = None
    gram, gram_refused = {}, {}
    on_gram = [b for b, (r, _) in routes.items() if r is SpectralRoute.GRAM]
    collective = None
    if p.distributed:
        from coupled_curvature.numeric import distributed as dist

        collective = dist.RankCollective(o.process_group)
        dist.check_same_options({**{k: v for k, v in vars(o).items() if k not in ("process_group", "progress", "device")},
                                 "routes": {b: (str(bp.spectral), str(bp.wHw)) for b, bp in p.blocks.items()}},
                                o.process_group)
    mags = None  # |J_bᵀ|r|| per parameter from the tangent route's pass, when it took every block
    if on_gram:
        curv, wHw, loss, tf = _gram_prepass(p, on_gram, values, wHw_routes, tangent_refused, model_notes, stage)
        mags = _covering(tf, partition)
        if collective is not None:
            dist.reduce_block_curvature(curv, o.process_group)
        stage("Gram route")
        wHw_check = {b: wHw[b] if b in wHw else _form(values[b], curv[b]) for b in partition}
        try:
            with math_attention():
                found = gram_forms(objective, {b: partition[b] for b in on_gram}, wHw_check, rtol=p.rtol,
                                   memory_budget=o.gram_memory, collective=collective, affine=set(wHw))
        except RuntimeError as e:  # a checkpointed model, a missing derivative: not any error
            if route_failure(e) is None:
                raise
            found = {b: GramResult(None, f"it failed to run ({route_failure(e)})") for b in on_gram}
        for b, r in found.items():
            if r.form is not None:
                gram[b] = r.form
                routes[b] = (SpectralRoute.GRAM, f"Gram: the network is piecewise affine in this block ({r.form.affinity}), "
                             f"{'G = BBᵀ' if r.form.side == 'gram' else 'BᵀB'} from {r.form.rows:,} rows of B for "
                             f"{p.blocks[b].size:,} parameters, rank {r.form.rank}")
                if o.method_given:
                    notes[b].append(f"D⁺ by the exact Gram route ({'G = BBᵀ' if r.form.side == 'gram' else 'BᵀB'} "
                                    f"from {r.form.rows} rows of B, rank {r.form.rank}; piecewise affine in the "
                                    "block: checked)")
                continue
            assert r.reason is not None  # a GramResult without a form says why
            bp = p.blocks[b]
            routes[b] = (bp.fallback, f"the Gram route does not apply ({r.reason}); {bp.fallback_reason}")
            if o.method_given:
                notes[b].append(f"the Gram route does not apply: {r.reason}")
            else:
                gram_refused[b] = r.reason
    dense = {b for b, (r, _) in routes.items() if r is SpectralRoute.DENSE}
    krylov = [b for b, (r, _) in routes.items() if r is SpectralRoute.KRYLOV]
    retained: list | None = [] if krylov and len(p.batches) <= KRYLOV_RETAIN_BATCHES else None
    if curv is None and all(r is WHwRoute.TANGENT for r, _ in wHw_routes.values()):
        tf = _tangent_route(objective, partition, stage, model_notes)
        for b in partition:
            if tf is None or b not in tf.wHw:
                why = "the tangent route failed to run" if tf is None else tf.reasons.get(b, "not taken")
                wHw_routes[b] = (WHwRoute.HVP, f"Hessian-vector product: {why}")
        if tf is not None:
            tangent_refused = dict(tf.reasons)
        mags = _covering(tf, partition)
        if tf is not None and tf.wHw:
            wHw = tf.wHw
            curv = {b: CurvatureSums(torch.cat([tf.grads[m].reshape(-1) for m in partition[b]]), None, None)
                    for b in wHw}
            rest = {b: ms for b, ms in partition.items() if b not in wHw}
            loss = tf.loss
            if rest:
                stage(f"Hessian-vector products of {len(rest)} block(s)")
                curv.update(block_curvature(objective, rest, set()))
            curv = {b: curv[b] for b in partition}
    if on_gram:  # the Gram pre-pass has g and wᵀHw; build the fallback blocks it left
        assert curv is not None  # the pre-pass built it
        if dense or retained is not None:
            again = block_curvature(objective, partition if retained is not None else
                                    {b: partition[b] for b in dense}, dense, retain=retained,
                                    project_heads=collective is None)
            if collective is not None:
                dist.reduce_block_curvature(again, o.process_group)
            for b in dense:
                again[b].notes[:0] = curv[b].notes
                curv[b] = again[b]
        loss = objective.loss() if loss is None else loss
    elif curv is None:
        curv = block_curvature(objective, partition, dense, retain=retained, project_heads=collective is None)
        if collective is not None:
            dist.reduce_block_curvature(curv, o.process_group)
        loss = objective.loss()
    assert loss is not None  # the Gram pre-pass's or the tangent route's, else the objective's (above)
    n_samples = sum(b.n for b in p.batches)
    if collective is not None:
        total = dist.all_reduce_sum(torch.tensor([loss, float(n_samples)], dtype=torch.float64,
                                                 device=p.device), o.process_group)
        loss, n_samples = float(total[0]), int(round(float(total[1])))
    forms = {}
    if krylov:
        reduce = None if collective is None else collective.sum
        stage(f"Krylov D⁺ of {len(krylov)} block(s)")
        forms = block_krylov(objective, partition, curv, krylov, rtol=p.rtol, max_iter=o.krylov_max_iter,
                             tol=o.krylov_tol, graphs=retained, reduce=reduce)
    del retained
    _refuse_hidden(objective, partition, curv)
    g_rounding = _gradient_rounding(objective, partition, collective, model_notes, mags)
    if collective is None:  # a distributed run keeps the cotangent bound alone (the loss probe is per rank)
        for b, level in unresolved_gradients(objective, partition, {b: curv[b].grad for b in partition}, loss).items():
            g_rounding[b] = max(g_rounding.get(b, 0.0), level)
    blocks = {}
    for b, members in partition.items():
        c = curv[b]
        for t, what in ((c.grad, "gradient"), (c.Hw, "Hessian-vector product")):
            if t is not None and not bool(torch.isfinite(t).all()):
                raise InvalidInputError(f"block {b!r}: the {what} holds non-finite values (float64 overflow: the "
                                        "weights' scale is too extreme, e.g. a rescaling by 1e300); use a model "
                                        "rescaled towards unit scale before diagnosing it")
        route, reason = routes[b]
        wr, wreason = wHw_routes[b]
        value = wHw[b] if b in wHw else _form(values[b], c)
        spectrum = (spectrum_of_gram(gram[b]) if b in gram else
                    spectrum_of_dense(c.dense, values[b]) if c.dense is not None and route is SpectralRoute.DENSE
                    else None)
        blocks[b] = BlockCurvature(b, list(members), values[b], c.grad, value, wr, wreason, route, reason,
                                   spectrum, forms.get(b), gram.get(b), c.Hw, c.dense, [*c.notes, *notes[b]],
                                   g_rounding.get(b))
    return Execution(p, blocks, float(loss), n_samples, model_notes, gram_refused, tangent_refused)


def _form(w: Tensor, c: CurvatureSums) -> float:
    """``wᵀH_bb w`` from the block's Hessian-vector product (there where the tangent route gave no ``wᵀHw``)."""
    assert c.Hw is not None  # CurvatureSums.Hw is None only for the tangent route's blocks, which have wᵀHw
    return float(w @ c.Hw)


def _gram_prepass(p: Plan, on_gram: list[str], values: dict, wHw_routes: dict, tangent_refused: dict,
                  notes: list[str], stage) -> tuple[dict[str, CurvatureSums], dict[str, float], float | None,
                                                    TangentForms | None]:
    """``g`` of every block and the ``wᵀH_bbw`` the Gram checks compare with: the tangent route (exact, its
    affinity read off the autograd graph, samples checked independent) for the Gram blocks planned on it,
    Hessian-vector products for every other block. Returns the sums, the tangent route's ``wᵀHw``, the
    loss when the tangent route ran over every batch, and the tangent route's forms."""
    objective, partition = p.objective, p.partition
    on_tangent = {b: partition[b] for b in on_gram if p.blocks[b].wHw is WHwRoute.TANGENT}
    tf = _tangent_route(objective, on_tangent, stage, notes) if on_tangent else None
    wHw = dict(tf.wHw) if tf is not None else {}
    for b in on_tangent:
        if b not in wHw:
            why = "the tangent route failed to run" if tf is None else tf.reasons.get(b, "not taken")
            wHw_routes[b] = (WHwRoute.HVP, f"Hessian-vector product: {why}")
    if tf is not None:
        tangent_refused.update(tf.reasons)
    curv = {b: CurvatureSums(torch.cat([tf.grads[m].reshape(-1) for m in partition[b]]), None, None)
            for b in wHw} if tf is not None else {}
    rest = {b: ms for b, ms in partition.items() if b not in curv}
    if rest:
        stage(f"Hessian-vector products of {len(rest)} block(s)")
        curv.update(block_curvature(objective, rest, set()))
    return {b: curv[b] for b in partition}, wHw, tf.loss if tf is not None and wHw else None, tf


def _covering(tf: TangentForms | None, partition) -> tuple[dict[str, Tensor], int] | None:
    """The tangent route's ``(Σ |J_bᵀ|r||, m)`` when it took every block (each summed over every batch)."""
    if tf is None or not tf.outputs or any(b not in tf.wHw for b in partition):
        return None
    return tf.magnitudes, tf.outputs


def _tangent_route(objective, partition, stage, notes: list[str]):
    """The tangent route's forms of ``partition``, or ``None`` with a note when autograd cannot run it on
    the model (the caller then takes Hessian-vector products)."""
    stage("tangent route")
    try:
        with math_attention():
            return tangent_forms(objective, partition)
    except RuntimeError as e:
        if route_failure(e) is None:
            raise
        notes.append(f"the tangent route failed ({route_failure(e)}): wᵀHw comes from Hessian-vector products")
        return None


def _gradient_rounding(objective, partition, collective, notes: list[str],
                       found: tuple[dict[str, Tensor], int] | None = None) -> dict[str, float]:
    """Per block, the rounding level of its gradient: ``m·ε·‖Σ_b |J_bᵀ|r_b||‖``, from ``found`` (the tangent
    route's pass, when it took every block) or else :meth:`~.objective.Objective.cotangent_magnitudes` (one more
    forward and backward pass); empty, with a note, where it cannot be taken."""
    try:
        if found is None:
            with math_attention():
                found = objective.cotangent_magnitudes()
    except RuntimeError as e:
        if route_failure(e) is None:
            raise
        notes.append(f"the rounding level of the gradient was not computed ({route_failure(e)}): a gradient that is "
                     "zero to rounding is not recognised")
        return {}
    if found is None:
        notes.append("the model's output holds no floating tensor the loss depends on: the rounding level of the "
                     "gradient was not computed, so a gradient that is zero to rounding is not recognised")
        return {}
    mags, m = found
    flat = torch.cat([mags[n].reshape(-1) for ms in partition.values() for n in ms])
    if collective is not None:
        from coupled_curvature.numeric import distributed as dist

        total = dist.all_reduce_sum(torch.cat([flat, flat.new_tensor([float(m)])]), collective.group)
        flat, m = total[:-1], int(round(float(total[-1])))
    out, start = {}, 0
    for b, ms in partition.items():
        size = sum(mags[n].numel() for n in ms)
        part = flat[start:start + size]
        start += size
        top = float(part.abs().max()) if size else 0.0
        # ‖part‖ without overflow: scaled by its largest entry
        norm = top * float((part / top).norm()) if top > 0.0 else 0.0
        out[b] = rounding_level(m) * norm
    return out


def _refuse_hidden(objective, partition, curv) -> None:
    """A parameter with gradient exactly 0 that still moves the loss: autograd reaches it by no path."""
    zero_grad = [m for b, ms in partition.items() if not bool(curv[b].grad.any()) for m in ms]
    hidden = hidden_dependence(objective, zero_grad)
    if hidden:
        raise InvalidInputError(
            f"{', '.join(hidden)} change(s) the loss but autograd finds no path to them (a torch.utils.checkpoint "
            "with use_reentrant=True, a .detach() or torch.no_grad() in forward), so g and H would read as 0; "
            "pass use_reentrant=False, or set requires_grad=False on them to leave them out")
