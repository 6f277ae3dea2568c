"""The traced network in arb: one value pass, tangent passes along parameter directions, one backward pass."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import torch
from flint import arb_mat
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.certify.arrays import Rows
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.certify.layers import Kink, Layer, add, make_layer, vstack
from coupled_curvature.numeric.certify.trace import Op, running_stats, traced_module

__all__ = ["Network", "check_shapes"]


def _input_dims(m: nn.Module) -> tuple[tuple[int, ...], int] | None:
    """The per-sample input ranks certify's flat layout represents for module ``m``, and the leading
    size it needs (features or channels; -1: any); ``None`` for element-wise modules."""
    if isinstance(m, nn.Linear):
        return (1,), m.in_features
    caps = layer_capabilities(m)  # the certified kinds: exact types, as trace found them
    if caps.certify == "conv" and caps.spatial_dims is not None:
        return (caps.spatial_dims + 1,), traced_module(m, nn.Conv1d, nn.Conv2d).in_channels
    if caps.batch_statistics and isinstance(m, _BatchNorm):
        return ((1, 2) if caps.unit_axis == "dim1" else (3,)), m.num_features
    if caps.certify in ("maxpool", "avgpool", "adaptive_avgpool") and caps.spatial_dims is not None:
        return (caps.spatial_dims + 1,), -1
    return None


def _check_op(op: Op, in_shapes: list[tuple[int, ...]]) -> None:
    """An op whose inputs or statistics certify cannot represent exactly: an ``InvalidInputError``
    naming the module and what to change (before any ball arithmetic)."""
    if op.kind == "add":
        if in_shapes[0] != in_shapes[1]:
            raise InvalidInputError(f"node {op.name!r} adds per-sample tensors of shapes {in_shapes[0]} and "
                                    f"{in_shapes[1]}; certify adds tensors of one shape only (no broadcasting): use a model that does")
        return
    m, shape = op.module, in_shapes[0]
    dims = None if m is None else _input_dims(m)
    if dims is not None and (len(shape) not in dims[0] or dims[1] not in (-1, shape[0])):
        want = " or ".join(f"{d}-D" for d in dims[0])
        lead = "" if dims[1] < 0 else f" with {dims[1]} leading features/channels"
        raise InvalidInputError(
            f"module {op.name!r} ({type(m).__name__}) receives per-sample inputs of shape {shape}; certify applies "
            f"it to {want} per-sample inputs{lead} only (torch would broadcast it over the extra axes); pass "
            "data of that shape, or put nn.Flatten() before it")
    if isinstance(m, _BatchNorm) and layer_capabilities(m).batch_statistics:
        mean, var = running_stats(m)
        stats = {"running_mean": mean, "running_var": var}
        for what, t in stats.items():
            if not bool(torch.isfinite(t).all()):
                raise InvalidInputError(f"module {op.name!r} ({type(m).__name__}): its {what} holds non-finite "
                                        "values; fix the statistics (or load them again) before certifying")
        eps = Fraction(float(m.eps))
        low = [c for c, v in enumerate(stats["running_var"].tolist()) if not Fraction(v) + eps > 0]
        if low:
            raise InvalidInputError(
                f"module {op.name!r} ({type(m).__name__}): running_var + eps = "
                f"{float(stats['running_var'][low[0]]) + float(m.eps):g} ≤ 0 in channel {low[0]}, so its output "
                "divides by √0 or the root of a negative number (torch gives inf/nan); use eps > 0 (the default is "
                "1e-5), or load running statistics with running_var + eps > 0")


def check_shapes(ops: list[Op], in_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The per-sample output shape of ``ops`` on inputs of ``in_shape``, after :func:`_check_op` on every
    op: shapes and statistics checked before any ball arithmetic.

    >>> from coupled_curvature.numeric.certify.trace import trace
    >>> check_shapes(trace(nn.Sequential(nn.Linear(4, 3), nn.Flatten(), nn.Linear(3, 2))), (4,))
    (2,)
    >>> check_shapes(trace(nn.Sequential(nn.Linear(4, 3), nn.Flatten(), nn.Linear(6, 2))), (2, 4))
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: module '0' (Linear) receives per-sample inputs of shape (2, 4); certify applies it to 1-D per-sample inputs with 4 leading features/channels only (torch would broadcast it over the extra axes); pass data of that shape, or put nn.Flatten() before it
    """
    shapes: list[tuple[int, ...]] = []
    for op in ops:
        in_shapes = [in_shape if i < 0 else shapes[i] for i in op.inputs]
        _check_op(op, in_shapes)
        shapes.append(in_shapes[0] if op.kind == "add" else make_layer(op.kind, op.name, op.module, in_shapes[0]).out_shape)
    return shapes[-1]


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
            _check_op(op, in_shapes)
            if op.kind == "add":
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
            assert dirs is not None, "tangent takes parameter directions or a seed"
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
            dxs: list[arb_mat | None]
            if layer is None:
                dxs = [dy, dy]
            else:
                dx, g = layer.backward(dy, self.params)
                dxs = [dx]
                for k, v in g.items():
                    grads[k] = grads[k] + v if k in grads else v
            for j, dx in zip(self.ops[i].inputs, dxs):
                if j >= 0:
                    assert dx is not None, "a layer fed by another op returns its input's cotangent (needs_dx)"
                    cot[j] = cot[j] + dx if j in cot else dx
        return grads
