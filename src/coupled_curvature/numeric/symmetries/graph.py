"""Which named module pairs of any ``nn.Module`` carry a T2 map: the structural check on its fx graph.

Rescaling the output units of ``src`` is compensated exactly in the inputs of ``dst`` only if
nothing between them breaks ``f(c·z) = c·f(z)`` (per unit, for a per-unit scale) and nothing else
reads the rescaled activations. :func:`channel_path` walks every use of ``src``'s output on
``torch.fx.symbolic_trace(model)`` until ``dst``. Between them may lie: for one factor ``c > 0``,
positively homogeneous maps (ReLU, LeakyReLU, PReLU, abs, eval-mode dropout, max/avg pooling,
reshapes, sums, products with a number); for a factor per unit, those acting per unit that keep
the unit index (``flatten(x, 1)``, ``x.view(x.size(0), -1)``); for a permutation, also any
parameter-free element-wise map (tanh, GELU, …) and a BatchNorm or per-channel PReLU, permuted
alike (each node is judged by :func:`~coupled_curvature.numeric.symmetries.passthrough.layout_after`).
A BatchNorm in between refuses rescaling: in eval mode ``BN(cz) = γ(cz − μ)/σ + β ≠ c·BN(z)``,
in train mode its batch statistics absorb ``c``; rescale the BatchNorm itself (as ``src``). Residual additions, concatenations, slices and any second reader are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx, nn
from torch.nn.utils import parametrize

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.symmetries.passthrough import KINDS, Kind, Layout, Refused, is_shape, layout_after
from coupled_curvature.numeric.symmetries.tied import check_untied, parameter_owners

__all__ = ["ChannelPath", "Kind", "channel_path"]


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


def channel_path(model: nn.Module, src: str, dst: str, kind: Kind) -> ChannelPath:
    """Check on ``torch.fx.symbolic_trace(model)`` that ``W_src -> a⊙W_src, b_src -> a⊙b_src,
    W_dst -> W_dst·diag(1/a)`` (``kind`` "layer": ``a = c·1``; "neuron": any ``a > 0``) or a
    permutation of the units (``kind="permute"``) keeps the function, and say how.

    Raises ``InvalidInputError`` naming the node that breaks it, ``UnsupportedModelError`` when
    fx cannot trace the model.

    >>> import torch
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
    coupled_curvature.base.errors.InvalidInputError: a per-unit rescaling between 'conv' and 'fc' ...
    """
    if kind not in KINDS:
        raise InvalidInputError(f"kind={kind!r}: pass one of {', '.join(KINDS)}")
    src_mod, dst_mod = _module(model, src, "src"), _module(model, dst, "dst")
    if src == dst:
        raise InvalidInputError(f"src and dst are both {src!r}: pass the producer and the next consumer")
    src_caps, dst_caps = layer_capabilities(src_mod), layer_capabilities(dst_mod)
    if "src" not in src_caps.symmetry:
        raise InvalidInputError(f"src {src!r} is a {type(src_mod).__name__}; pass a Linear, Conv or BatchNorm")
    if "dst" not in dst_caps.symmetry:
        raise InvalidInputError(f"dst {dst!r} is a {type(dst_mod).__name__}; pass a Linear or Conv that "
                                "reads src's output")
    if src_caps.batch_statistics and not src_mod.affine:
        raise InvalidInputError(f"src {src!r} is a BatchNorm without affine weight and bias: nothing to "
                                "scale; pass the layer before it, or build it with affine=True")
    if kind == "permute" and src_caps.batch_statistics:
        raise InvalidInputError(f"src {src!r} is a BatchNorm: its output unit j reads input unit j, so its "
                                "units cannot be permuted alone; pass the Linear/Conv before it as src")
    for name, m in ((src, src_mod), (dst, dst_mod)):
        if kind != "layer" and getattr(m, "groups", 1) != 1 and (kind == "permute" or m is dst_mod):
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
    layouts: dict[fx.Node, Layout] = {src_node: _initial_layout(src_mod)}
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
            if user in layouts or is_shape(user):
                continue
            try:
                layouts[user] = layout_after(model, user, node, kind, layouts[node], units, permuted)
            except Refused as why:
                raise InvalidInputError(f"{what} {where} would change the function: {why}. Pick a pair "
                                        "with only ReLU-like maps, pooling or flatten between them and "
                                        "no other reader of src's output") from None
            order.append(user)
            queue.append(user)
    dst_input = dst_node.args[0] if dst_node.args else None
    if not isinstance(dst_input, fx.Node) or dst_input not in layouts:  # the layouts' keys are nodes
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
        known = [n for n, m in model.named_modules() if "src" in layer_capabilities(m).symmetry]
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
        raise InvalidInputError(f"{role}={name!r} is not a module of this model; its Linear/Conv/BatchNorm "
                                f"modules are: {shown}") from None


def _check_not_shared(model: nn.Module, mods: dict[str, nn.Module]) -> None:
    owners = parameter_owners(model)
    for name, m in mods.items():
        for p in m.parameters(recurse=False):
            users = {n.rpartition(".")[0] for n in owners.get(id(p), set())}  # the modules holding it
            check_untied(users, name, "shares a parameter with")


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
    caps = layer_capabilities(m)
    return _size(m, "out_features" if caps.unit_axis == "last" else "num_features" if caps.batch_statistics
                 else "out_channels")


def _size(m: nn.Module, attr: str) -> int:
    """``m.<attr>``, a size of a Linear, Conv or BatchNorm (the modules the capabilities admit as src or dst)."""
    value = getattr(m, attr)
    assert isinstance(value, int), f"{type(m).__name__}.{attr} is a size"
    return value


def _initial_layout(m: nn.Module) -> Layout:
    axis = layer_capabilities(m).unit_axis
    assert axis is not None, "a src module (Linear, Conv, BatchNorm) has a unit axis"
    return axis


def _spread(dst: str, m: nn.Module, layout: Layout, units: int) -> int:
    """Inputs of ``dst`` per unit of src: ``in_features/units`` after a channel-major flatten, else 1."""
    if layer_capabilities(m).unit_axis == "last":  # a Linear
        if layout == "first":
            raise InvalidInputError(f"{dst!r} (Linear) would read the last, spatial dim of src's channels; "
                                    "flatten with flatten(x, 1) first")
        inputs = _size(m, "in_features")
        matched = inputs % units == 0 if layout == "flat" else inputs == units
        if not matched:
            raise InvalidInputError(f"{dst!r} takes {inputs} inputs for the {units} units of src; "
                                    "they cannot be matched unit by unit")
        return inputs // units
    channels = _size(m, "in_channels")
    if layout not in ("first", "dim1") or channels != units:
        raise InvalidInputError(f"{dst!r} (Conv) must read src's {units} units as its {channels} input "
                                "channels, without a reshape in between")
    return 1
