"""Blocks finer than a tensor: block members that are sub-tensors (slices) of a parameter.

A block member is a parameter name, or ``(parameter name, index)`` with an index of slices and ints
(as in ``W[0:8, :]``) that selects a sub-tensor. :func:`sliced_partition` checks every member before
any work — the name exists, every int and slice bound is inside the tensor, the selection is not
empty, no entry is in two blocks — and gives each sub-tensor its own name, ``"{parameter}[{index}]"``
(``"0.weight[0:8, :]"``): the engine holds it as a leaf of its own (:class:`Piece`), and
:meth:`~.objective.Objective.forward` assembles the parameter from its pieces out of place, so the
user's model and parameter names stay untouched. A member that selects the whole tensor in order
is the parameter itself.

>>> import torch
>>> sp = sliced_partition({"0.weight": torch.Size([4, 3]), "0.bias": torch.Size([4])},
...                       {"top": [("0.weight", (slice(0, 2), slice(None))), ("0.bias", slice(0, 2))],
...                        "all": [("0.weight", (slice(2, 4),))]})
>>> sp.partition
{'top': ['0.weight[0:2, :]', '0.bias[0:2]'], 'all': ['0.weight[2:4]']}
>>> [p.flat.tolist() for p in sp.pieces["0.weight"]]
[[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
>>> sliced_partition({"b": torch.Size([4])}, {"x": [("b", slice(2, 6))]})
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: block 'x': index slice(2, 6, None) of 'b' (shape (4,)) runs past dimension 0 of size 4; pass bounds within 0..4
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.head_blocks import head_blocks

__all__ = ["Piece", "SlicedPartition", "assemble", "gather_index", "member_shapes", "model_partition", "sliced_partition"]

Index = tuple[slice | int, ...]


@dataclass(frozen=True)
class Piece:
    """One sub-tensor of parameter ``param``: its leaf name, its index, its shape and the flat positions
    (row-major, a ``long`` tensor) of its entries in the parameter."""

    leaf: str
    param: str
    index: Index
    shape: torch.Size
    flat: Tensor


@dataclass(frozen=True)
class SlicedPartition:
    """``partition``: block -> member names (parameters, or the leaf names of pieces); ``pieces``:
    parameter -> its pieces (empty when no block holds a slice); ``notes``: what the model should know
    (an attention module ``blocks="head"`` left whole, and why)."""

    partition: dict[str, list[str]]
    pieces: dict[str, list[Piece]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def model_partition(model: nn.Module, blocks: str | Mapping[str, Sequence[object]],
                    skipped: Sequence[str] = ()) -> SlicedPartition:
    """:func:`sliced_partition` of ``model``'s parameters; ``blocks="head"`` is the per-head partition of
    :func:`~.head_blocks.head_blocks` (frozen members dropped).

    >>> net = nn.Sequential(nn.MultiheadAttention(4, 2))
    >>> sp = model_partition(net, "head")
    >>> sp.partition["0.in_proj_weight.v[1]"], sp.pieces["0.in_proj_weight"][5].shape
    (['0.in_proj_weight[10:12, :]', '0.in_proj_bias[10:12]'], torch.Size([2, 4]))
    """
    shapes = {n: p.shape for n, p in model.named_parameters()}
    if isinstance(blocks, str) and blocks == "head":
        heads = head_blocks(model)
        found = sliced_partition(shapes, heads.blocks, skipped, drop_skipped=True)
        return SlicedPartition(found.partition, found.pieces, heads.notes)
    return sliced_partition(shapes, blocks, skipped)


def sliced_partition(shapes: Mapping[str, torch.Size], blocks: str | Mapping[str, Sequence[object]],
                     skipped: Sequence[str] = (), *, drop_skipped: bool = False) -> SlicedPartition:
    """The blocks over the parameters ``shapes`` (name -> shape, in model order) that are not ``skipped``.

    ``blocks`` is ``"tensor"``, ``"layer"`` (see :func:`~.blocks.resolve_blocks`) or a mapping
    ``{block: [member, ...]}`` whose members are parameter names or ``(name, index)``. A member of a
    skipped (frozen) parameter is an error naming ``frozen='include'``, unless ``drop_skipped`` (a
    partition the package built, such as ``blocks="head"``): then it is left out, and a block left
    empty is dropped.

    >>> s = {"w": torch.Size([2, 2])}
    >>> sliced_partition(s, {"a": [("w", 0)], "b": [("w", (slice(None), 1))]})
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: entry (0, 1) of 'w' is in two blocks ('a' and 'b'); pass blocks whose slices do not overlap
    """
    kept = [n for n in shapes if n not in set(skipped)]
    if isinstance(blocks, str):
        if not kept:
            raise InvalidInputError("every parameter is frozen (requires_grad=False); pass frozen='include' to "
                                    "diagnose them anyway")
        return SlicedPartition(resolve_blocks(kept, blocks))
    if not isinstance(blocks, Mapping):
        raise InvalidInputError(f"blocks must be 'tensor', 'layer', 'head' or a mapping, got {type(blocks).__name__}")
    owner: dict[str, Tensor] = {}  # parameter -> block number owning each entry (-1: none)
    names = list(blocks)
    partition: dict[str, list[str]] = {}
    pieces: dict[str, list[Piece]] = {}
    for number, block in enumerate(names):
        members = blocks[block]
        members = [members] if isinstance(members, (str, tuple)) and _is_member(members) else list(members)
        if not members:
            raise InvalidInputError(f"block {block!r} lists no parameters; give it at least one parameter name "
                                    "or (name, index)")
        out = []
        for m in members:
            name, index = _split(block, m)
            if name not in shapes:
                raise InvalidInputError(f"block {block!r} names unknown parameter {name!r}; the model has: "
                                        + ", ".join(shapes))
            if name in skipped:
                if drop_skipped:
                    continue
                raise InvalidInputError(
                    f"block {block!r} names {name!r}, a frozen parameter (requires_grad=False) that frozen='skip' "
                    "leaves out; pass frozen='include' to diagnose it, or drop it from the block")
            shape = torch.Size(shapes[name])
            flat, sub = _positions(block, name, shape, index)
            taken = owner.setdefault(name, torch.full((shape.numel(),), -1, dtype=torch.long))
            clash = taken[flat] >= 0
            if bool(clash.any()):
                at = int(flat[clash][0])
                entry = tuple(int(i) for i in torch.unravel_index(torch.tensor(at), shape)) if shape else ()
                raise InvalidInputError(f"entry {entry} of {name!r} is in two blocks ({names[int(taken[at])]!r} and "
                                        f"{block!r}); pass blocks whose slices do not overlap")
            taken[flat] = number
            if index is None or (flat.numel() == shape.numel() and bool((flat == torch.arange(flat.numel())).all())
                                 and sub == shape):
                out.append(name)
                continue
            piece = Piece(f"{name}[{_text(index)}]", name, index, sub, flat)
            pieces.setdefault(name, []).append(piece)
            out.append(piece.leaf)
        if out:
            partition[str(block)] = out
    if not partition:
        raise InvalidInputError("the block mapping is empty (or names only frozen parameters); pass at least one "
                                "block {name: [parameters]}")
    return SlicedPartition(partition, pieces)


def member_shapes(model: nn.Module, blocks: str | Mapping[str, Sequence[object]]) -> dict[str, list[int]]:
    """The shape of every parameter and of every piece ``blocks`` cuts (by leaf name): what a block's members are.

    >>> member_shapes(nn.Linear(3, 2), {"a": [("weight", 0)]})
    {'weight': [2, 3], 'bias': [2], 'weight[0]': [3]}
    """
    shapes = {n: list(p.shape) for n, p in model.named_parameters()}
    pieces = model_partition(model, blocks).pieces
    return shapes | {pc.leaf: list(pc.shape) for pcs in pieces.values() for pc in pcs}


def assemble(base: Tensor, parts: Sequence[Tensor], gather: Tensor) -> Tensor:
    """Parameter ``base`` with its pieces replaced by ``parts``, out of place and differentiable in every input
    (a concatenation and one gather: safe under ``torch.func.vmap``); ``gather`` is the position in
    ``cat(base, *parts)`` of each entry (:func:`gather_index`).

    >>> import torch
    >>> sp = sliced_partition({"w": torch.Size([2, 2])}, {"a": [("w", (slice(None), 1))]})
    >>> assemble(torch.zeros(2, 2), [torch.tensor([1.0, 2.0])], gather_index(torch.Size([2, 2]), sp.pieces["w"]))
    tensor([[0., 1.],
            [0., 2.]])
    """
    return torch.cat([base.reshape(-1), *[p.reshape(-1) for p in parts]])[gather].reshape(base.shape)


def gather_index(shape: torch.Size, pieces: Sequence[Piece]) -> Tensor:
    """For :func:`assemble`: entry ``i`` of the parameter comes from ``cat(base, *parts)[gather[i]]``."""
    n = shape.numel()
    gather = torch.arange(n)
    offset = n
    for p in pieces:
        gather[p.flat] = offset + torch.arange(p.flat.numel())
        offset += p.flat.numel()
    return gather


def _is_member(m: object) -> bool:
    return isinstance(m, str) or (isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], str)
                                  and not isinstance(m[1], str))


def _split(block: object, m: object) -> tuple[str, Index | None]:
    if isinstance(m, str):
        return m, None
    if not _is_member(m):
        raise InvalidInputError(f"block {block!r} has member {m!r}; a member is a parameter name or (parameter name, "
                                "index) with an index of slices and ints, e.g. ('0.weight', (slice(0, 8), slice(None)))")
    assert isinstance(m, tuple), "a member that is not a name is a (name, index) pair"
    name, index = m
    index = index if isinstance(index, tuple) else (index,)
    for i in index:
        ok = isinstance(i, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                          for v in (i.start, i.stop, i.step)) and (i.step is None or i.step > 0)
        if not ok and not (isinstance(i, int) and not isinstance(i, bool)):
            raise InvalidInputError(f"block {block!r}: index {index!r} of {name!r} holds {i!r}; an index is a tuple of "
                                    "ints and slices with int bounds and a positive step, e.g. (slice(0, 8), 3)")
    return name, index


def _positions(block: object, name: str, shape: torch.Size, index: Index | None) -> tuple[Tensor, torch.Size]:
    """The flat positions the member selects, and the shape of the sub-tensor."""
    n = shape.numel()
    if index is None:
        return torch.arange(n), shape
    if len(index) > len(shape):
        raise InvalidInputError(f"block {block!r}: index {_show(index)} of {name!r} has {len(index)} entries but the "
                                f"tensor has {len(shape)} dimension(s) {tuple(shape)}; pass at most {len(shape)}")
    for dim, (i, size) in enumerate(zip(index, shape)):
        bounds = [i] if isinstance(i, int) else [v for v in (i.start, i.stop) if v is not None]
        limit = size - 1 if isinstance(i, int) else size
        if any(not -size <= v <= limit for v in bounds):
            raise InvalidInputError(f"block {block!r}: index {_show(index)} of {name!r} (shape {tuple(shape)}) runs past "
                                    f"dimension {dim} of size {size}; pass bounds within 0..{limit}")
    sub = torch.arange(n).reshape(shape)[index]
    if sub.numel() == 0:
        raise InvalidInputError(f"block {block!r}: index {_show(index)} of {name!r} (shape {tuple(shape)}) selects no "
                                "entry; pass a non-empty slice")
    return sub.reshape(-1), sub.shape


def _show(index: Index) -> str:
    return repr(index[0]) if len(index) == 1 else repr(index)


def _text(index: Index) -> str:
    def one(i: slice | int) -> str:
        if isinstance(i, int):
            return str(i)
        text = f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}"
        return text + (f":{i.step}" if i.step not in (None, 1) else "")
    return ", ".join(one(i) for i in index)
