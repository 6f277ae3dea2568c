"""Which operations of an fx graph a rescaling or a permutation of units passes, and how.

:func:`layout_after` judges one node that reads the changed activations: it returns where the unit
index sits after it (a :data:`Layout`) or raises :class:`Refused` saying why the node breaks the
map. For one factor ``c > 0`` the node must be positively homogeneous (ReLU, LeakyReLU, PReLU, abs,
eval-mode dropout, max/avg pooling, reshapes, sums, products with a number); for a factor per unit
it must also act per unit and keep the unit index (``flatten(x, 1)``, ``x.view(x.size(0), -1)``);
a permutation also passes any parameter-free element-wise map (tanh, GELU, …) and a BatchNorm or
per-channel PReLU, permuted alike. The walk from ``src`` to ``dst`` is
:func:`coupled_curvature.numeric.symmetries.graph.channel_path`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from torch import fx, nn

from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["Kind", "KINDS", "Layout", "Refused", "is_shape", "layout_after"]

Kind = Literal["layer", "neuron", "permute"]
KINDS = ("layer", "neuron", "permute")

_HOMOGENEOUS_FUNCS: set[Callable] = {F.relu, torch.relu, F.leaky_relu, torch.abs, operator.abs}
_EQUIVARIANT_FUNCS: set[Callable] = {torch.tanh, torch.sigmoid, F.tanh, F.sigmoid, F.gelu, F.silu, F.elu, F.selu,
                                     F.celu, F.softplus, F.softsign, F.hardtanh, F.relu6, F.hardsigmoid,
                                     F.hardswish, F.mish, F.logsigmoid, torch.exp}
_POOL_FUNCS: set[Callable] = {F.max_pool1d, F.max_pool2d, F.max_pool3d, F.avg_pool1d, F.avg_pool2d, F.avg_pool3d,
                              F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d,
                              F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d}
_DROPOUT_FUNCS: set[Callable] = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout,
                                 F.feature_alpha_dropout}
_SCALAR_OPS = {operator.mul: "mul", operator.truediv: "div", torch.mul: "mul", torch.div: "div",
               operator.neg: "neg", torch.neg: "neg", operator.add: "add", operator.sub: "sub",
               torch.add: "add", torch.sub: "sub"}
_HOMOGENEOUS_METHODS = {"relu", "relu_", "abs", "contiguous", "clone"}
_EQUIVARIANT_METHODS = {"tanh", "sigmoid", "exp"}
_HOMOGENEOUS: set[Callable | str] = _HOMOGENEOUS_FUNCS | _HOMOGENEOUS_METHODS  # a function or a method's name
_EQUIVARIANT: set[Callable | str] = _EQUIVARIANT_FUNCS | _EQUIVARIANT_METHODS
# commute with one positive factor; the unit index survives only the flatten/view/reshape forms
# that keep dim 0 (see _reshape)
_LINEAR_METHODS = {"squeeze", "unsqueeze", "permute", "transpose", "mean", "sum", "amax", "amin", "flatten",
                   "view", "reshape"}
_LINEAR_FUNCS: set[Callable] = {torch.squeeze, torch.unsqueeze, torch.permute, torch.transpose, torch.mean,
                                torch.sum, torch.amax, torch.amin, torch.flatten, torch.reshape}

# Where the unit index sits in an activation: last ('last', a Linear's output), dim 1 of a tensor
# with spatial dims ('first', Conv, BatchNorm2d/3d), dim 1 of rank 2 or 3 ('dim1', BatchNorm1d),
# or channel-major after flattening ('flat': input j·spread + s belongs to unit j).
Layout = Literal["last", "first", "dim1", "flat"]



class Refused(Exception):
    """Why one node between src and dst breaks the map (``channel_path`` turns it into an InvalidInputError)."""


def _describe(model: nn.Module, node: fx.Node) -> str:
    if node.op == "call_module":
        return f"{node.target!r} ({type(model.get_submodule(str(node.target))).__name__})"
    what = getattr(node.target, "__name__", str(node.target))
    return f"{node.name!r} ({what})"


def is_shape(node: fx.Node) -> bool:
    """A node that reads only shapes (``x.size(0)``, ``x.shape[0]``, products of those)."""
    if node.op == "call_method" and node.target in ("size", "dim"):
        return True
    if node.op == "call_function" and node.target is getattr:
        return len(node.args) > 1 and node.args[1] in ("shape", "ndim")
    if node.op == "call_function" and node.target in (operator.getitem, operator.mul, operator.floordiv):
        return all(is_shape(a) for a in node.args if isinstance(a, fx.Node)) and any(
            isinstance(a, fx.Node) for a in node.args)
    return False


def _is_batch(arg: object) -> bool:
    """``x.size(0)`` or ``x.shape[0]``: the batch size, so a reshape to ``(batch, -1)`` keeps it."""
    if not isinstance(arg, fx.Node):
        return False
    if arg.op == "call_method" and arg.target == "size":
        return tuple(arg.args[1:]) == (0,)
    return (arg.op == "call_function" and arg.target is operator.getitem and tuple(arg.args[1:]) == (0,)
            and isinstance(arg.args[0], fx.Node) and is_shape(arg.args[0]))


def _arg(node: fx.Node, index: int, key: str, default: object) -> object:
    return node.args[index] if len(node.args) > index else node.kwargs.get(key, default)


def layout_after(model: nn.Module, node: fx.Node, source: fx.Node, kind: Kind, layout: Layout, units: int,
                 permuted: list[str]) -> Layout:
    """The layout after ``node`` (which reads ``source``), or ``Refused`` saying why it breaks the map."""
    desc = _describe(model, node)
    if node.op == "output":
        raise Refused("the activations are also returned by forward")
    others = [a for a in node.all_input_nodes if a is not source and not is_shape(a)]
    commutes = node.target in (operator.mul, operator.add, torch.mul, torch.add)
    if others:
        raise Refused(f"{desc} also reads {_describe(model, others[0])}, so it mixes the changed "
                      "activations with others (a residual connection?)")
    if not (node.args[:1] == (source,) or (commutes and node.args[1:2] == (source,))):
        raise Refused(f"{desc} does not take the activations as its first input")
    if node.op == "call_module":
        return _module_step(model.get_submodule(str(node.target)), str(node.target), desc, kind, layout,
                            units, permuted)
    target = node.target  # a method's name (call_method) or a function (call_function)
    if target in _HOMOGENEOUS:
        return layout
    if target in _EQUIVARIANT:
        return _equivariant(desc, kind, layout)
    if node.op == "call_method":
        if target in _LINEAR_METHODS:
            return _reshape(node, desc, kind, layout, method=True)
        if target in ("mul", "div", "add", "sub", "neg"):
            return _scalar(node, source, desc, kind, layout, str(target))
        raise Refused(f"{desc} is not known to commute with the map")
    if target in _POOL_FUNCS:
        name = getattr(target, "__name__", "")
        if "max" in name and _arg(node, 2 if "adaptive" in name else 6, "return_indices", False):
            raise Refused(f"{desc} returns indices")
        return _pool(desc, kind, layout)
    if target in _DROPOUT_FUNCS:
        drops = target not in (F.alpha_dropout, F.feature_alpha_dropout)  # their default: training=False
        if _arg(node, 2, "training", drops) and _arg(node, 1, "p", 0.5) != 0:
            raise Refused(f"{desc} drops units at random (training=True); call it with "
                          "training=self.training and put the model in eval mode")
        return layout
    if target in _LINEAR_FUNCS:
        return _reshape(node, desc, kind, layout, method=False)
    if target in _SCALAR_OPS:
        return _scalar(node, source, desc, kind, layout, _SCALAR_OPS[target])
    raise Refused(f"{desc} is not known to commute with the map")


def _module_step(m: nn.Module, name: str, desc: str, kind: Kind, layout: Layout, units: int,
                 permuted: list[str]) -> Layout:
    """The layout after module ``m``, judged by its row of the layer-capability registry."""
    caps = layer_capabilities(m)
    if caps.elementwise and caps.degree == 1:  # ReLU, LeakyReLU, Identity
        return layout
    if "dst" in caps.symmetry:
        raise Refused(f"{desc} also reads the activations (only dst may)")
    if caps.batch_statistics:
        if kind != "permute":
            mode = "train mode: its batch statistics absorb the scale" if m.training else (
                "eval mode: BN(cz) = γ(cz − μ)/σ + β ≠ c·BN(z)")
            raise Refused(f"the BatchNorm {desc} lies in between ({mode}); rescale that BatchNorm "
                          f"instead, as src: ({name!r}, dst)")
        if m.num_features != units or layout == "flat":
            raise Refused(f"{desc} normalizes {m.num_features} features, not the {units} units of src")
        permuted.append(name)
        return layout
    if "permuted" in caps.symmetry:  # PReLU: one slope, or one per unit
        if m.num_parameters == 1:
            return layout
        if m.num_parameters != units or layout == "flat":
            raise Refused(f"{desc} has {m.num_parameters} slopes, not one per unit of src")
        if kind == "permute":
            permuted.append(name)
        return layout
    if caps.elementwise:
        return _equivariant(desc, kind, layout)
    if caps.pool is not None:
        if getattr(m, "return_indices", False):
            raise Refused(f"{desc} returns indices")
        return _pool(desc, kind, layout)
    if caps.stochastic:
        if m.training and m.p != 0:
            raise Refused(f"{desc} is in train mode and drops units at random; call model.eval() first")
        return layout
    if caps.reshape:
        if kind != "layer" and (m.start_dim, m.end_dim) != (1, -1):
            raise Refused(f"{desc} flattens dims {m.start_dim}..{m.end_dim}, which moves the unit index")
        return layout if kind == "layer" or layout == "last" else "flat"
    raise Refused(f"{desc} is not known to commute with the map")


def _equivariant(desc: str, kind: Kind, layout: Layout) -> Layout:
    if kind != "permute":
        raise Refused(f"{desc} is not positively homogeneous (σ(cz) ≠ c·σ(z)); only permutations pass it")
    return layout


def _pool(desc: str, kind: Kind, layout: Layout) -> Layout:
    if kind != "layer" and layout != "first":
        raise Refused(f"{desc} pools across the units here (they are not a channel dim of a "
                      "tensor with spatial dims)")
    return layout


def _reshape(node: fx.Node, desc: str, kind: Kind, layout: Layout, *, method: bool) -> Layout:
    if kind == "layer":
        return layout  # linear and value-preserving: commutes with one positive factor
    name = node.target if method else getattr(node.target, "__name__", "")
    rest = node.args[1:]
    if name == "flatten":
        keeps = (_arg(node, 1, "start_dim", 0), _arg(node, 2, "end_dim", -1)) == (1, -1)
    elif name in ("view", "reshape"):
        shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        keeps = bool(len(shape) == 2 and _is_batch(shape[0]) and shape[1] == -1)
    else:
        keeps = False
    if not keeps:
        raise Refused(f"{desc} may move the unit index; write flatten(x, 1) or x.view(x.size(0), -1)")
    return "last" if layout == "last" else "flat"


def _scalar(node: fx.Node, source: fx.Node, desc: str, kind: Kind, layout: Layout, op: str) -> Layout:
    operands = [a for a in node.args if a is not source] + list(node.kwargs.values())
    if op != "neg" and not (len(operands) == 1 and isinstance(operands[0], (int, float))
                            and not isinstance(operands[0], bool)):
        raise Refused(f"{desc} combines the activations with something other than one number")
    if op in ("add", "sub") and kind != "permute":
        raise Refused(f"{desc} shifts the activations (z + b is not homogeneous); only permutations pass it")
    return layout
