"""The projection-output route for per-head attention blocks: dense ``H_bb`` of a head's Q, K, V or O block
from Hessians at the attention projections' outputs, per sequence.

A projection is linear in its own weights: ``Z_n = X_n M + 1bᵀ`` (``X_n`` the ``T × d`` input of sequence
``n``; :mod:`~coupled_curvature.numeric.symmetries.attention_kinds` writes every projection as ``x ↦ xM + b``).
With ``G_n = ∂²L/∂Z_n²`` (``Z_n`` flattened over tokens and the block's columns), and ``X̃_n = [X_n, 1]``::

    H_bb = Σ_n (I ⊗ X̃_n)ᵀ G_n (I ⊗ X̃_n)                                  (exact: Z is affine in the block)

when the loss is a sum of per-sequence terms (sequences do not interact), so ``∂²L/∂Z²`` has no cross-sequence
blocks and one product with a tangent put on every sequence at once gives a column of every ``G_n``. A head's
O block (input rows of the output map ``O``, whose input is the attention output ``A_n``) takes ``G_n`` of the
output map's output ``Y_n = A_n M_O + 1b_Oᵀ`` (``T·E`` columns shared by all heads of the module) and ``A_n``'s
head columns in place of ``X̃_n``. A Q, K or V block of head ``h`` takes ``G_n`` at its columns of the
projection's output from the chain rule through attention, ``L(Z) = ℓ(A(Z))`` with ``A`` the output map's input::

    ∂²L/∂Z_b² = J_bᵀ (M_O^h G^Y M_O^hᵀ) J_b + ∂²⟨∂L/∂A, A⟩/∂Z_b²        (J_b = ∂A_h/∂Z_b)

since ``Y`` is affine in ``A`` (``∂²ℓ/∂A² = M_O G^Y M_Oᵀ``) and ``Z_b`` reaches ``L`` only through head ``h``'s
attention output ``A_h``. ``J_b`` and the last term are derivatives of attention alone (no layer above it), so
the only products through the rest of the network are the ``T·E`` columns of ``G^Y`` per attention module.

The premises (one call per projection on ``(N, T, ·)`` tensors reproduced by ``xM + b``, sequences
independent, ``Z`` reaching ``L`` only through ``A`` and ``A`` only through ``O``) are what the caller checks:
:func:`~coupled_curvature.numeric.core.hvp.block_curvature` compares ``H_bb w`` and ``H_bb r`` (``r`` random)
with exact Hessian-vector products and falls back to them when either differs.

The range of ``H_bb`` lies in ``R^C ⊗ span(rows of every X̃_n)`` (``C`` the block's output columns): with ``V``
(``F × r``) orthonormal columns spanning the rows of the stacked ``X̃`` (:func:`row_basis`), ``H_bb = P M Pᵀ``
exactly, ``P = I_C ⊗ V`` (in the block's entry order) and ``M = Pᵀ H_bb P`` the sandwich of ``X̃V`` in place of
``X̃``. When there are fewer tokens than ``F`` (the input width, ``+ 1`` for a bias) the block is returned so, as
a :class:`ProjectedHessian` of ``C·r`` rows: its non-zero spectrum is ``M``'s, eigenvectors ``P u``, and
``wᵀH⁺_τw = (Pᵀw)ᵀ M⁺_τ (Pᵀw)`` at the same ``τ``, with ``‖w − PPᵀw‖²`` at ``λ = 0``.

An example: a two-head attention module whose projections are submodules; :func:`head_block_requests` finds its
per-head blocks and :func:`head_block_hessians` gives one equal to the exact Hessian of the block:

>>> from coupled_curvature.numeric.core.inputs import prepare_batches
>>> from coupled_curvature.numeric.core.slices import model_partition
>>> class Heads(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.q, self.k, self.v, self.o, self.num_heads = (*(nn.Linear(4, 4) for _ in range(4)), 2)
...     def forward(self, x):
...         q, k, v = (m(x).unflatten(-1, (2, 2)).transpose(1, 2) for m in (self.q, self.k, self.v))
...         a = torch.softmax(q @ k.transpose(-1, -2), -1) @ v
...         return self.o(a.transpose(1, 2).flatten(-2))
>>> torch.manual_seed(0) and None
>>> net = Heads().double()
>>> sp = model_partition(net, "head")
>>> X = torch.randn(2, 3, 4, dtype=torch.float64)
>>> ob = Objective(net, nn.MSELoss(), prepare_batches((X, X), nn.MSELoss()), pieces=sp.pieces)
>>> r = head_block_requests(ob, sp.partition)
>>> sorted(r)[:3], r["k.k[1]"].kind, r["k.k[1]"].head, sum(flat.numel() for _, flat in r["k.k[1]"].entries)
(['k.k[0]', 'k.k[1]', 'o.o[0]'], 'k', 1, 10)
>>> H = head_block_hessians(ob, 0, r)["q.q[1]"]
>>> leaves = {n: v.clone().requires_grad_(True) for n, v in ob.values.items()}
>>> members = sp.partition["q.q[1]"]
>>> g = torch.autograd.grad(ob.batch_loss(0, leaves), [leaves[m] for m in members], create_graph=True)
>>> exact = torch.stack([torch.cat([c.reshape(-1) for c in torch.autograd.grad(
...     torch.cat([x.reshape(-1) for x in g])[i], [leaves[m] for m in members], retain_graph=True)])
...     for i in range(H.shape[0])])
>>> tuple(H.shape), bool(torch.allclose(H, exact, rtol=1e-10, atol=1e-12))
((10, 10), True)
>>> projected_sizes(ob, sp.partition)["q.q[0]"]  # 2 output columns x min(6 tokens, 4 + 1); 6 tokens seen
(10, 6)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.calling import n_samples
from coupled_curvature.numeric.core.head_blocks import head_blocks
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.probe import leaves_no_trace
from coupled_curvature.numeric.core.slices import sliced_partition
from coupled_curvature.numeric.factors.projected_hessian import ProjectedHessian, row_basis
from coupled_curvature.numeric.symmetries.attention_kinds import (
    AttentionLayout,
    Projection,
)

__all__ = ["HeadBlock", "head_block_hessians", "head_block_requests", "projected_sizes"]

_CHUNK = 16  # tangents per batched product
_BUDGET = 1 << 30  # bytes of one module's output Hessian G (N·(T·E)² float64 entries); larger: left out


@dataclass(frozen=True)
class HeadBlock:
    """A block that is exactly head ``head``'s ``kind`` (``"q"``, ``"k"``, ``"v"`` or ``"o"``) block of ``layout``;
    ``entries``: per block entry (in the block's flat order), its parameter and flat position there."""

    layout: AttentionLayout
    kind: str
    head: int
    entries: tuple[tuple[str, Tensor], ...]


def projected_sizes(objective: Objective, partition: Mapping[str, Sequence[str]]) -> dict[str, tuple[int, int]]:
    """Per per-head block of ``partition`` (:func:`head_block_requests`): ``(C·min(rows, F), rows)``, a bound on the
    size of the matrix :func:`head_block_hessians` eigendecomposes (:class:`ProjectedHessian`), ``rows`` the
    projection input's rows (tokens) over every batch, seen in one forward pass per batch (no graph; as the
    probe of :func:`~coupled_curvature.numeric.core.probe.probe_batches`, with the RNG forked and the buffers
    restored, so a train-mode Dropout or BatchNorm leaves no trace). The module docstring's example sizes its
    blocks.
    """
    requests = head_block_requests(objective, partition)
    if not requests:
        return {}
    rows: dict[str, int] = {}

    def count(path: str):
        def hook(module: nn.Module, inputs: tuple, output: object) -> None:
            x = inputs[0] if inputs else None
            if isinstance(x, Tensor) and x.dim() >= 1:
                rows[path] = rows.get(path, 0) + x[..., 0].numel()
        return hook

    paths = {getattr(r.layout, r.kind).module for r in requests.values()}
    handles = [objective.model.get_submodule(p).register_forward_hook(count(p)) for p in paths]
    try:
        with leaves_no_trace(objective.model), torch.no_grad():
            for i in range(len(objective.batches)):
                objective.batch_loss(i, objective.values)
    finally:
        for h in handles:
            h.remove()
    out = {}
    for b, r in requests.items():
        p = getattr(r.layout, r.kind)
        C = _matrix(objective, p).shape[1] if r.kind == "o" else r.layout.head_dim
        F = sum(flat.numel() for _, flat in r.entries) // C
        n = rows.get(p.module, 0)
        out[b] = (C * min(n, F), n)
    return out


def head_block_requests(objective: Objective, partition: Mapping[str, Sequence[str]]) -> dict[str, HeadBlock]:
    """The blocks of ``partition`` (members as :class:`~.objective.Objective` names them) that hold exactly one
    head's Q, K, V or O entries of a recognised attention module whose projections are submodules (not
    ``nn.MultiheadAttention``, whose projections run inside one function); others are left out. The
    module docstring's example finds the blocks of a two-head attention module.
    """
    heads = head_blocks(objective.model)
    modular = {lay.name: lay for lay in heads.layouts if _modular(objective.model, lay)}
    if not modular:
        return {}
    shapes = {n: p.shape for n, p in objective.model.named_parameters()}
    expected = sliced_partition(shapes, heads.blocks)
    leaf_of = {p.leaf: p for ps in expected.pieces.values() for p in ps}
    wanted: dict[tuple, tuple[AttentionLayout, str, int]] = {}
    for name, sliced in expected.partition.items():
        kind, _, rest = name.rpartition(".")[2].partition("[")
        if not rest.endswith("]") or kind not in ("q", "k", "v", "o"):
            continue
        prefix = name.rpartition(".")[0]
        for lay in modular.values():
            p = getattr(lay, kind)
            if _param(p, p.weight).removesuffix(".weight") == prefix:
                wanted[_key(_entries(sliced, leaf_of, shapes))] = (lay, kind, int(rest[:-1]))
    mine = {p.leaf: p for ps in objective.pieces.values() for p in ps}
    out = {}
    for block, members in partition.items():
        entries = _entries(members, mine, shapes)
        found = wanted.get(_key(entries)) if entries is not None else None
        if found is not None and entries is not None:
            out[block] = HeadBlock(*found, tuple(entries))
    return out


def head_block_hessians(objective: Objective, batch: int, requests: Mapping[str, HeadBlock], *,
                        project: bool = False) -> dict[str, Tensor | ProjectedHessian]:
    """Dense ``H_bb`` of batch ``batch`` for every block of ``requests`` (:func:`head_block_requests`), by the
    projection-output route (module docstring); blocks whose attention module does not fit its premises that
    can be seen in one forward pass (a projection called twice, inputs not ``(N, T, d)``, an output ``xM + b``
    does not reproduce) are left out, and so are those whose ``G`` would exceed 1 GiB. Run it under :func:`~coupled_curvature.numeric.core.hvp.math_attention`.
    With ``project``, a block whose inputs' rows do not span ``R^F`` comes as a :class:`ProjectedHessian` (exact,
    smaller: module docstring). The module docstring's example checks one block against the exact Hessian.
    """
    layouts = {r.layout.name: r.layout for r in requests.values()}
    model = objective.model
    n = n_samples(objective.batches[batch].X)
    calls: dict[str, list] = {}
    shifts: dict[str, Tensor] = {}
    into_o: dict[str, Tensor] = {}

    def shift(path: str):
        def hook(module: nn.Module, inputs: tuple, output: object) -> object:
            calls.setdefault(path, []).append((inputs[0], output))
            if not isinstance(output, Tensor) or output.dim() != 3 or output.shape[0] != n or path in shifts:
                return None
            shifts[path] = torch.zeros_like(output, requires_grad=True)
            return output + shifts[path]
        return hook

    paths = {p.module for lay in layouts.values() for p in (lay.q, lay.k, lay.v, lay.o)}
    handles = [model.get_submodule(p).register_forward_hook(shift(p)) for p in paths]
    try:
        with torch.enable_grad():
            loss = objective.batch_loss(batch, objective.values)
    finally:
        for h in handles:
            h.remove()
    usable = {name: lay for name, lay in layouts.items() if all(
        len(calls.get(p.module, [])) == 1 and p.module in shifts and _reproduces(objective, p, *calls[p.module][0])
        for p in (lay.q, lay.k, lay.v, lay.o)) and 8 * shifts[lay.o.module][0].numel() ** 2 * n <= _BUDGET}
    if not usable or not loss.requires_grad:
        return {}
    for name, lay in usable.items():
        into_o[name] = calls[lay.o.module][0][0]
    outs = [shifts[lay.o.module] for lay in usable.values()]
    firsts = torch.autograd.grad(loss, outs + list(into_o.values()), create_graph=True, allow_unused=True)
    result = {}
    for i, (name, lay) in enumerate(usable.items()):
        gY, gA = firsts[i], firsts[len(usable) + i]
        Y = shifts[lay.o.module]
        GY = _pullback(gY if gY is not None else Y.detach(), Y, [range(Y.shape[2])], [range(Y.shape[2])])[0]
        mine = {b: r for b, r in requests.items() if r.layout.name == name}
        if any(r.kind != "o" for r in mine.values()):
            result.update(_projection_blocks(objective, lay, mine, calls, shifts, into_o[name], gA, GY, project))
        for b, r in mine.items():
            if r.kind == "o":
                A = into_o[name].detach()[..., r.head * lay.value_dim:(r.head + 1) * lay.value_dim]
                result[b] = _block(A, GY, r, objective, project)
    return result


def _projection_blocks(objective: Objective, lay: AttentionLayout, blocks: Mapping[str, HeadBlock], calls: dict,
                       shifts: dict, A: Tensor, gA: Tensor | None, GY: Tensor,
                       project: bool) -> dict[str, Tensor | ProjectedHessian]:
    """The Q, K and V blocks of one attention module: ``G`` at their columns of the projection output by the
    chain rule through ``A`` (module docstring), then the sandwich with the projection input. The products
    through attention put one tangent on the same column of every head at once (heads do not interact)."""
    MO = _matrix(objective, lay.o)  # (inputs × outputs)
    GA = torch.einsum("io,ntosp,jp->ntisj", MO, GY, MO)  # ∂²L/∂A², A the output map's input
    modules = list(dict.fromkeys(p.module for p in (lay.q, lay.k, lay.v)))
    inner = [shifts[m] for m in modules]
    s = (gA.detach() * A).sum() if gA is not None else None
    g_in = torch.autograd.grad(s, inner, create_graph=True, allow_unused=True) if s is not None and s.requires_grad \
        else [None] * len(inner)
    heads = [range(h * lay.value_dim, (h + 1) * lay.value_dim) for h in range(lay.heads)]
    out: dict[str, Tensor | ProjectedHessian] = {}
    for kind in dict.fromkeys(r.kind for r in blocks.values() if r.kind != "o"):
        p = getattr(lay, kind)
        x = shifts[p.module]
        cols = [range(p.start + h * lay.head_dim, p.start + (h + 1) * lay.head_dim) for h in range(lay.heads)]
        Js = _pullback(A, x, heads, cols)  # [n, tz, cz, ta, ia] = ∂A[n,ta,ia]/∂Z[n,tz,cz] per head
        g = g_in[modules.index(p.module)]
        Ss = _pullback(g, x, cols, cols) if g is not None else None
        X = calls[p.module][0][0].detach()
        Xt = torch.cat([X, torch.ones(X.shape[:-1] + (1,), dtype=X.dtype, device=X.device)], dim=-1)
        for b, r in blocks.items():
            if r.kind != kind:
                continue
            J, hs = Js[r.head], heads[r.head]
            N, T, d = J.shape[0], J.shape[1], J.shape[2]
            Jm = J.reshape(N, T * d, -1)
            GAh = GA[:, :, hs.start:hs.stop, :, hs.start:hs.stop].reshape(N, Jm.shape[2], Jm.shape[2])
            G = Jm @ GAh @ Jm.transpose(1, 2)
            if Ss is not None:
                G = G + Ss[r.head].reshape(N, T * d, T * d)
            out[b] = _block(Xt, G.reshape(N, T, d, T, d), r, objective, project)
    return out


def _pullback(y: Tensor, x: Tensor, feats: Sequence[range], keep: Sequence[range]) -> list[Tensor]:
    """Per pair ``(F, K)`` of ``feats`` and ``keep`` (ranges of equal lengths within each): ``[n, t', c', t, c] =
    ∂y[n, t, F[c]]/∂x[n, t', K[c']]`` (``y``, ``x``: ``(N, T, ·)``). Each batched product puts the cotangent
    ``e_(t, F[c])`` on every sequence and every range ``F`` at once: exact when neither sequences nor the pairs
    interact (what the caller's check confirms)."""
    N, T, width = y.shape[0], y.shape[1], len(feats[0])
    out = [torch.zeros(N, T, len(k), T, width, dtype=y.dtype, device=y.device) for k in keep]
    if not y.requires_grad:
        return out
    total = T * width
    for lo in range(0, total, _CHUNK):
        j = torch.arange(lo, min(total, lo + _CHUNK), device=y.device)
        cot = torch.zeros((len(j),) + tuple(y.shape), dtype=y.dtype, device=y.device)
        for f in feats:
            cot[torch.arange(len(j), device=y.device), :, j // width, f.start + j % width] = 1.0
        (r,) = torch.autograd.grad(y, [x], cot, retain_graph=True, allow_unused=True, is_grads_batched=True)
        if r is None:
            continue
        for o, k in zip(out, keep):
            o.reshape(N, T, len(k), total)[..., lo:lo + len(j)] = r[..., k.start:k.stop].permute(1, 2, 3, 0)
    return out


def _sandwich(X: Tensor, G: Tensor) -> Tensor:
    """``H[(c, i), (c', j)] = Σ_n Σ_{t,s} X[n,t,i] G[n,t,c,s,c'] X[n,s,j]``: the Hessian in the weights of a map
    ``Z[n,t,c] = Σ_i X[n,t,i] W[i,c]`` from ``G = ∂²L/∂Z²`` (``(C·I) × (C·I)``, ``c`` major)."""
    right = torch.einsum("ntcsk,nsj->ntckj", G, X)
    H = torch.einsum("nti,ntckj->cikj", X, right)
    C, I = H.shape[0], H.shape[1]
    H = H.reshape(C * I, C * I)
    return 0.5 * (H + H.T)


def _block(X: Tensor, G: Tensor, r: HeadBlock, objective: Objective, project: bool) -> Tensor | ProjectedHessian:
    """The block's ``H_bb`` from its input ``X`` (``(N, T, F)``) and ``G``: the sandwich in the block's entry order,
    or, with ``project`` and fewer independent input rows than the columns the block uses, the sandwich of
    ``X V`` as a :class:`ProjectedHessian`."""
    at = _order(r, objective).to(X.device)
    C, F = G.shape[2], X.shape[-1]
    if project:
        used = torch.unique(at % F)  # input columns the block has entries for (no bias entry: the ones column left out)
        if at.numel() == C * used.numel():
            Xu = X[..., used.to(X.device)]
            V = row_basis(Xu.reshape(-1, used.numel()))
            if V is not None:
                position = torch.searchsorted(used, at % F)
                return ProjectedHessian(_sandwich(Xu @ V, G), V, (at // F) * used.numel() + position)
    return _sandwich(X, G)[at][:, at]


def _order(r: HeadBlock, objective: Objective) -> Tensor:
    """Per block entry, its position in ``H`` (``c``-major over the head's columns and the input features + 1 for a
    bias, or over the outputs and the head's input rows for O): ``H[at][:, at]`` is in the block's own order."""
    lay = r.layout
    p = getattr(lay, r.kind)
    weight = _param(p, p.weight)
    shape = objective.model.get_parameter(weight).shape
    width, fan = (shape[0], shape[1]) if p.rows else (shape[1], shape[0])  # outputs, inputs of x ↦ xM
    idx = []
    for param, flat in r.entries:
        if param == weight:
            out_f, in_f = (flat // fan, flat % fan) if p.rows else (flat % width, flat // width)
            if r.kind == "o":
                idx.append(out_f * lay.value_dim + in_f - r.head * lay.value_dim)
            else:
                idx.append((out_f - p.start - r.head * lay.head_dim) * (fan + 1) + in_f)
        else:
            start = dict(p.vectors)[param.rpartition(".")[2]]
            idx.append((flat - start - r.head * lay.head_dim) * (fan + 1) + fan)
    return torch.cat(idx)


def _reproduces(objective: Objective, p: Projection, x: object, z: object) -> bool:
    """The call's output is ``x·M + b`` of projection ``p`` on a ``(N, T, d)`` input (a plain projection)."""
    if not isinstance(x, Tensor) or not isinstance(z, Tensor) or x.dim() != 3 or z.dim() != 3:
        return False
    M = _matrix(objective, p)
    if x.shape[-1] != M.shape[0] or z.shape[-1] != M.shape[1]:
        return False
    rec = x.detach() @ M
    bias = p.vectors[0][0] if p.vectors else None
    b = objective.values.get(_param(p, bias)) if bias else None
    if b is not None:
        rec = rec + b
    scale = max(float(z.detach().abs().max()), float(rec.abs().max()), 1e-300)
    return float((rec - z.detach()).abs().max()) <= 1e-9 * scale


def _matrix(objective: Objective, p: Projection) -> Tensor:
    """``M`` (inputs × outputs) of the projection's whole tensor."""
    t = objective.values[_param(p, p.weight)]
    return t.t() if p.rows else t


def _modular(model: nn.Module, lay: AttentionLayout) -> bool:
    """Q, K, V and O are submodules whose own call computes the projection (hookable), each with one bias at most."""
    for p in (lay.q, lay.k, lay.v, lay.o):
        if type(model.get_submodule(p.module)) is nn.MultiheadAttention or len(p.vectors) > 1:
            return False
        if not (p.module and p.weight == "weight"):
            return False
    return True


def _param(p: Projection, attr: str) -> str:
    return f"{p.module}.{attr}" if p.module else attr


def _entries(members: Sequence[str], pieces: Mapping, shapes: Mapping[str, torch.Size]) -> list | None:
    out = []
    for m in members:
        if m in pieces:
            out.append((pieces[m].param, pieces[m].flat))
        elif m in shapes:
            out.append((m, torch.arange(shapes[m].numel())))
        else:
            return None
    return out


def _key(entries: list | None) -> tuple:
    return tuple(sorted((param, tuple(flat.tolist())) for param, flat in entries or ()))
