"""The model as a list of operations the certified engine knows, traced with ``torch.fx``.

Supported: Linear; Conv1d/Conv2d (stride, padding, dilation, groups; zero padding); ReLU,
LeakyReLU, Identity, Dropout (eval); MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d; BatchNorm1d/2d
in eval mode; Flatten; residual additions (``+``, ``torch.add``) and ``torch.relu``/``F.relu``/
``torch.flatten``. Anything else is an ``UnsupportedModelError`` naming the module or function.
Every op is piecewise affine, so a network built from them is affine in any one module's
parameters away from kinks, which is what makes the tangent form of ``wᵀHw`` exact.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TypeVar, overload

import torch
import torch.fx
from torch import Tensor, nn
from torch.nn import functional as F

from coupled_curvature.base.errors import UnsupportedModelError
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["Op", "running_stats", "trace", "traced_module"]

M = TypeVar("M", bound=nn.Module)
M2 = TypeVar("M2", bound=nn.Module)

_FUNCTIONS = {operator.add: "add", torch.add: "add", torch.relu: "relu", F.relu: "relu", torch.flatten: "flatten"}
SUPPORTED = ("Linear, Conv1d, Conv2d, ReLU, LeakyReLU, Identity, Dropout (eval), Flatten, MaxPool1d/2d, AvgPool1d/2d, "
             "AdaptiveAvgPool1d/2d, BatchNorm1d/2d (eval), residual additions")


@dataclass(frozen=True)
class Op:
    """One node: ``kind`` (linear, conv, relu, leaky_relu, maxpool, avgpool, adaptive_avgpool, batchnorm,
    add, identity), the module path ``name`` (the fx node name for functions), the indices of its
    input ops (-1 is the model input) and the module itself (``None`` for functions)."""

    kind: str
    name: str
    inputs: tuple[int, ...]
    module: nn.Module | None = field(default=None, compare=False)


def trace(model: nn.Module) -> list[Op]:
    """The model's operations in execution order; the last op's value is the output.

    >>> ops = trace(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
    >>> [(o.kind, o.name, o.inputs) for o in ops]
    [('linear', '0', (-1,)), ('relu', '1', (0,)), ('linear', '2', (1,))]
    """
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # fx raises many kinds (TraceError, TypeError, NotImplementedError…)
        raise UnsupportedModelError(
            f"the model cannot be traced by torch.fx ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
            f"certify takes models built from {SUPPORTED} with a traceable forward") from None
    index: dict[str, int] = {}
    ops: list[Op] = []
    out: int | None = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if index:
                raise UnsupportedModelError(f"the model takes several inputs ({node.name!r}); certify takes one input tensor")
            index[node.name] = -1
            continue
        if node.op == "output":
            arg = node.args[0]
            if not isinstance(arg, torch.fx.Node):
                raise UnsupportedModelError("the model returns a structure, not one tensor; certify needs a tensor output")
            out = index[arg.name]
            continue
        kind, module = _kind(gm, node)
        nodes = [a for a in node.args if isinstance(a, torch.fx.Node)]
        _check_args(node, kind, nodes)
        ops.append(Op(kind, str(node.target) if node.op == "call_module" else node.name,
                      tuple(index[a.name] for a in nodes), module))
        index[node.name] = len(ops) - 1
    if out is None or out != len(ops) - 1 or not ops:
        raise UnsupportedModelError("the model's output is not its last operation; certify needs a plain feed-forward graph")
    return ops


def _kind(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[str, nn.Module | None]:
    if node.op == "call_module":
        m = gm.get_submodule(str(node.target))  # a call_module node's target is the module's name
        caps = layer_capabilities(m)  # certify kinds other than identity hold for their exact types only
        if caps.certify == "identity":
            if caps.stochastic and m.training and getattr(m, "p", 0.0) > 0:
                raise UnsupportedModelError(f"module {node.target!r} (Dropout) is in train mode; call model.eval()")
            if caps.reshape and (m.start_dim != 1 or m.end_dim != -1):
                raise UnsupportedModelError(f"module {node.target!r}: only Flatten(1, -1) is supported")
            return "identity", m
        if caps.certify is not None:
            _check_module(str(node.target), m)
            return caps.certify, m
        raise UnsupportedModelError(f"module {node.target!r} ({type(m).__name__}) is not supported by certify; "
                                    f"supported: {SUPPORTED}")
    if node.op == "call_function" and node.target in _FUNCTIONS:
        return _FUNCTIONS[node.target], None
    what = getattr(node.target, "__name__", str(node.target))
    raise UnsupportedModelError(f"operation {what!r} ({node.op}, node {node.name!r}) is not supported by certify; "
                                f"supported: {SUPPORTED}")


def _check_args(node: torch.fx.Node, kind: str, nodes: list[torch.fx.Node]) -> None:
    extra = [a for a in node.args if not isinstance(a, torch.fx.Node)]
    if kind == "add":
        if len(nodes) != 2 or extra or node.kwargs:
            raise UnsupportedModelError(f"node {node.name!r}: only the sum of two tensors is supported (no scalars, no alpha)")
    elif kind == "flatten":
        if extra != [1] or node.kwargs:
            raise UnsupportedModelError(f"node {node.name!r}: only torch.flatten(x, 1) is supported")
    elif len(nodes) != 1 or (node.op == "call_function" and (extra or any(v for v in node.kwargs.values()))):
        raise UnsupportedModelError(f"node {node.name!r} ({kind}) must take exactly one tensor")


def _check_module(name: str, m: nn.Module) -> None:
    def refuse(why: str) -> None:
        raise UnsupportedModelError(f"module {name!r} ({type(m).__name__}): {why} is not supported by certify")

    kind = layer_capabilities(m).certify
    if kind == "conv" and m.padding_mode != "zeros":
        refuse(f"padding_mode={m.padding_mode!r}")
    if kind == "conv" and isinstance(m.padding, str):
        refuse(f"padding={m.padding!r} (give the padding as numbers)")
    if kind == "maxpool" and (m.ceil_mode or m.return_indices):
        refuse("ceil_mode/return_indices")
    if kind == "avgpool" and (m.ceil_mode or getattr(m, "divisor_override", None)):
        refuse("ceil_mode/divisor_override")
    if kind == "batchnorm":
        if m.training:
            refuse("train mode (batch statistics)")
        if not m.track_running_stats or m.running_mean is None:
            refuse("BatchNorm without running statistics")
    if kind == "adaptive_avgpool":
        sizes = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,)
        if any(s is None for s in sizes):
            refuse("output_size None")


@overload
def traced_module(module: nn.Module | None, cls: type[M]) -> M: ...
@overload
def traced_module(module: nn.Module | None, cls: type[M], other: type[M2]) -> M | M2: ...
def traced_module(module: nn.Module | None, cls: type, other: type | None = None) -> nn.Module:
    """An :class:`Op`'s ``module`` as the type its kind stands for (:func:`trace` reads the kind off the module's
    exact type), or a ``TypeError``.

    >>> traced_module(trace(nn.Sequential(nn.Linear(2, 1)))[0].module, nn.Linear).out_features
    1
    """
    classes = (cls,) if other is None else (cls, other)
    if module is None or not isinstance(module, classes):
        raise TypeError(f"a traced op of {' or '.join(c.__name__ for c in classes)} holds {type(module).__name__}")
    return module


def running_stats(m: nn.modules.batchnorm._BatchNorm) -> tuple[Tensor, Tensor]:
    """The running mean and variance of a BatchNorm, in float64 (:func:`trace` refuses one without them).

    >>> [t.tolist() for t in running_stats(nn.BatchNorm1d(2))]
    [[0.0, 0.0], [1.0, 1.0]]
    """
    mean, var = m.running_mean, m.running_var
    if mean is None or var is None:
        raise UnsupportedModelError(f"{type(m).__name__} without running statistics (track_running_stats=False) "
                                    "is not supported by certify")
    return mean.double(), var.double()
