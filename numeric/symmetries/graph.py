"""Which named module pairs of any ``nn.Module`` carry a T2 map: the structural check on its fx graph.

Rescaling the output units of ``src`` is compensated exactly in the inputs of ``dst`` only if
nothing between them breaks ``f(c·z) = c·f(z)`` (per unit, for a per-unit scale) and nothing else
reads the rescaled activations. :func:`channel_path` walks every use of ``src``'s output on
``torch.fx.symbolic_trace(model)`` until ``dst``. Between them may lie: for one factor ``c > 0``,
positively homogeneous maps (ReLU, LeakyReLU, PReLU, abs, eval-mode dropout, max/avg pooling,
reshapes, sums, products with a number); for a factor per unit, those acting per unit that keep
the unit index (``flatten(x, 1)``, ``x.view(x.size(0), -1)``); for a permutation, also any
parameter-free element-wise map (tanh, GELU, …) and a BatchNorm or per-channel PReLU, permuted
alike. A BatchNorm in between refuses rescaling: in eval mode ``BN(cz) = γ(cz − μ)/σ + β ≠
c·BN(z)``, in train mode its batch statistics absorb ``c``; rescale the BatchNorm itself (as
``src``). Residual additions, concatenations, slices and any second reader are refused.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.utils import parametrize

from coupled_curvature.errors import InvalidInputError, UnsupportedModelError

__all__ = ["ChannelPath", "Kind", "channel_path"]

Kind = Literal["layer", "neuron", "permute"]
_KINDS = ("layer", "neuron", "permute")

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BN = nn.modules.batchnorm._BatchNorm
_HOMOGENEOUS_MODULES = (nn.ReLU, nn.LeakyReLU, nn.Identity)
_EQUIVARIANT_MODULES = (nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.ELU, nn.CELU, nn.SELU, nn.Softplus,
                        nn.Softsign, nn.Hardtanh, nn.Hardsigmoid, nn.Hardswish, nn.Mish, nn.LogSigmoid,
                        nn.Tanhshrink, nn.Softshrink, nn.Hardshrink)
_POOL_MODULES = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
                 nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
                 nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
_DROPOUT_MODULES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
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
# commute with one positive factor; the unit index survives only the flatten/view/reshape forms
# that keep dim 0 (see _reshape)
_LINEAR_METHODS = {"squeeze", "unsqueeze", "permute", "transpose", "mean", "sum", "amax", "amin", "flatten",
                   "view", "reshape"}
_LINEAR_FUNCS: set[Callable] = {torch.squeeze, torch.unsqueeze, torch.permute, torch.transpose, torch.mean,
                                torch.sum, torch.amax, torch.amin, torch.flatten, torch.reshape}

# Where the unit index sits in an activation: last ('last', a Linear's output), dim 1 of a tensor
# with spatial dims ('first', Conv, BatchNorm2d/3d), dim 1 of rank 2 or 3 ('dim1', BatchNorm1d),
# or channel-major after flattening ('flat': input j·spread + s belongs to unit j).
_Layout = Literal["last", "first", "dim1", "flat"]


@dataclass(frozen=True)
class ChannelPath:
    """A checked pair: ``src``'s output units reach ``dst``'s inputs through ``between`` only.

    ``spread``: inputs of ``dst`` per unit of ``src`` (unit ``j`` owns inputs ``j·spread + s``), or
    ``None`` for ``kind="layer"``, where ``dst``'s weight is divided as a whole. ``permuted``:
    the per-channel modules in between (BatchNorm, PReLU) whose tensors follow a permutation.
    Activations are taken batched: dim 0 is the batch, the unit index is dim 1 (Conv, BatchNorm)
    or last (Linear).
    """

    src: str
    dst: str
    kind: Kind
    units: int
    spread: int | None
    permuted: tuple[str, ...]
    between: tuple[str, ...]


class _Refused(Exception):
    """Why one node between src and dst breaks the map (turned into an InvalidInputError)."""


def channel_path(model: nn.Module, src: str, dst: str, kind: Kind) -> ChannelPath:
    """Check on ``torch.fx.symbolic_trace(model)`` that ``W_src -> a⊙W_src, b_src -> a⊙b_src,
    W_dst -> W_dst·diag(1/a)`` (``kind`` "layer": ``a = c·1``; "neuron": any ``a > 0``) or a
    permutation of the units (``kind="permute"``) keeps the function, and say how.

    Raises ``InvalidInputError`` naming the node that breaks it, ``UnsupportedModelError`` when
    fx cannot trace the model.

    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.conv, self.fc = nn.Conv2d(1, 2, 3), nn.Linear(8, 1)
    ...     def forward(self, x):
    ...         return self.fc(torch.flatten(torch.relu(self.conv(x)).amax(-1), 1))
    >>> channel_path(Net(), "conv", "fc", "layer").between
    ('relu', 'amax', 'flatten')
    >>> channel_path(Net(), "conv", "fc", "neuron")
    Traceback (most recent call last):
    ...
    coupled_curvature.errors.InvalidInputError: a per-unit rescaling between 'conv' and 'fc' ...
    """
    if kind not in _KINDS:
        raise InvalidInputError(f"kind={kind!r}: pass one of {', '.join(_KINDS)}")
    src_mod, dst_mod = _module(model, src, "src"), _module(model, dst, "dst")
    if src == dst:
        raise InvalidInputError(f"src and dst are both {src!r}: pass the producer and the next consumer")
    if not isinstance(src_mod, (nn.Linear, *_CONV, _BN)):
        raise InvalidInputError(f"src {src!r} is a {type(src_mod).__name__}; pass a Linear, Conv or BatchNorm")
    if not isinstance(dst_mod, (nn.Linear, *_CONV)):
        raise InvalidInputError(f"dst {dst!r} is a {type(dst_mod).__name__}; pass a Linear or Conv that "
                                "reads src's output")
    if isinstance(src_mod, _BN) and not src_mod.affine:
        raise InvalidInputError(f"src {src!r} is a BatchNorm without affine weight and bias: nothing to "
                                "scale; pass the layer before it, or build it with affine=True")
    if kind == "permute" and isinstance(src_mod, _BN):
        raise InvalidInputError(f"src {src!r} is a BatchNorm: its output unit j reads input unit j, so its "
                                "units cannot be permuted alone; pass the Linear/Conv before it as src")
    for name, m in ((src, src_mod), (dst, dst_mod)):
        if kind != "layer" and isinstance(m, _CONV) and m.groups != 1 and (kind == "permute" or m is dst_mod):
            raise InvalidInputError(f"{name!r} is a grouped convolution (groups={m.groups}): per-unit "
                                    "maps would cross groups; only layer_rescale applies")
        if parametrize.is_parametrized(m):
            raise InvalidInputError(f"{name!r} has a parametrization (its weight is computed): remove it "
                                    "first (torch.nn.utils.parametrize.remove_parametrizations)")
    _check_not_shared(model, {src: src_mod, dst: dst_mod})
    graph = _trace(model)
    src_node, dst_node = _call_of(graph, src, "src"), _call_of(graph, dst, "dst")
    for node in graph.nodes:
        if node.op == "get_attr" and str(node.target).startswith((f"{src}.", f"{dst}.")):
            raise InvalidInputError(f"forward reads {node.target!r} directly: changing it would change "
                                    "that use too; pick modules whose tensors only they use")
    nodes = list(graph.nodes)
    if nodes.index(dst_node) < nodes.index(src_node):  # fx lists nodes in the order they run
        raise InvalidInputError(f"{dst!r} does not read the output of {src!r}: pass src, then a layer "
                                "that consumes it")
    units = _units(src_mod)
    where = f"between {src!r} and {dst!r}"
    what = {"layer": "a rescaling", "neuron": "a per-unit rescaling", "permute": "a permutation"}[kind]
    layouts: dict[fx.Node, _Layout] = {src_node: _initial_layout(src_mod)}
    order: list[fx.Node] = []
    permuted: list[str] = []
    queue = [src_node]
    while queue:
        node = queue.pop(0)
        for user in node.users:
            if user is dst_node:
                if user.args[:1] != (node,) or len(user.args) != 1 or user.kwargs:
                    raise InvalidInputError(f"{what} {where}: {dst!r} is called on more than its input")
                continue
            if user in layouts or _is_shape(user):
                continue
            try:
                layouts[user] = _step(model, user, node, kind, layouts[node], units, permuted)
            except _Refused as why:
                raise InvalidInputError(f"{what} {where} would change the function: {why}. Pick a pair "
                                        "with only ReLU-like maps, pooling or flatten between them and "
                                        "no other reader of src's output") from None
            order.append(user)
            queue.append(user)
    dst_input = dst_node.args[0] if dst_node.args else None
    if dst_input not in layouts:
        raise InvalidInputError(f"{dst!r} does not read the output of {src!r}: pass src, then a layer "
                                "that consumes it")
    spread = None if kind == "layer" else _spread(dst, dst_mod, layouts[dst_input], units)
    names = tuple(str(n.target) if n.op == "call_module" else n.name for n in order)
    return ChannelPath(src, dst, kind, units, spread, tuple(permuted), names)


def _module(model: nn.Module, name: object, role: str) -> nn.Module:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{role}={name!r}: pass a module name, as model.named_modules() lists them")
    try:
        return model.get_submodule(name)
    except AttributeError:
        known = [n for n, m in model.named_modules() if isinstance(m, (nn.Linear, *_CONV, _BN))]
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
        raise InvalidInputError(f"{role}={name!r} is not a module of this model; its Linear/Conv/BatchNorm "
                                f"modules are: {shown}") from None


def _check_not_shared(model: nn.Module, mods: dict[str, nn.Module]) -> None:
    owners: dict[int, set[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        owners.setdefault(id(p), set()).add(name.rpartition(".")[0])
    for name, m in mods.items():
        for p in m.parameters(recurse=False):
            others = owners.get(id(p), set()) - {name}
            if others:
                raise InvalidInputError(f"{name!r} shares a parameter with {sorted(others)}: changing it would "
                                        "change those modules too; untie the weights first")


def _trace(model: nn.Module) -> fx.Graph:
    try:
        return fx.symbolic_trace(model).graph
    except Exception as err:  # fx raises TraceError, TypeError, RuntimeError, … on untraceable code
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise UnsupportedModelError(
            f"torch.fx cannot trace {type(model).__name__} ({first}); the named form needs a forward "
            "without Python control flow on tensor values: move such code into a leaf module or a "
            "torch.fx.wrap-ped function, or use the int form on an nn.Sequential") from None


def _call_of(graph: fx.Graph, name: str, role: str) -> fx.Node:
    calls = [n for n in graph.nodes if n.op == "call_module" and n.target == name]
    if len(calls) != 1:
        how = "is never called in forward" if not calls else f"is called {len(calls)} times in forward"
        raise InvalidInputError(f"{role} {name!r} {how}; pass a module used exactly once")
    return calls[0]


def _units(m: nn.Module) -> int:
    return m.out_features if isinstance(m, nn.Linear) else m.out_channels if isinstance(m, _CONV) else m.num_features


def _initial_layout(m: nn.Module) -> _Layout:
    return "last" if isinstance(m, nn.Linear) else "dim1" if isinstance(m, nn.BatchNorm1d) else "first"


def _describe(model: nn.Module, node: fx.Node) -> str:
    if node.op == "call_module":
        return f"{node.target!r} ({type(model.get_submodule(str(node.target))).__name__})"
    what = getattr(node.target, "__name__", str(node.target))
    return f"{node.name!r} ({what})"


def _is_shape(node: fx.Node) -> bool:
    """A node that reads only shapes (``x.size(0)``, ``x.shape[0]``, products of those)."""
    if node.op == "call_method" and node.target in ("size", "dim"):
        return True
    if node.op == "call_function" and node.target is getattr:
        return len(node.args) > 1 and node.args[1] in ("shape", "ndim")
    if node.op == "call_function" and node.target in (operator.getitem, operator.mul, operator.floordiv):
        return all(_is_shape(a) for a in node.args if isinstance(a, fx.Node)) and any(
            isinstance(a, fx.Node) for a in node.args)
    return False


def _is_batch(arg: object) -> bool:
    """``x.size(0)`` or ``x.shape[0]``: the batch size, so a reshape to ``(batch, -1)`` keeps it."""
    if not isinstance(arg, fx.Node):
        return False
    if arg.op == "call_method" and arg.target == "size":
        return tuple(arg.args[1:]) == (0,)
    return (arg.op == "call_function" and arg.target is operator.getitem and tuple(arg.args[1:]) == (0,)
            and isinstance(arg.args[0], fx.Node) and _is_shape(arg.args[0]))


def _arg(node: fx.Node, index: int, key: str, default: object) -> object:
    return node.args[index] if len(node.args) > index else node.kwargs.get(key, default)


def _step(model: nn.Module, node: fx.Node, source: fx.Node, kind: Kind, layout: _Layout, units: int,
          permuted: list[str]) -> _Layout:
    """The layout after ``node`` (which reads ``source``), or ``_Refused`` saying why it breaks the map."""
    desc = _describe(model, node)
    if node.op == "output":
        raise _Refused("the activations are also returned by forward")
    others = [a for a in node.all_input_nodes if a is not source and not _is_shape(a)]
    commutes = node.target in (operator.mul, operator.add, torch.mul, torch.add)
    if others:
        raise _Refused(f"{desc} also reads {_describe(model, others[0])}, so it mixes the changed "
                       "activations with others (a residual connection?)")
    if not (node.args[:1] == (source,) or (commutes and node.args[1:2] == (source,))):
        raise _Refused(f"{desc} does not take the activations as its first input")
    if node.op == "call_module":
        return _module_step(model.get_submodule(str(node.target)), str(node.target), desc, kind, layout,
                            units, permuted)
    target = node.target
    if node.op == "call_method":
        if target in _HOMOGENEOUS_METHODS:
            return layout
        if target in _EQUIVARIANT_METHODS:
            return _equivariant(desc, kind, layout)
        if target in _LINEAR_METHODS:
            return _reshape(node, desc, kind, layout, method=True)
        if target in ("mul", "div", "add", "sub", "neg"):
            return _scalar(node, source, desc, kind, layout, str(target))
        raise _Refused(f"{desc} is not known to commute with the map")
    if target in _HOMOGENEOUS_FUNCS:
        return layout
    if target in _EQUIVARIANT_FUNCS:
        return _equivariant(desc, kind, layout)
    if target in _POOL_FUNCS:
        name = getattr(target, "__name__", "")
        if "max" in name and _arg(node, 2 if "adaptive" in name else 6, "return_indices", False):
            raise _Refused(f"{desc} returns indices")
        return _pool(desc, kind, layout)
    if target in _DROPOUT_FUNCS:
        drops = target not in (F.alpha_dropout, F.feature_alpha_dropout)  # their default: training=False
        if _arg(node, 2, "training", drops) and _arg(node, 1, "p", 0.5) != 0:
            raise _Refused(f"{desc} drops units at random (training=True); call it with "
                           "training=self.training and put the model in eval mode")
        return layout
    if target in _LINEAR_FUNCS:
        return _reshape(node, desc, kind, layout, method=False)
    if target in _SCALAR_OPS:
        return _scalar(node, source, desc, kind, layout, _SCALAR_OPS[target])
    raise _Refused(f"{desc} is not known to commute with the map")


def _module_step(m: nn.Module, name: str, desc: str, kind: Kind, layout: _Layout, units: int,
                 permuted: list[str]) -> _Layout:
    if isinstance(m, _HOMOGENEOUS_MODULES):
        return layout
    if isinstance(m, (nn.Linear, *_CONV)):
        raise _Refused(f"{desc} also reads the activations (only dst may)")
    if isinstance(m, nn.PReLU):
        if m.num_parameters == 1:
            return layout
        if m.num_parameters != units or layout == "flat":
            raise _Refused(f"{desc} has {m.num_parameters} slopes, not one per unit of src")
        if kind == "permute":
            permuted.append(name)
        return layout
    if isinstance(m, _EQUIVARIANT_MODULES):
        return _equivariant(desc, kind, layout)
    if isinstance(m, _POOL_MODULES):
        if getattr(m, "return_indices", False):
            raise _Refused(f"{desc} returns indices")
        return _pool(desc, kind, layout)
    if isinstance(m, _DROPOUT_MODULES):
        if m.training and m.p != 0:
            raise _Refused(f"{desc} is in train mode and drops units at random; call model.eval() first")
        return layout
    if isinstance(m, nn.Flatten):
        if kind != "layer" and (m.start_dim, m.end_dim) != (1, -1):
            raise _Refused(f"{desc} flattens dims {m.start_dim}..{m.end_dim}, which moves the unit index")
        return layout if kind == "layer" or layout == "last" else "flat"
    if isinstance(m, _BN):
        if kind != "permute":
            mode = "train mode: its batch statistics absorb the scale" if m.training else (
                "eval mode: BN(cz) = γ(cz − μ)/σ + β ≠ c·BN(z)")
            raise _Refused(f"the BatchNorm {desc} lies in between ({mode}); rescale that BatchNorm "
                           f"instead, as src: ({name!r}, dst)")
        if m.num_features != units or layout == "flat":
            raise _Refused(f"{desc} normalizes {m.num_features} features, not the {units} units of src")
        permuted.append(name)
        return layout
    raise _Refused(f"{desc} is not known to commute with the map")


def _equivariant(desc: str, kind: Kind, layout: _Layout) -> _Layout:
    if kind != "permute":
        raise _Refused(f"{desc} is not positively homogeneous (σ(cz) ≠ c·σ(z)); only permutations pass it")
    return layout


def _pool(desc: str, kind: Kind, layout: _Layout) -> _Layout:
    if kind != "layer" and layout != "first":
        raise _Refused(f"{desc} pools across the units here (they are not a channel dim of a "
                       "tensor with spatial dims)")
    return layout


def _reshape(node: fx.Node, desc: str, kind: Kind, layout: _Layout, *, method: bool) -> _Layout:
    if kind == "layer":
        return layout  # linear and value-preserving: commutes with one positive factor
    name = node.target if method else getattr(node.target, "__name__", "")
    rest = node.args[1:]
    if name == "flatten":
        keeps = (_arg(node, 1, "start_dim", 0), _arg(node, 2, "end_dim", -1)) == (1, -1)
    elif name in ("view", "reshape"):
        shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        keeps = len(shape) == 2 and _is_batch(shape[0]) and shape[1] == -1
    else:
        keeps = False
    if not keeps:
        raise _Refused(f"{desc} may move the unit index; write flatten(x, 1) or x.view(x.size(0), -1)")
    return "last" if layout == "last" else "flat"


def _scalar(node: fx.Node, source: fx.Node, desc: str, kind: Kind, layout: _Layout, op: str) -> _Layout:
    operands = [a for a in node.args if a is not source] + list(node.kwargs.values())
    if op != "neg" and not (len(operands) == 1 and isinstance(operands[0], (int, float))
                            and not isinstance(operands[0], bool)):
        raise _Refused(f"{desc} combines the activations with something other than one number")
    if op in ("add", "sub") and kind != "permute":
        raise _Refused(f"{desc} shifts the activations (z + b is not homogeneous); only permutations pass it")
    return layout


def _spread(dst: str, m: nn.Module, layout: _Layout, units: int) -> int:
    """Inputs of ``dst`` per unit of src: ``in_features/units`` after a channel-major flatten, else 1."""
    if isinstance(m, nn.Linear):
        if layout == "first":
            raise InvalidInputError(f"{dst!r} (Linear) would read the last, spatial dim of src's channels; "
                                    "flatten with flatten(x, 1) first")
        matched = m.in_features % units == 0 if layout == "flat" else m.in_features == units
        if not matched:
            raise InvalidInputError(f"{dst!r} takes {m.in_features} inputs for the {units} units of src; "
                                    "they cannot be matched unit by unit")
        return m.in_features // units
    if layout not in ("first", "dim1") or m.in_channels != units:
        raise InvalidInputError(f"{dst!r} (Conv) must read src's {units} units as its {m.in_channels} input "
                                "channels, without a reshape in between")
    return 1
