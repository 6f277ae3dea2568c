"""Data-parallel diagnostics on ``torch.distributed``: shard the data, sum per-shard curvature.

Rank ``r`` holds a shard ``S_r`` of the samples (the shards partition the data) and the same
model. Every quantity :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` accumulates is a
sum over samples, so with ``L = Σ_r L_r`` (``L_r`` the loss of shard ``r``, weighted as a part of
the whole data set)::

    g_b = Σ_r g_b^(r),   H_bb w_b = Σ_r H_bb^(r) w_b,   H_bb = Σ_r H_bb^(r)

and one all-reduce (sum) per quantity gives every rank the single-process values, up to the
order of floating-point additions. "Weighted as a part of the whole" matters for mean-reduction
losses: a batch of ``n_b`` samples must carry weight ``n_b/N`` with ``N`` the count over *all*
ranks (:func:`global_batches`), not over this rank's shard. ``diagnose(..., process_group=group)``
uses :func:`reduce_block_curvature` and :func:`all_reduce_sum`; :func:`shard` splits a data set,
:func:`check_replicated` checks that every rank holds the same model. ``ccurv diagnose`` under
``torchrun`` is the launcher (:mod:`coupled_curvature.numeric.studies.launch`, ``docs/distributed.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError

__all__ = [
    "RankCollective", "all_reduce_sum", "broadcast_model", "check_replicated", "check_same_options", "global_batches",
    "reduce_block_curvature", "shard", "shard_sizes",
]


# ---------------------------------------------------------------------------- collectives


def _dist():
    import torch.distributed as dist

    if not dist.is_available():
        raise InvalidInputError("this torch build has no torch.distributed; install a build with it")
    if not dist.is_initialized():
        raise InvalidInputError(
            "torch.distributed is not initialised: call torch.distributed.init_process_group(...) "
            "(or start the run with torchrun) before passing a process group"
        )
    return dist


def _comm_device(group) -> torch.device:
    """Where the backend reduces: the current CUDA device for nccl, the CPU otherwise."""
    dist = _dist()
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(t: Tensor, group) -> Tensor:
    """``t ← Σ_r t_r`` over the ranks of ``group``, in place; returns ``t``.

    Every rank receives the same values. Tensors on another device than the backend's
    (CPU tensors under nccl) travel through a temporary copy.

    >>> import torch, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> all_reduce_sum(torch.tensor([1.5, 2.0], dtype=torch.float64), dist.group.WORLD)
    tensor([1.5000, 2.0000], dtype=torch.float64)
    >>> dist.destroy_process_group()
    """
    if not isinstance(t, Tensor):
        raise InvalidInputError(f"all_reduce_sum needs a torch.Tensor, got {type(t).__name__}")
    dist = _dist()
    device = _comm_device(group)
    if t.device == device and t.is_contiguous():
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
        return t
    buf = t.detach().to(device=device, copy=True).contiguous()
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    with torch.no_grad():
        t.copy_(buf)
    return t


def _gather_objects(obj: object, group) -> list:
    dist = _dist()
    out: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def _layout(curv: Mapping) -> list[tuple]:
    """Per block, what every rank must agree on before any tensor is summed."""
    rows = []
    for name in sorted(curv):
        c = curv[name]
        dense = None if c.dense is None else tuple(c.dense.shape)
        rows.append((name, tuple(c.grad.shape), tuple(c.Hw.shape), dense, str(c.grad.dtype)))
    return rows


def _disagreement(layouts: Sequence[list[tuple]]) -> str | None:
    """A description of the first difference between rank 0's layout and another rank's."""
    ref = layouts[0]
    for r, lay in enumerate(layouts[1:], start=1):
        if lay == ref:
            continue
        names0, names_r = [row[0] for row in ref], [row[0] for row in lay]
        if names0 != names_r:
            return f"rank 0 has blocks {names0} but rank {r} has {names_r}"
        for a, b in zip(ref, lay):
            if a[3] is None and b[3] is not None or a[3] is not None and b[3] is None:
                have, lack = (r, 0) if a[3] is None else (0, r)
                return (f"block {a[0]!r}: rank {have} built a dense Hessian block and rank {lack} "
                        "did not (different inverse/max_dense/method options on different ranks?)")
            if a != b:
                return f"block {a[0]!r}: rank 0 has (grad, Hw, dense, dtype) = {a[1:]} but rank {r} has {b[1:]}"
    return None


def reduce_block_curvature(curv: dict, group) -> None:
    """Sum every block's ``grad``, ``Hw`` and ``dense`` over the ranks of ``group``, in place.

    ``curv`` maps block names to :class:`~coupled_curvature.numeric.core.hvp.CurvatureSums`; after
    the call ``curv[b].grad = Σ_r g_b^(r)``, ``curv[b].Hw = Σ_r (H_bb w_b)^(r)`` and
    ``curv[b].dense = Σ_r H_bb^(r)`` on every rank, and ``curv[b].notes`` is the union of all
    ranks' notes (rank order). The ranks first exchange the block layout (names, shapes, which
    blocks are dense); if they disagree every rank raises the same ``InvalidInputError`` before
    any tensor is summed, so a misconfigured run fails instead of hanging or mixing blocks.

    >>> import torch, torch.distributed as dist
    >>> from coupled_curvature.numeric.core.hvp import CurvatureSums
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> one = torch.ones(2, dtype=torch.float64)
    >>> curv = {"w": CurvatureSums(one.clone(), 2 * one, torch.eye(2, dtype=torch.float64), ["x"])}
    >>> reduce_block_curvature(curv, dist.group.WORLD)
    >>> curv["w"].Hw, curv["w"].notes
    (tensor([2., 2.], dtype=torch.float64), ['x'])
    >>> dist.destroy_process_group()
    """
    if not isinstance(curv, Mapping):
        raise InvalidInputError(f"curv must map block names to CurvatureSums, got {type(curv).__name__}")
    layout = _layout(curv)
    gathered = _gather_objects({"layout": layout, "notes": {n: list(curv[n].notes) for n in curv}}, group)
    problem = _disagreement([g["layout"] for g in gathered])
    if problem is not None:
        raise InvalidInputError(
            "the ranks disagree on the curvature blocks, so their sums would be meaningless: "
            f"{problem}. Run diagnose with the same model and options on every rank."
        )
    names = [row[0] for row in layout]
    if not names:
        return
    flat = torch.cat([torch.cat([curv[n].grad.reshape(-1), curv[n].Hw.reshape(-1)]) for n in names])
    all_reduce_sum(flat, group)
    start = 0
    for n in names:
        for t in (curv[n].grad, curv[n].Hw):
            t.copy_(flat[start : start + t.numel()].reshape(t.shape))
            start += t.numel()
        if curv[n].dense is not None:
            all_reduce_sum(curv[n].dense, group)
        merged: list[str] = []
        for g in gathered:
            merged += [note for note in g["notes"].get(n, []) if note not in merged]
        curv[n].notes[:] = merged


class RankCollective:
    """The collectives the Gram route needs over the ranks of ``group``: sums, rows gathered in rank
    order, and small Python objects (verdicts, counts) that every rank must agree on.

    >>> import torch, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> c = RankCollective(dist.group.WORLD)
    >>> c.gather_rows(torch.ones(2, 3, dtype=torch.float64)).shape, c.objects("x")
    (torch.Size([2, 3]), ['x'])
    >>> dist.destroy_process_group()
    """

    def __init__(self, group) -> None:
        self.group = group

    def sum(self, t: Tensor) -> Tensor:
        """``Σ_r t_r`` on every rank (in place)."""
        return all_reduce_sum(t, self.group)

    def objects(self, obj: object) -> list:
        """Every rank's ``obj``, in rank order."""
        return _gather_objects(obj, self.group)

    def gather_rows(self, t: Tensor) -> Tensor:
        """The rows of every rank's ``t`` (same columns, any number of rows), stacked in rank order."""
        dist = _dist()
        counts = self.objects(int(t.shape[0]))
        width = max(counts)
        device = _comm_device(self.group)
        buf = torch.zeros((width, *t.shape[1:]), dtype=t.dtype, device=device)
        buf[: t.shape[0]] = t.to(device)
        parts = [torch.empty_like(buf) for _ in counts]
        dist.all_gather(parts, buf, group=self.group)
        return torch.cat([p[:k] for p, k in zip(parts, counts)]).to(t.device)


def check_same_options(options: Mapping[str, object], group) -> None:
    """Every rank must run with the same options: else each raises the same ``InvalidInputError``
    before any collective that would hang or mix blocks."""
    gathered = _gather_objects({k: repr(v) for k, v in options.items()}, group)
    for r, other in enumerate(gathered[1:], start=1):
        if other != gathered[0]:
            diff = sorted(k for k in set(other) | set(gathered[0]) if other.get(k) != gathered[0].get(k))
            raise InvalidInputError(
                f"the ranks run with different options ({', '.join(diff)}: rank 0 has "
                f"{', '.join(f'{k}={gathered[0].get(k)}' for k in diff)}, rank {r} has "
                f"{', '.join(f'{k}={other.get(k)}' for k in diff)}); run diagnose with the same options on every rank")


def global_batches(batches: Sequence, loss_fn, group, reduction: str | None = None) -> list:
    """This rank's batches reweighted as parts of the data of all ranks of ``group``.

    ``prepare_batches`` weights a mean-reduction batch by ``n_b / N_r`` with ``N_r`` this rank's
    sample count, so summing ranks would give ``Σ_r L_r`` with ``L_r`` a *local* mean. With
    ``N = Σ_r N_r`` (one gather, which also checks that every rank uses the same reduction) the
    weight becomes ``n_b / N`` and ``Σ_r Σ_b n_b/N · mean_b ℓ = Σ_samples ℓ / N`` is the
    single-process loss. Sum-reduction batches keep weight 1. ``reduction`` overrides
    ``loss_fn.reduction`` as in ``diagnose``.

    >>> import torch, torch.distributed as dist
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> ce = torch.nn.CrossEntropyLoss()
    >>> b = prepare_batches([(torch.zeros(3, 2), torch.zeros(3)), (torch.zeros(1, 2), torch.zeros(1))], ce)
    >>> [x.weight for x in global_batches(b, ce, dist.group.WORLD)]
    [0.75, 0.25]
    >>> dist.destroy_process_group()
    """
    from coupled_curvature.numeric.core.inputs import Batch, loss_reduction

    reduction = loss_reduction(loss_fn, reduction)
    n_local = sum(b.n for b in batches)
    gathered = _gather_objects((reduction, n_local), group)
    if len({r for r, _ in gathered}) > 1:
        raise InvalidInputError(
            f"the ranks use different loss reductions ({[r for r, _ in gathered]} by rank); use the same "
            "loss_fn on every rank"
        )
    if reduction == "sum":
        return list(batches)
    total = sum(n for _, n in gathered)
    return [Batch(b.X, b.y, b.n / total) for b in batches]


def _state_vector(model: nn.Module) -> tuple[list[tuple], Tensor]:
    items = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers() if b is not None]
    layout = [(n, tuple(t.shape), str(t.dtype)) for n, t in items]
    parts = [t.detach().reshape(-1).to(torch.float64) for _, t in items if not t.is_complex()]
    return layout, torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def check_replicated(model: nn.Module, group) -> None:
    """Raise ``InvalidInputError`` on every rank unless all ranks hold bit-identical parameters and buffers.

    Compares names, shapes and dtypes (one object gather), then the values: one all-reduce
    (max) of ``[v, −v]`` gives ``max_r v_r`` and ``min_r v_r`` elementwise, equal iff every
    rank holds the same ``v`` (values are compared in float64, exact for every float dtype).

    >>> import torch, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> check_replicated(torch.nn.Linear(2, 2), dist.group.WORLD)
    >>> dist.destroy_process_group()
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dist = _dist()
    layout, v = _state_vector(model)
    layouts = _gather_objects(layout, group)
    for r, lay in enumerate(layouts):
        if lay != layouts[0]:
            raise InvalidInputError(
                f"rank {r} holds a model with other parameters/buffers than rank 0 "
                "(names, shapes or dtypes differ); build the same model on every rank"
            )
    both = torch.cat([v, -v]).to(_comm_device(group))
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    both = both.cpu()
    hi, lo = both[: v.numel()], -both[v.numel() :]
    if not bool(torch.equal(hi, lo)):
        n_diff = int((hi != lo).sum())
        raise InvalidInputError(
            f"the ranks hold different model values ({n_diff} of {v.numel()} entries differ, or are "
            "NaN); every rank must diagnose the same model: build it from the same seed and state, "
            "or broadcast rank 0's state_dict"
        )


def broadcast_model(model: nn.Module, group, src: int = 0) -> None:
    """Overwrite every rank's parameters and buffers with rank ``src``'s values, in place.

    >>> import torch, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> net = torch.nn.Linear(2, 2); before = net.weight.detach().clone()
    >>> broadcast_model(net, dist.group.WORLD)
    >>> bool(torch.equal(net.weight, before))  # one rank: it keeps its own values
    True
    >>> dist.destroy_process_group()
    """
    dist = _dist()
    device = _comm_device(group)
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            buf = t.detach().to(device=device, copy=True).contiguous()
            dist.broadcast(buf, src=src, group=group)
            t.copy_(buf)


# ---------------------------------------------------------------------------- data


def _bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    q, rem = divmod(n, world_size)
    start = rank * q + min(rank, rem)
    return start, start + q + (1 if rank < rem else 0)


def shard(data: tuple, rank: int, world_size: int, *, strategy: str = "contiguous") -> tuple:
    """Rank ``rank``'s part of ``data = (X, y)``; the ``world_size`` parts partition the samples.

    ``"contiguous"``: with ``N = q·W + m``, rank ``r`` gets rows ``[s_r, s_r + q + [r < m])``,
    ``s_r = r·q + min(r, m)`` (sizes differ by at most one, concatenating the parts in rank order
    gives ``data`` back). ``"strided"``: rows ``r, r + W, r + 2W, …``. Returns views (no copy).

    >>> import torch
    >>> X, y = torch.arange(10.).reshape(5, 2), torch.arange(5)
    >>> [shard((X, y), r, 2)[1].tolist() for r in range(2)]
    [[0, 1, 2], [3, 4]]
    >>> shard((X, y), 1, 2, strategy="strided")[1].tolist()
    [1, 3]
    """
    for what, v in (("rank", rank), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidInputError(f"{what} must be an int, got {v!r}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise InvalidInputError(
            f"need world_size ≥ 1 and 0 ≤ rank < world_size, got rank={rank}, world_size={world_size}"
        )
    if strategy not in ("contiguous", "strided"):
        raise InvalidInputError(f"strategy must be 'contiguous' or 'strided', got {strategy!r}")
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(hasattr(d, "shape") for d in data)):
        raise InvalidInputError("data must be an (X, y) pair of tensors or arrays with a leading sample axis")
    X, y = data
    if len(X.shape) == 0 or len(y.shape) == 0 or X.shape[0] != y.shape[0]:
        raise InvalidInputError(
            f"X and y need the same leading (sample) dimension, got shapes {tuple(X.shape)} and {tuple(y.shape)}"
        )
    n = int(X.shape[0])
    if n < world_size:
        raise InvalidInputError(f"{n} samples cannot fill {world_size} non-empty shards; use fewer processes")
    if strategy == "strided":
        return X[rank::world_size], y[rank::world_size]
    a, b = _bounds(n, rank, world_size)
    return X[a:b], y[a:b]


def shard_sizes(n: int, world_size: int) -> tuple[int, ...]:
    """The sizes of the contiguous shards :func:`shard` cuts ``n`` samples into.

    >>> shard_sizes(61, 2)
    (31, 30)
    """
    return tuple(_bounds(n, r, world_size)[1] - _bounds(n, r, world_size)[0] for r in range(world_size))
