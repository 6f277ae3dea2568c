"""``blocks="head"``: every recognised attention module split into per-head blocks of Q, K, V and O.

Attention's group (T13) acts per head: ``W_Q^h → W_Q^h A``, ``W_K^h → W_K^h A⁻ᵀ``, ``W_V^h → W_V^h B`` and
the head's input rows of the output map ``→ B⁻¹·(rows)``. A per-head map is not conformal on a whole
tensor, but a ``c·Q`` map of one head is conformal on that head's block, so ``D`` and ``D⁺`` of the
head's blocks are exact under it (T4). Each attention module that
:func:`~coupled_curvature.numeric.symmetries.attention_kinds.attention_layout` recognises (GPT-2's fused
``c_attn``/``c_proj``, BERT's ``query/key/value/output.dense``, ``nn.MultiheadAttention``'s
``in_proj_weight``/``out_proj``, ``nn.TransformerEncoderLayer``'s ``self_attn``, ViT, a declared
q/k/v/o module) gives, per head ``h``:

- ``{W}.q[h]``, ``{W}.k[h]``, ``{W}.v[h]``: the head's output columns of the projection's weight together
  with its entries of the bias (and of ``bias_k``/``bias_v``), which transform together under ``A``;
- ``{O}.o[h]``: the head's input rows of the output map (its bias is not per head: a tensor block);

where ``{W}`` is the weight parameter's name without a trailing ``.weight`` (``h.0.attn.c_attn.q[3]``,
``layer.0.attention.self.query.q[1]``, ``enc.layers.0.self_attn.in_proj_weight.k[0]``,
``h.0.attn.c_proj.o[3]``). Every other parameter stays a tensor block, in parameter order.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from coupled_curvature.numeric.symmetries.attention_kinds import (
    AttentionLayout,
    Projection,
    attention_modules,
)

__all__ = ["HeadBlocks", "head_blocks"]

Member = str | tuple[str, tuple]


@dataclass(frozen=True)
class HeadBlocks:
    """``blocks``: the explicit partition ``{block: [members]}`` (members as
    :func:`~.slices.sliced_partition` takes them); ``layouts``: the attention modules split;
    ``notes``: attention-like modules left whole, with the reason."""

    blocks: dict[str, list[Member]]
    layouts: tuple[AttentionLayout, ...]
    notes: tuple[str, ...]


def head_blocks(model: nn.Module) -> HeadBlocks:
    """The per-head partition of ``model`` (see the module docstring for the names).

    >>> import torch
    >>> net = nn.Sequential(nn.MultiheadAttention(4, 2), )
    >>> hb = head_blocks(net)
    >>> list(hb.blocks)
    ['0.in_proj_weight.q[0]', '0.in_proj_weight.q[1]', '0.in_proj_weight.k[0]', '0.in_proj_weight.k[1]', '0.in_proj_weight.v[0]', '0.in_proj_weight.v[1]', '0.out_proj.o[0]', '0.out_proj.o[1]', '0.out_proj.bias']
    >>> hb.blocks['0.in_proj_weight.k[1]']
    [('0.in_proj_weight', (slice(6, 8, None), slice(None, None, None))), ('0.in_proj_bias', (slice(6, 8, None),))]
    """
    params = dict(model.named_parameters())
    layouts, refused = attention_modules(model)
    notes = tuple(f"blocks='head': {n!r} is left in tensor blocks ({why})" for n, why in refused.items())
    heads: dict[str, list[Member]] = {}
    for lay in layouts.values():
        for kind, p in (("q", lay.q), ("k", lay.k), ("v", lay.v)):
            for h in range(lay.heads):
                _add(heads, params, p, kind, h, _columns(model, params, p, h * lay.head_dim, lay.head_dim))
        for h in range(lay.heads):
            lo, hi = h * lay.value_dim, (h + 1) * lay.value_dim
            index = (slice(None), slice(lo, hi)) if lay.o.rows else (slice(lo, hi), slice(None))
            _add(heads, params, lay.o, "o", h, [(_param(lay.o, lay.o.weight), index)])
    covered = {m[0] if isinstance(m, tuple) else m for ms in heads.values() for m in ms}
    order = {n: i for i, n in enumerate(params)}
    first = {b: min(order[m[0] if isinstance(m, tuple) else m] for m in ms) for b, ms in heads.items()}
    entries: list[tuple[int, int, str, list[Member]]] = [(order[n], 1, n, [n]) for n in params if n not in covered]
    entries += [(first[b], 0, b, ms) for b, ms in heads.items()]
    entries.sort(key=lambda e: (e[0], e[1]))
    return HeadBlocks({b: ms for _, _, b, ms in entries}, tuple(layouts.values()), notes)


def _param(p: Projection, attr: str) -> str:
    return f"{p.module}.{attr}" if p.module else attr


def _columns(model: nn.Module, params: dict, p: Projection, offset: int, width: int) -> list[Member]:
    """Head columns ``offset … offset+width−1`` of projection ``p``: its weight's and its vectors' entries."""
    lo, hi = p.start + offset, p.start + offset + width
    out: list[Member] = [(_param(p, p.weight), (slice(lo, hi), slice(None)) if p.rows else (slice(None), slice(lo, hi)))]
    for attr, start in p.vectors:
        name = _param(p, attr)
        if name in params:
            t = params[name]
            out.append((name, (slice(None),) * (t.dim() - 1) + (slice(start + offset, start + offset + width),)))
    return out


def _add(heads: dict, params: dict, p: Projection, kind: str, h: int, members: list[Member]) -> None:
    weight = _param(p, p.weight)
    if weight not in params:  # a frozen or absent weight: nothing to split
        return
    heads[f"{weight.removesuffix('.weight')}.{kind}[{h}]"] = [m for m in members if m[0] in params]
