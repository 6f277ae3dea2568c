"""Per-block gradients, Hessian quadratic forms and dense Hessian blocks, from one graph per batch."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import CheckpointError

from coupled_curvature.numeric.linalg.tolerance import agrees
from coupled_curvature.numeric.factors.gauss_newton import linear_block_hessians
from coupled_curvature.numeric.factors.head_hessians import head_block_hessians, head_block_requests
from coupled_curvature.numeric.factors.projected_hessian import ProjectedHessian
from coupled_curvature.numeric.factors.layers import linear_module_of
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm, LanczosRun
from coupled_curvature.numeric.core.objective import Objective

_COLUMN_CHUNK = 256


@contextmanager
def math_attention() -> Iterator[None]:
    """A context in which ``scaled_dot_product_attention`` runs on its math kernel and
    ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer`` never take their fused inference path.

    The fused kernels (flash, memory-efficient) record a backward that has no derivative of its
    own, so a Hessian-vector product through a graph they built fails; the math kernel is plain
    ``softmax(QKᵀ/√d)V`` in differentiable operations. The kernel is chosen when the forward pass
    runs, so graphs must be built inside this context. The fused inference path (taken when no
    attention weight requires a gradient) has no batching rule for ``vmap``; without it every pass
    computes attention the same way. Both settings are restored on exit; outside attention they
    change nothing.

    >>> q = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    >>> with math_attention():
    ...     out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    ...     (g,) = torch.autograd.grad(out.sum(), q, create_graph=True)
    >>> torch.autograd.grad(g.sum(), q)[0].shape  # a second derivative exists
    torch.Size([1, 2, 3, 4])
    """
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


#: the calls whose attention :func:`math_attention` puts on the math kernel: ``scaled_dot_product_attention``
#: (the function and its aten op) and ``multi_head_attention_forward`` (``nn.MultiheadAttention``, also inside
#: ``nn.Transformer*``; a torch-function mode does not see the calls it makes in turn)
_ATTENTION_CALLS = (F.scaled_dot_product_attention, F.multi_head_attention_forward)
_SDPA_OP = torch.ops.aten.scaled_dot_product_attention
_FRAMES = 64  # how far up the stack an attention call looks for the module that made it


class _AttentionWatch(TorchFunctionMode):
    """A torch-function mode that counts the attention calls per module path into ``calls``."""

    def __init__(self, model: nn.Module, calls: dict[str, int]) -> None:
        super().__init__()
        self._paths = {id(m): name for name, m in model.named_modules()}
        self._calls = calls

    def __torch_function__(
        self, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        if any(func is f for f in _ATTENTION_CALLS) or getattr(func, "overloadpacket", func) is _SDPA_OP:
            where = self._caller(sys._getframe(1))
            self._calls[where] = self._calls.get(where, 0) + 1
        return func(*args, **(kwargs or {}))

    def _caller(self, frame: FrameType | None) -> str:
        """The path of the innermost module of the model whose method is on the stack."""
        for _ in range(_FRAMES):
            if frame is None:
                break
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] == "self":
                path = self._paths.get(id(frame.f_locals.get("self")))
                if path is not None:
                    return path or "top level"
            frame = frame.f_back
        return "outside the model"


@contextmanager
def attention_calls(model: nn.Module) -> Iterator[dict[str, int]]:
    """A context that records which attention runs inside it: ``{path: calls}``, in the order of
    the first call, where ``path`` names the innermost module of ``model`` whose method made the call
    (``"top level"`` for ``model``'s own, ``"outside the model"`` for code in no module of it).

    Attention is what :func:`math_attention` changes: a call of ``F.scaled_dot_product_attention``
    (or ``torch.ops.aten.scaled_dot_product_attention``) or ``F.multi_head_attention_forward``
    (``nn.MultiheadAttention`` and the ``nn.Transformer*`` layers) seen by a
    ``torch.overrides.TorchFunctionMode``. The mode sees the call as made, before the dispatcher
    decomposes it (a ``TorchDispatchMode`` sees only the math kernel's ``bmm``/``softmax``; calls
    inside TorchScript are seen by neither), and while it is active ``nn.MultiheadAttention`` leaves its fused inference path, so what runs is what
    graphs built under :func:`math_attention` run. The module is found by walking up the caller's
    frames, only when attention is called: nothing is installed on ``model``, and the mode is
    removed on exit, also when the body raises.

    >>> class Block(nn.Module):
    ...     def forward(self, x):
    ...         return nn.functional.scaled_dot_product_attention(x, x, x)
    >>> net = nn.Sequential(nn.Linear(4, 4), Block())
    >>> with attention_calls(net) as calls:
    ...     _ = net(torch.randn(1, 3, 4))
    ...     _ = net(torch.randn(1, 3, 4))
    >>> calls
    {'1': 2}
    """
    calls: dict[str, int] = {}
    with _AttentionWatch(model, calls):
        yield calls


def route_failure(error: BaseException) -> str | None:
    """A one-line reason when ``error`` is a failure of a fast route that the Hessian-vector-product
    route does not share, else ``None`` (the caller re-raises).

    Two kinds qualify: a ``torch.utils.checkpoint.CheckpointError`` (recomputation under extra
    hooks or a batch of one does not match the checkpointed forward) and a ``RuntimeError`` whose
    message says an operation's derivative is not implemented (a double backward the route needs).

    >>> route_failure(CheckpointError("torch.utils.checkpoint: recomputed values differ"))
    'CheckpointError: torch.utils.checkpoint: recomputed values differ'
    >>> route_failure(RuntimeError("derivative for aten::foo_backward is not implemented"))
    'derivative for aten::foo_backward is not implemented'
    >>> route_failure(RuntimeError("shapes cannot be multiplied")) is None
    True
    """
    first = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, CheckpointError):
        return f"CheckpointError: {first}"
    if isinstance(error, RuntimeError) and "derivative for" in first and "not implemented" in first:
        return first
    return None


def hidden_dependence(objective: Objective, names: Sequence[str], *, seed: int = 0) -> list[str]:
    """The parameters among ``names`` that change the loss of the first batch although autograd
    reaches them by no path (a reentrant ``torch.utils.checkpoint`` whose input needs no gradient, a
    ``.detach()`` or ``torch.no_grad()`` in the forward): their ``g`` and ``H`` would read as 0.

    A parameter qualifies when moving it by ``δ`` (random, ``‖δ‖ = 10⁻³·max(‖w‖, 1)``) moves the
    loss by more than ``10⁻¹²·|L|`` while ``∂L/∂w`` has no graph. Callers pass only parameters whose
    gradient came out exactly 0, so the usual cost is nothing.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> class Cut(nn.Linear):
    ...     def forward(self, x):
    ...         return super().forward(x).detach() + 0 * self.bias
    >>> net = nn.Sequential(Cut(2, 2), nn.Linear(2, 2)).double()
    >>> X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> hidden_dependence(ob, ["0.weight", "0.bias", "1.bias"])  # 0.bias has a path (with zero gradient)
    ['0.weight']
    """
    if not names:
        return []
    leaves = {n: v.clone().requires_grad_(n in names) for n, v in objective.values.items()}
    gen = torch.Generator().manual_seed(seed)
    with math_attention():
        with torch.enable_grad():
            loss = objective.batch_loss(0, leaves)
            grads = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True) if (
                loss.requires_grad) else [None] * len(names)
        hidden = []
        with torch.no_grad():
            base = float(objective.batch_loss(0, objective.values))
            for name, g in zip(names, grads):
                if g is not None:
                    continue
                v = objective.values[name]
                step = torch.randn(v.shape, generator=gen, dtype=v.dtype)
                step *= 1e-3 * max(float(v.norm()), 1.0) / (float(step.norm()) or 1.0)
                moved = float(objective.batch_loss(0, {**objective.values, name: v + step}))
                if abs(moved - base) > 1e-12 * max(abs(base), 1e-300):
                    hidden.append(name)
    return hidden


@dataclass
class CurvatureSums:
    """Sums over the data of ``g_b`` (flat), ``H_bb w_b`` (flat) and optionally dense ``H_bb``.

    ``Hw`` is ``None`` where :func:`diagnose` took the tangent route (only ``wᵀH_bb w`` is known); ``dense`` is a
    :class:`~..factors.head_hessians.ProjectedHessian` (``H_bb = PMPᵀ``, exact) for a per-head attention block
    whose projection inputs have fewer independent rows than columns (:meth:`hessian` gives ``H_bb`` itself)."""

    grad: Tensor
    Hw: Tensor | None
    dense: Tensor | ProjectedHessian | None
    notes: list[str] = field(default_factory=list)

    def hessian(self) -> Tensor | None:
        """The dense ``H_bb`` (a projected one expanded), ``None`` where none was built."""
        return self.dense.full() if isinstance(self.dense, ProjectedHessian) else self.dense


def block_vjp(
    grads: dict[str, Tensor],
    leaves: dict[str, Tensor],
    members: Sequence[str],
    cotangents: Sequence[Tensor],
    batched: bool,
) -> list[Tensor]:
    """``(∂g_b/∂θ_b)ᵀ v = H_bb v`` for cotangent(s) ``v`` on the block's own gradient outputs."""
    live = [i for i, m in enumerate(members) if grads[m].requires_grad]
    shape0 = (cotangents[0].shape[0],) if batched else ()
    out = [torch.zeros(shape0 + leaves[m].shape, dtype=leaves[m].dtype, device=leaves[m].device) for m in members]
    if not live:  # the loss is at most linear in this block: H_bb = 0
        return out
    res = torch.autograd.grad(
        [grads[members[i]] for i in live],
        [leaves[m] for m in members],
        grad_outputs=[cotangents[i] for i in live],
        retain_graph=True,
        allow_unused=True,
        is_grads_batched=batched,
    )
    return [o if r is None else r for o, r in zip(out, res)]


@math_attention()
def block_curvature(
    objective: Objective,
    partition: dict[str, list[str]],
    dense_blocks: set[str],
    retain: list | None = None,
    *,
    project_heads: bool = True,
) -> dict[str, CurvatureSums]:
    """For every block ``b``: ``g_b``, ``H_bb w_b`` and, for names in ``dense_blocks``, ``H_bb``.

    Per batch the model graph is built once and differentiated once with
    ``create_graph=True``; every block's Hessian-vector product is a backward pass
    through that retained graph restricted to the block (the diagonal block ``H_bb``).
    Dense blocks of ``nn.Linear`` and ``nn.Conv2d`` (groups=1) layers come from per-sample
    factors (:func:`linear_block_hessians`: the exact Kronecker form for Linear on 2-D inputs, the Gauss–Newton
    form ``Σ_n J_nᵀΛ_nJ_n`` otherwise), accepted only if ``H_bb w`` matches the Hessian-vector product to
    ``1e-9`` relative; dense per-head attention blocks (:mod:`~..factors.head_hessians`: Hessians at the
    projections' outputs per sequence, ``T·E`` products through the network per attention module instead of one
    per entry) are accepted only if ``H_bb w`` and ``H_bb r`` (``r`` random) both match; other dense blocks are
    assembled column by column from the retained graph, in vmapped chunks. When ``retain`` is a list, every batch's
    ``(leaves, grads)`` graph is appended to it for later products (:func:`block_krylov`). With ``project_heads``
    a per-head block whose projection inputs have fewer independent rows than columns is kept as
    ``H_bb = PMPᵀ`` (:class:`~..factors.head_hessians.ProjectedHessian`, exact; the check compares ``PMPᵀw`` and
    ``PMPᵀr``), summed over batches in a basis of all their rows.
    Graphs are built under :func:`math_attention`. When the per-sample factors fail to run
    (:func:`route_failure`: a checkpointed model, a missing derivative) the dense blocks come
    from the retained graph, with a note saying why; any other error propagates.
    """
    kron_requests = {}
    for block in dense_blocks:
        path = linear_module_of(objective.model, partition[block])
        if path is not None:
            kron_requests[block] = (path, partition[block])
    heads = head_block_requests(objective, {b: partition[b] for b in dense_blocks if b not in kron_requests}) \
        if dense_blocks else {}
    acc: dict[str, CurvatureSums] = {}
    kron_failed: str | None = None
    for i, (leaves, grads) in enumerate(objective.graphs()):
        kron: dict[str, Tensor | ProjectedHessian] = {}
        if (kron_requests or heads) and kron_failed is None:
            try:
                kron = dict(linear_block_hessians(objective, i, kron_requests)) if kron_requests else {}
                kron.update(head_block_hessians(objective, i, heads, project=project_heads) if heads else {})
            except RuntimeError as e:  # CheckpointError is a RuntimeError
                kron_failed = route_failure(e)
                if kron_failed is None:
                    raise
        for block, members in partition.items():
            w = [objective.values[m] for m in members]
            g = torch.cat([grads[m].detach().reshape(-1) for m in members])
            Hw = torch.cat([t.reshape(-1) for t in block_vjp(grads, leaves, members, w, False)])
            entry = acc.setdefault(block, CurvatureSums(torch.zeros_like(g), torch.zeros_like(Hw), None))
            assert entry.Hw is not None, "the sums made here hold H_bb w"
            entry.grad += g
            entry.Hw += Hw
            if block not in dense_blocks:
                continue
            dense = kron.get(block)
            if kron_failed is not None and (block in kron_requests or block in heads):
                _note(entry, f"the per-sample factor route failed ({kron_failed}); dense block "
                      "assembled from Hessian-vector products instead")
            elif block in heads:
                dense = _checked_head_block(entry, dense, w, Hw, (grads, leaves, members))
            elif dense is not None and not agrees(_times(dense, torch.cat([t.reshape(-1) for t in w])), Hw, rtol=1e-9):
                _note(entry, "per-sample factored block disagreed with the Hessian-vector product (samples "
                      "coupled, or a Conv/sequence layer with a network not piecewise linear above it); "
                      "assembled from Hessian-vector products instead")
                dense = None
            elif dense is None and block in kron_requests:
                _note(entry, "no per-sample factor (the loss couples samples, its output Hessian is indefinite "
                      "or the model has too many outputs); dense block "
                      "assembled from Hessian-vector products")
            if dense is None:
                dense = _dense_block(grads, leaves, members)
            entry.dense = dense if entry.dense is None else _summed(entry.dense, dense)
        if retain is not None:
            retain.append((leaves, grads))
        del leaves, grads
    return acc


@math_attention()
def block_krylov(
    objective: Objective,
    partition: dict[str, list[str]],
    curv: dict[str, CurvatureSums],
    blocks: Iterable[str],
    *,
    rtol: float,
    max_iter: int,
    tol: float,
    graphs: Sequence[tuple[dict[str, Tensor], dict[str, Tensor]]] | None = None,
    reduce: Callable[[Tensor], Tensor] | None = None,
) -> dict[str, KrylovForm]:
    """``wᵀH_bb⁺w`` by Lanczos quadrature (:mod:`krylov`) for each of ``blocks``.

    All runs advance in lockstep: one pass over the batches per Lanczos step computes
    ``H_bb q_b = Σ_batches ∂(g_bᵀq_b)/∂w_b`` for every unfinished block, on ``graphs``
    (retained by :func:`block_curvature`) or, when ``None``, on graphs rebuilt per step.
    The first step of each ``w`` run reuses ``curv[b].Hw``. ``reduce`` (e.g. a sum over data-parallel
    ranks) is applied to every summed product before Lanczos sees it. Graphs rebuilt here are
    built under :func:`math_attention`.
    """
    runs: dict[str, LanczosRun] = {}
    for block in blocks:
        members = partition[block]
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        runs[block] = LanczosRun(w, rtol=rtol, max_iter=max_iter, tol=tol, Hw=curv[block].Hw)
    while True:
        active = {b: r.vector for b, r in runs.items() if r.vector is not None}  # block -> its next vector
        if not active:
            break
        sums = {b: torch.zeros(runs[b].n, dtype=torch.float64, device=objective.values[partition[b][0]].device)
                for b in active}
        for leaves, grads in graphs if graphs is not None else objective.graphs():
            for b, vector in active.items():
                members = partition[b]
                sizes = [leaves[m].numel() for m in members]
                cot = [p.reshape(leaves[m].shape) for p, m in zip(torch.split(vector, sizes), members)]
                sums[b] += torch.cat([t.reshape(-1) for t in block_vjp(grads, leaves, members, cot, False)])
        for b in active:
            runs[b].feed(sums[b] if reduce is None else reduce(sums[b]))
    return {b: r.result() for b, r in runs.items()}


def _checked_head_block(entry: CurvatureSums, dense: Tensor | ProjectedHessian | None, w: Sequence[Tensor], Hw: Tensor,
                        graph: tuple[dict[str, Tensor], dict[str, Tensor], Sequence[str]]
                        ) -> Tensor | ProjectedHessian | None:
    """A per-head block from :func:`head_block_hessians` when ``H_bb w`` and ``H_bb r`` (``r`` random, seeded)
    match Hessian-vector products to ``1e-9``, else ``None`` with a note (the caller assembles it instead). For a
    projected block that is ``PMPᵀw`` and ``PMPᵀr``: a basis ``P`` missing a direction ``H_bb`` acts on fails it."""
    grads, leaves, members = graph
    if dense is None:
        _note(entry, "the per-head projection route does not apply (a projection called more than once, inputs "
              "not (sequences, tokens, features), an output it does not reproduce, or an output Hessian above "
              "1 GiB); dense block assembled from Hessian-vector products")
        return None
    like = dense.core if isinstance(dense, ProjectedHessian) else dense
    n = dense.size if isinstance(dense, ProjectedHessian) else dense.shape[0]
    gen = torch.Generator(device=like.device).manual_seed(0)
    r = torch.randn(n, generator=gen, dtype=like.dtype, device=like.device)
    cot = [p.reshape(leaves[m].shape) for p, m in zip(torch.split(r, [leaves[m].numel() for m in members]), members)]
    Hr = torch.cat([t.reshape(-1) for t in block_vjp(grads, leaves, members, cot, False)])
    if agrees(_times(dense, torch.cat([t.reshape(-1) for t in w])), Hw, rtol=1e-9) and agrees(_times(dense, r), Hr,
                                                                                              rtol=1e-9):
        return dense
    _note(entry, "the per-head projection route disagreed with Hessian-vector products (sequences coupled, or a "
          "projection's output reaching the loss other than through attention); dense block assembled from "
          "Hessian-vector products instead")
    return None


def _times(H: Tensor | ProjectedHessian, v: Tensor) -> Tensor:
    return H.matvec(v) if isinstance(H, ProjectedHessian) else H @ v


def _summed(a: Tensor | ProjectedHessian, b: Tensor | ProjectedHessian) -> Tensor | ProjectedHessian:
    """Two batches' ``H_bb`` summed: projected while both are, else dense."""
    if isinstance(a, ProjectedHessian) and isinstance(b, ProjectedHessian):
        return a.plus(b)
    return (a.full() if isinstance(a, ProjectedHessian) else a) + (b.full() if isinstance(b, ProjectedHessian) else b)


def _note(entry: CurvatureSums, text: str) -> None:
    if text not in entry.notes:
        entry.notes.append(text)


def _dense_block(grads: dict[str, Tensor], leaves: dict[str, Tensor], members: Sequence[str]) -> Tensor:
    sizes = [leaves[m].numel() for m in members]
    n = sum(sizes)
    device = leaves[members[0]].device
    H = torch.empty(n, n, dtype=torch.float64, device=device)
    for start in range(0, n, _COLUMN_CHUNK):
        stop = min(n, start + _COLUMN_CHUNK)
        eye = torch.zeros(stop - start, n, dtype=torch.float64, device=device)
        eye[torch.arange(stop - start, device=device), torch.arange(start, stop, device=device)] = 1.0
        parts = torch.split(eye, sizes, dim=1)
        cot = [p.reshape((stop - start,) + leaves[m].shape) for p, m in zip(parts, members)]
        cols = block_vjp(grads, leaves, members, cot, True)
        H[start:stop] = torch.cat([c.reshape(stop - start, -1) for c in cols], dim=1)
    return H
