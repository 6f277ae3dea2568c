"""The traced network in arb: one value pass, tangent passes along parameter directions, one backward pass."""

from __future__ import annotations

from collections.abc import Mapping

from flint import arb_mat

from coupled_curvature.numeric.certify.arrays import Rows
from coupled_curvature.numeric.certify.layers import Kink, Layer, add, make_layer, vstack
from coupled_curvature.numeric.certify.trace import Op

__all__ = ["Network"]


class Network:
    """``ops`` (from :func:`~.trace.trace`) evaluated on ``X`` (``N × F`` arb_mat, per-sample ``in_shape``)
    with parameters ``params`` (name → arb_mat in the layouts of :mod:`.layers`).

    After construction: ``output`` (``N × C``), ``kinks`` (every undecided ReLU/max-pool) and
    ``upstream[i]`` (the parameters whose values reach op ``i``).
    """

    def __init__(self, ops: list[Op], params: Mapping[str, arb_mat], X: arb_mat, in_shape: tuple[int, ...]):
        self.ops, self.params = ops, dict(params)
        self.layers: list[Layer | None] = []
        shapes: list[tuple[int, ...]] = []
        self.values: list[arb_mat] = []
        self.upstream: list[frozenset[str]] = []
        self.N = X.nrows()
        for op in ops:
            ins = [X if i < 0 else self.values[i] for i in op.inputs]
            in_shapes = [in_shape if i < 0 else shapes[i] for i in op.inputs]
            up = frozenset().union(*(self.upstream[i] for i in op.inputs if i >= 0))
            if op.kind == "add":
                if in_shapes[0] != in_shapes[1]:
                    raise ValueError(f"node {op.name!r} adds tensors of shapes {in_shapes[0]} and {in_shapes[1]}")
                self.layers.append(None)
                shapes.append(in_shapes[0])
                self.values.append(ins[0] + ins[1])
            else:
                layer = make_layer(op.kind, op.name, op.module, in_shapes[0])
                feed = self.layers[op.inputs[0]] if op.inputs[0] >= 0 else None
                layer.feed_zero = None if feed is None else feed.locally_zero
                layer.needs_dx = op.inputs[0] >= 0
                self.layers.append(layer)
                self.values.append(layer.value(ins[0], self.params))
                shapes.append(layer.out_shape)
                up = up | frozenset(layer.params)
            self.upstream.append(up)
        self.shapes = shapes
        self.output = self.values[-1]
        self.kinks: list[tuple[int, Kink]] = [(i, k) for i, layer in enumerate(self.layers) if layer is not None
                                              for k in layer.kinks]

    def owner(self, param: str) -> int | None:
        """The op whose layer holds ``param`` (``None`` when no op uses it)."""
        for i, layer in enumerate(self.layers):
            if layer is not None and param in layer.params:
                return i
        return None

    def tangent(self, start: int, dirs: list[dict[str, arb_mat]] | None, seed: arb_mat | None = None) -> Rows:
        """``d output`` along each parameter direction of ``dirs`` (all on op ``start``'s parameters), or
        along the tangent ``seed`` of op ``start``'s output (``K·N × F``): ``K·N × C``, direction-major
        (an arb_mat or its entries as an object array)."""
        tangents: dict[int, Rows] = {}
        first = start
        if seed is not None:
            tangents[start] = seed
            first = start + 1
            dirs = [{}] * (seed.nrows() // self.N)
        for i in range(first, len(self.ops)):
            op, layer = self.ops[i], self.layers[i]
            ins = [tangents.get(j) if j >= 0 else None for j in op.inputs]
            if layer is None:
                t = [a for a in ins if a is not None]
                out = None if not t else t[0] if len(t) == 1 else add(t[0], t[1])
            else:
                out = layer.tangent(ins[0], dirs if i == start else None, self.params)
            if out is not None:
                tangents[i] = out
        if len(self.ops) - 1 not in tangents:
            return vstack([arb_mat(self.N, self.output.ncols())] * len(dirs))
        return tangents[len(self.ops) - 1]

    def cotangents(self, seed: Rows, upto: int) -> dict[int, Rows]:
        """The cotangents of the outputs of ops ``upto`` … last from the output's ``seed`` (``K·N × C``,
        direction-major; ops in topological order, so each is complete when reached); no gradients."""
        cot: dict[int, Rows] = {len(self.ops) - 1: seed}
        out: dict[int, Rows] = {}
        for i in range(len(self.ops) - 1, upto - 1, -1):
            if i not in cot:
                continue
            out[i] = dy = cot.pop(i)
            layer = self.layers[i]
            dxs = [dy, dy] if layer is None else [layer.vjp(dy, self.params)]
            for j, dx in zip(self.ops[i].inputs, dxs):
                if j >= upto:
                    cot[j] = add(cot[j], dx) if j in cot else dx
        return out

    def backward(self, d_output: arb_mat) -> dict[str, arb_mat]:
        """``∂L/∂θ`` for every parameter from ``∂L/∂output`` (``N × C``)."""
        cot: dict[int, arb_mat] = {len(self.ops) - 1: d_output}
        grads: dict[str, arb_mat] = {}
        for i in range(len(self.ops) - 1, -1, -1):
            if i not in cot:
                continue
            dy = cot.pop(i)
            layer = self.layers[i]
            if layer is None:
                dxs = [dy, dy]
            else:
                dx, g = layer.backward(dy, self.params)
                dxs = [dx]
                for k, v in g.items():
                    grads[k] = grads[k] + v if k in grads else v
            for j, dx in zip(self.ops[i].inputs, dxs):
                if j >= 0:
                    cot[j] = cot[j] + dx if j in cot else dx
        return grads
