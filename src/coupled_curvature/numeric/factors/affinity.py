"""Whether the network outputs are affine in a module's output, read off the autograd graph that ran.

The outputs ``f`` are affine in module ``p``'s output ``z_p`` (for fixed inputs, almost everywhere)
when every operation on a path from ``z_p`` to ``f`` is, in the arguments that depend on ``z_p``:

* linear: sums, differences, reshapes and views, slicing and indexing, concatenation, means and sums,
  average pooling, padding, casts;
* piecewise linear: ReLU, leaky ReLU, hardtanh, abs, clamp, ``where``, max pooling, max/min
  (locally linear off a set of measure zero, where autograd takes one side too);
* a product that is linear in each factor (``*``, matrix products, convolution, eval-mode
  BatchNorm, PReLU), provided ``z_p`` reaches only one factor; a quotient with ``z_p`` only in the
  numerator.

Anything else between ``z_p`` and ``f`` (tanh, softmax, normalisation by batch or feature
statistics, a product of two activations as in attention) makes ``f`` non-affine in ``z_p``, and
the operation is named. :func:`affine_outputs` walks the graph once for all modules; operations
are recognised by their autograd node type, so an unknown one refuses (never the other way round).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.autograd.graph import Node

__all__ = ["affine_outputs", "leaf_uses"]

_LINEAR = {
    "Add", "Sub", "Neg", "View", "Reshape", "ReshapeAlias", "UnsafeView", "Expand", "Permute", "Transpose", "T",
    "Clone", "Squeeze", "Unsqueeze", "Slice", "Select", "Index", "IndexSelect", "Gather", "Mean", "Sum", "Cat",
    "Stack", "Split", "SplitWithSizes", "Unbind", "ConstantPadNd", "ReflectionPad1D", "ReflectionPad2D",
    "ReplicationPad1D", "ReplicationPad2D", "AvgPool1D", "AvgPool2D", "AvgPool3D", "AdaptiveAvgPool1D",
    "AdaptiveAvgPool2D", "AdaptiveAvgPool3D", "AsStrided", "Flip", "Roll", "Repeat", "ToCopy", "Alias",
    "Narrow", "Diagonal", "Tril", "Triu", "Cumsum", "Unfold", "Im2Col", "Col2Im", "PixelShuffle",
    "PixelUnshuffle", "ExpandAs", "Contiguous", "UpsampleNearest1D", "UpsampleNearest2D", "UpsampleBilinear2D",
}
_PIECEWISE = {
    "Relu", "LeakyRelu", "Threshold", "Hardtanh", "Abs", "Clamp", "ClampMin", "ClampMax", "Where",
    "MaxPool1DWithIndices", "MaxPool2DWithIndices", "MaxPool3DWithIndices", "AdaptiveMaxPool1D",
    "AdaptiveMaxPool2D", "AdaptiveMaxPool3D", "Amax", "Amin", "Max", "Min", "Maximum", "Minimum",
}
# node -> (the inputs that form a product: a module output may reach at most one of them,
#          the inputs it must not reach at all)
_PRODUCTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "Mul": ((0, 1), ()), "Mm": ((0, 1), ()), "Bmm": ((0, 1), ()), "Mv": ((0, 1), ()), "Dot": ((0, 1), ()),
    "Addmm": ((1, 2), ()), "Addmv": ((1, 2), ()), "Baddbmm": ((1, 2), ()), "Addbmm": ((1, 2), ()),
    "Convolution": ((0, 1), ()), "PreluKernel": ((0, 1), ()), "Div": ((), (1,)),
}
_NAME = re.compile(r"^(.*?)Backward\d*$")


def _kind(node: object) -> str:
    m = _NAME.match(type(node).__name__)
    return m.group(1) if m else type(node).__name__


def affine_outputs(root: Node | None, marks: Mapping[str, Node | None]) -> dict[str, str | None]:
    """Per path of ``marks`` (path -> the autograd node where that module's output enters the rest of
    the graph): ``None`` when the graph from it to ``root`` (the outputs' ``grad_fn``) is affine in
    it, else the reason.

    >>> import torch
    >>> x = torch.randn(3, 2, dtype=torch.float64)
    >>> a, b = torch.zeros(3, 2, requires_grad=True), torch.zeros(3, 2, requires_grad=True)
    >>> za, zb = x + a, x + b
    >>> out = torch.relu(za) * 2.0 + torch.tanh(zb)
    >>> affine_outputs(out.grad_fn, {"a": za.grad_fn, "b": zb.grad_fn})
    {'a': None, 'b': 'a Tanh operation lies between it and the outputs'}
    >>> affine_outputs((za * za).grad_fn, {"a": za.grad_fn})
    {'a': 'a Mul operation multiplies two factors that both depend on it'}
    """
    order = list(marks)
    bit = {id(node): 1 << i for i, node in enumerate(marks.values())}
    bad: dict[int, str] = {}  # bit -> first reason
    reach: dict[int, int] = {}

    def refuse(mask: int, reason: str) -> None:
        for i in range(len(order)):
            if mask >> i & 1:
                bad.setdefault(1 << i, reason)

    stack: list[tuple[Node, bool]] = [(root, False)] if root is not None else []
    while stack:  # iterative post-order: children before parents
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = [reach.get(id(c), 0) if c is not None else 0 for c, _ in node.next_functions]
            mask = bit.get(key, 0)
            for k in kids:
                mask |= k
            reach[key] = mask
            if mask and key not in bit:
                _judge(node, kids, mask, refuse)
            continue
        if key in reach:
            continue
        reach[key] = 0  # provisional: the graph is acyclic
        stack.append((node, True))
        stack.extend((c, False) for c, _ in node.next_functions if c is not None and id(c) not in reach)
    return {p: bad.get(1 << i) for i, p in enumerate(order)}


def _judge(node: Node, kids: list[int], mask: int, refuse: Callable[[int, str], None]) -> None:
    kind = _kind(node)
    if kind in _LINEAR or kind in _PIECEWISE:
        return
    pair: tuple[int, ...]
    forbidden: tuple[int, ...]
    if kind == "NativeBatchNorm" and not getattr(node, "_saved_training", True):
        pair, forbidden = (0, 1), ()
    elif kind in _PRODUCTS:
        pair, forbidden = _PRODUCTS[kind]
    else:
        refuse(mask, f"a {kind} operation lies between it and the outputs")
        return
    seen = 0
    for i in pair:
        if i < len(kids):
            refuse(seen & kids[i], f"a {kind} operation multiplies two factors that both depend on it")
            seen |= kids[i]
    for i in forbidden:
        if i < len(kids) and kids[i]:
            refuse(kids[i], f"a {kind} operation divides by a quantity that depends on it")


def leaf_uses(root: Node | None) -> dict[int, int]:
    """``{id(leaf tensor): number of graph edges into its AccumulateGrad node}`` over the graph of
    ``root``: a parameter used by more than one operation has a count above 1.

    >>> import torch
    >>> w = torch.ones(2, requires_grad=True)
    >>> leaf_uses((w * 2 + w).grad_fn)[id(w)], leaf_uses((w * 2).grad_fn)[id(w)]
    (2, 1)
    """
    uses: dict[int, int] = {}
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for child, _ in node.next_functions:
            if child is None:
                continue
            var = getattr(child, "variable", None)
            if var is not None:
                uses[id(var)] = uses.get(id(var), 0) + 1
            stack.append(child)
    return uses
