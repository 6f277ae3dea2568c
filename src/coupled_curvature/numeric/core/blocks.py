"""Partitions of a model's parameters into blocks: per tensor, per layer, or explicit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coupled_curvature.base.errors import InvalidInputError

Partition = dict[str, list[str]]


def resolve_blocks(param_names: Sequence[str], blocks: str | Mapping[str, Sequence[str]]) -> Partition:
    """Map block name -> parameter names.

    ``"tensor"``: one block per parameter tensor, named as the parameter (the
    layer-wise rescaling acts on each tensor as a positive scalar, hence conformally: T3, T5).
    ``"layer"``: a module's parameters together (weight and bias), named by the module path.
    A mapping: the user's own blocks; every name must exist and appear at most once.

    >>> resolve_blocks(["0.weight", "0.bias", "2.weight"], "layer")
    {'0': ['0.weight', '0.bias'], '2': ['2.weight']}
    """
    names = list(param_names)
    if isinstance(blocks, str):
        if blocks == "tensor":
            return {n: [n] for n in names}
        if blocks == "layer":
            out: Partition = {}
            for n in names:
                out.setdefault(n.rpartition(".")[0] or n, []).append(n)
            return out
        if blocks == "head":
            raise InvalidInputError("blocks='head' (sub-tensor blocks) is taken by the curvature engine (diagnose, "
                                    "spectral_profile, cutoff_sensitivity, the tracker), not by this route; pass "
                                    "'tensor', 'layer' or whole-tensor blocks here")
        raise InvalidInputError(
            f"blocks={blocks!r} is not a partition; use 'tensor', 'layer' or a mapping "
            "{block name: [parameter names]}"
        )
    if not isinstance(blocks, Mapping):
        raise InvalidInputError(
            f"blocks must be 'tensor', 'layer' or a mapping, got {type(blocks).__name__}"
        )
    known = set(names)
    seen: dict[str, str] = {}
    out = {}
    for block, members in blocks.items():
        members = [members] if isinstance(members, str) else list(members)
        if not members:
            raise InvalidInputError(f"block {block!r} lists no parameters")
        for m in members:
            if isinstance(m, tuple):
                raise InvalidInputError(
                    f"block {block!r} holds a slice {m!r}: sub-tensor blocks are taken by the curvature engine "
                    "(diagnose, spectral_profile, cutoff_sensitivity, the tracker), not by this route; pass whole "
                    "parameter names here"
                )
            if m not in known:
                raise InvalidInputError(
                    f"block {block!r} names unknown parameter {m!r}; the model has: "
                    + ", ".join(names)
                )
            if m in seen:
                raise InvalidInputError(
                    f"parameter {m!r} is in two blocks ({seen[m]!r} and {block!r})"
                )
            seen[m] = str(block)
        out[str(block)] = members
    if not out:
        raise InvalidInputError("the block mapping is empty")
    return out
