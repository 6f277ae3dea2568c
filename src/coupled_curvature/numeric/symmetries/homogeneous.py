"""Function-preserving reparameterizations of ReLU-type networks (T2).

``layer`` is either an int, counting the Linear/Conv layers of an ``nn.Sequential`` chain, or a
pair of module names ``(src, dst)`` of any ``nn.Module``: ``src`` (Linear, Conv or BatchNorm) has
its output units changed, ``dst`` (Linear or Conv) compensates in its inputs, and the model's fx
graph is checked first (:mod:`graph`): only maps that commute with the change may lie between.

Every map returns a new model in the model's own dtype: a float32 model stays float32, so its
``D`` agrees with the original's only to float32 rounding (about 1e-7 relative after the
float64 diagnosis); call ``.double()`` on the model first to see the invariance to ~1e-13. A
factor whose products overflow or underflow that dtype is refused, with the usable range.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, TrainModeError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import check_flag, float64_copy, forward_checked, prepare_inputs
from coupled_curvature.numeric.layer_capabilities import LayerCapabilities, layer_capabilities
from coupled_curvature.numeric.symmetries.arguments import INTEGER_DTYPES, array_argument
from coupled_curvature.numeric.symmetries.graph import ChannelPath, Kind, channel_path

Layer = int | tuple[str, str]



def passes_chain(caps: LayerCapabilities) -> bool:
    """May a module with these capabilities lie between two weight layers of the int form? It must be
    positively homogeneous of degree 1 (``σ(cz) = cσ(z)``, ``c > 0``) and commute with a positive per-channel
    scale and with channel permutations: a pass-through (Identity, Flatten, Dropout), a parameter-free
    element-wise map (ReLU, LeakyReLU) or a 1-d/2-d pooling, as the chain's weight layers are 1-d/2-d.

    >>> passes_chain(layer_capabilities(nn.ReLU)), passes_chain(layer_capabilities(nn.Tanh))
    (True, False)
    """
    return caps.degree == 1 and (caps.pass_through or caps.elementwise
                                 or (caps.pool is not None and (caps.spatial_dims or 0) <= 2))


@dataclass(frozen=True)
class LayerPair:
    """The modules a layer symmetry acts between: ``this`` (its output units are scaled or permuted) and ``nxt``
    (its inputs get the inverse), with how they are wired."""

    this: nn.Module
    nxt: nn.Module
    spread: int | None  # next-layer inputs per unit of this layer (> 1 after Flatten); None: all of them
    label: str  # "weight layers 0 and 1", "'a' and 'b'"
    between: tuple[nn.Module, ...] = ()  # per-channel modules (BatchNorm, PReLU) permuted with the units


def weight_layers(model: nn.Module) -> list[nn.Module]:
    """The Linear/Conv layers of a (possibly nested) ``nn.Sequential``, in order."""
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError(
            f"an int layer counts the weight layers of an nn.Sequential chain; got {type(model).__name__}. "
            "Name the two modules instead, e.g. layer_rescale(model, ('block.bn1', 'block.conv2'), c)"
        )
    return [m for _, m in leaf_modules(model) if "chain" in layer_capabilities(m).symmetry]


def layer_weight(m: nn.Module) -> Tensor:
    """The weight of a weight layer (Linear, Conv, an affine BatchNorm), whose rows are the layer's units.

    >>> tuple(layer_weight(nn.Linear(2, 3)).shape)
    (3, 2)
    """
    weight = getattr(m, "weight", None)
    if not isinstance(weight, Tensor):
        raise UnsupportedModelError(f"{type(m).__name__} has no weight tensor; a symmetry acts on the weights of "
                                    "Linear, Conv or affine BatchNorm layers: pass one of those")
    return weight


def layer_bias(m: nn.Module) -> Tensor | None:
    """The bias of a weight layer, or None for a layer built without one."""
    bias = getattr(m, "bias", None)
    return bias if isinstance(bias, Tensor) else None


def leaf_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(path, module)`` of every module without children, in definition order.

    >>> [n for n, _ in leaf_modules(nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1))))]
    ['0', '1.0', '1.1']
    """
    return [(n, m) for n, m in model.named_modules() if not list(m.children())]


def _locate(model: nn.Module, layer: Layer, kind: Kind) -> int | ChannelPath:
    """An int ``layer`` as given (checked by :func:`layer_pair`), a ``(src, dst)`` pair checked on the fx graph."""
    if isinstance(layer, (tuple, list)):
        if len(layer) != 2:
            raise InvalidInputError(f"layer={layer!r}: pass an int or two module names (src, dst)")
        return channel_path(model, layer[0], layer[1], kind)
    return layer


def layer_pair(model: nn.Module, layer: int | ChannelPath) -> LayerPair:
    """The two modules a layer symmetry acts between at ``layer`` (an int index among the weight layers, or a
    channel path checked on the fx graph), with the modules between them; a package error for any other layer."""
    if isinstance(layer, ChannelPath):
        between = tuple(model.get_submodule(n) for n in layer.permuted)
        return LayerPair(model.get_submodule(layer.src), model.get_submodule(layer.dst), layer.spread,
                     f"{layer.src!r} and {layer.dst!r}", between)
    layers = weight_layers(model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(layers) - 1:
        raise InvalidInputError(
            f"layer={layer!r}: this model has weight layers 0..{len(layers) - 1}, and layer must "
            f"have a next weight layer to carry the compensation: pass an int in 0..{len(layers) - 2}"
        )
    leaves = leaf_modules(model)
    start = next(i for i, (_, m) in enumerate(leaves) if m is layers[layer])
    stop = next(i for i, (_, m) in enumerate(leaves) if m is layers[layer + 1])
    for name, m in leaves[start + 1 : stop]:
        if not passes_chain(layer_capabilities(m)):
            raise UnsupportedModelError(
                f"module {name!r} ({type(m).__name__}) between weight layers {layer} and "
                f"{layer + 1} is not positively homogeneous of degree 1, so rescaling would "
                "change the function; supported: ReLU, LeakyReLU, Identity, pooling, Flatten"
            )
    this, nxt = layers[layer], layers[layer + 1]
    units = layer_weight(this).shape[0]
    fan_in = layer_weight(nxt).shape[1]
    if fan_in % units:
        raise UnsupportedModelError(
            f"weight layer {layer + 1} takes {fan_in} inputs, not a multiple of the {units} "
            f"units of layer {layer}; cannot match units to the next layer's inputs"
        )
    return LayerPair(this, nxt, fan_in // units, f"weight layers {layer} and {layer + 1}")


def _usable_range(pair: LayerPair) -> tuple[float, float]:
    """Factors ``c`` for which ``c·(this layer)`` and ``(next layer)/c`` stay finite and normal in the dtype."""
    weight = layer_weight(pair.this)
    info = torch.finfo(weight.dtype)
    this = torch.cat([p.detach().abs().reshape(-1) for p in (weight, layer_bias(pair.this)) if p is not None])
    nxt = layer_weight(pair.nxt).detach().abs().reshape(-1)
    this, nxt = this[this > 0].double(), nxt[nxt > 0].double()
    lo, hi = info.tiny / info.max, info.max / info.tiny
    if this.numel():
        lo, hi = max(lo, info.tiny / float(this.min())), min(hi, info.max / float(this.max()))
    if nxt.numel():
        lo, hi = max(lo, float(nxt.max()) / info.max), min(hi, float(nxt.min()) / info.tiny)
    return lo, hi


def _representable(old: Tensor, new: Tensor, dtype: torch.dtype) -> bool:
    """``new`` is finite, and normal wherever ``old`` was non-zero (no overflow, no flush to 0)."""
    tiny = torch.finfo(dtype).tiny
    return bool(torch.isfinite(new).all()) and bool((new.abs()[old != 0] >= tiny).all())


def _factor(c: object, name: str) -> float:
    """A real, finite, positive factor as a float (no strings, no bools)."""
    if isinstance(c, Tensor) and c.numel() == 1 and not c.is_complex():
        c = c.item()
    if isinstance(c, bool) or not isinstance(c, numbers.Real):
        raise InvalidInputError(f"{name} must be a real number, got {c!r}; pass e.g. 8.0")
    c = float(c)
    if not (c > 0.0) or c == float("inf"):
        raise InvalidInputError(f"{name} must be a finite positive number, got {c!r}; pass e.g. 8.0")
    return c


def _transform(model: nn.Module, layer: int | ChannelPath, row_scale: Tensor, perm: Tensor) -> nn.Module:
    """New model: rows of layer ``layer`` permuted by ``perm`` and scaled by ``row_scale``;
    the matching inputs of the next layer permuted and scaled by ``1/row_scale`` (all of its
    weight divided by the one factor where ``spread`` is None), per-channel modules in between permuted.

    Refuses (before returning) scales whose products overflow or underflow the model's dtype."""
    new = copy.deepcopy(model)
    pair = layer_pair(new, layer)
    weight, bias, W = layer_weight(pair.this), layer_bias(pair.this), layer_weight(pair.nxt)
    dtype = weight.dtype
    if weight.is_meta or W.is_meta:
        raise UnsupportedModelError(f"{pair.label} are on the meta device (no values); materialize the "
                                    "model first (model.to_empty(device='cpu'), then load_state_dict)")
    if not dtype.is_floating_point:
        raise UnsupportedModelError(f"{pair.label} hold {dtype} weights; symmetries need float weights: call .double()")
    olds = [p.detach().clone() for p in (weight, bias, W) if p is not None]
    with torch.no_grad():
        a = row_scale.to(dtype)
        shape = (-1,) + (1,) * (weight.dim() - 1)
        weight.copy_(weight[perm] * a.reshape(shape))
        if bias is not None:
            bias.copy_(bias[perm] * a)
        if pair.spread is None:  # one factor for every unit (a named layer_rescale): divide all of W
            idx = torch.arange(W.shape[1])
            W.div_(a[0])
        else:  # next layer: input index j*spread + s belongs to unit j (channel-major Flatten)
            idx = (perm.reshape(-1, 1) * pair.spread + torch.arange(pair.spread)).reshape(-1)
            inv = (1.0 / a).repeat_interleave(pair.spread)
            shape_next = (1, -1) + (1,) * (W.dim() - 2)
            W.copy_(W[:, idx] * inv.reshape(shape_next))
        for m in pair.between:
            for t in (getattr(m, k, None) for k in ("weight", "bias", "running_mean", "running_var")):
                if t is not None:
                    t.copy_(t[perm])
    news = [p.detach() for p in (weight, bias, W) if p is not None]
    olds = [olds[0][perm], *([olds[1][perm]] if bias is not None else []), olds[-1][:, idx]]
    if not all(_representable(o, n, dtype) for o, n in zip(olds, news)):
        lo, hi = _usable_range(layer_pair(model, layer))
        raise InvalidInputError(
            f"the scale(s) {_describe(row_scale)} overflow or underflow {dtype} on {pair.label} "
            "(they would hold inf or lose entries to 0); with these weights the usable range is "
            f"[{lo:.3g}, {hi:.3g}]: pass factors in it, or call .double() on the model first for a wider range"
        )
    return new


def _describe(a: Tensor) -> str:
    vals = a.double()
    return f"{float(vals[0]):g}" if bool((vals == vals[0]).all()) else f"in [{float(vals.min()):g}, {float(vals.max()):g}]"


def layer_rescale(model: nn.Module, layer: Layer, c: float) -> nn.Module:
    """T2: ``W_l -> cW_l, b_l -> cb_l, W_{l+1} -> W_{l+1}/c`` (degree-1 activations), as a new model.

    ``layer`` counts weight layers (Linear/Conv) from 0 of an ``nn.Sequential``, or is a pair
    ``(src, dst)`` of module names of any model: ``W_src -> c·W_src, b_src -> c·b_src`` (for a
    BatchNorm src its affine weight and bias), ``W_dst -> W_dst/c``, after the fx check that only
    positively homogeneous maps lie between and nothing else reads src's output (a residual
    addition, a BatchNorm or tanh in between is refused). The function is unchanged for
    every input; raw curvature of the affected blocks scales by ``c^{∓2}`` (T3). The result
    keeps the model's dtype (float32 stays float32: ``D`` then agrees to float32 rounding,
    ~1e-7; ``.double()`` the model first for ~1e-13). ``c`` must be finite, positive and such
    that ``c·W_l`` and ``W_{l+1}/c`` neither overflow nor underflow that dtype; otherwise
    ``InvalidInputError`` gives the usable range.

    Args:
        model: the network; it is copied, never modified.
        layer: a weight layer's index (Linear/Conv, from 0) in an ``nn.Sequential``, or a pair ``(src, dst)`` of
            module names of any model.
        c: the factor, finite and positive, such that no weight overflows or underflows the model's dtype.

    Returns:
        A new model with the same function and the model's dtype.

    Raises:
        InvalidInputError: a factor out of the usable range (the range is named), or a layer out of range.
        UnsupportedModelError: something other than a positively homogeneous map lies between ``src`` and ``dst``,
            or another module reads ``src``'s output.

    See also:
        :func:`neuron_rescale`, :func:`permute_neurons`, :func:`function_gap` (checks the function is kept).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> X = torch.randn(5, 2)
    >>> function_gap(net, layer_rescale(net, 0, 8.0), X) < 1e-5
    True
    >>> class Block(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc1, self.bn, self.fc2 = nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)
    ...     def forward(self, x):
    ...         return x[:, :2] + self.fc2(torch.relu(self.bn(self.fc1(x))))
    >>> block = Block().eval()
    >>> function_gap(block, layer_rescale(block, ("bn", "fc2"), 8.0), X[:, :2]) < 1e-5
    True
    """
    c = _factor(c, "c")
    where, units = symmetry_target(model, layer, "layer")
    return _transform(model, where, torch.full((units,), c, dtype=torch.float64), torch.arange(units))


def neuron_rescale(model: nn.Module, layer: Layer, scales: Sequence[float] | Tensor) -> nn.Module:
    """T2 neuron-wise: rows of ``W_l``, ``b_l`` times ``a``; columns of ``W_{l+1}`` times ``1/a``.

    ``layer`` as in :func:`layer_rescale` (an int, or ``(src, dst)``: ``W_src -> diag(a)·W_src``,
    ``b_src -> a⊙b_src``, the inputs of ``dst`` fed by unit ``j`` divided by ``a_j``; every map in
    between must act per unit and keep the unit index, e.g. ``flatten(x, 1)``).
    ``scales`` is a positive vector ``a`` with one entry per unit (channel) of ``layer``.
    Non-uniform ``a`` is not conformal on the tensor blocks (T5), so ``D`` moves. The result
    keeps the model's dtype; scales whose products overflow or underflow it are refused.

    Args:
        model: the network, as for :func:`layer_rescale`.
        layer: the weight layer or ``(src, dst)`` pair, as for :func:`layer_rescale`.
        scales: one positive factor per unit (channel) of ``layer``.

    Returns:
        The new model, as for :func:`layer_rescale`.

    Raises:
        InvalidInputError: a scale that is not positive and finite, the wrong number of scales, or products that
            overflow or underflow the dtype.
        UnsupportedModelError: a map between ``src`` and ``dst`` that does not act per unit.

    See also:
        :func:`layer_rescale` (the uniform case, conformal: ``D`` is kept),
        :func:`~coupled_curvature.numeric.certify.invariance.certify_invariance`.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> function_gap(net, neuron_rescale(net, 0, [1.0, 2.0, 0.5]), torch.randn(4, 2)) < 1e-5
    True
    """
    where, units = symmetry_target(model, layer, "neuron")
    a = _numbers(scales, "scales", integer=False, units=units, layer=layer)
    if not bool(torch.isfinite(a).all()) or not bool((a > 0).all()):
        raise InvalidInputError("scales must be finite and positive; pass e.g. [1.0, 2.0, 0.5]")
    return _transform(model, where, a, torch.arange(units))


def permute_neurons(model: nn.Module, layer: Layer, perm: Sequence[int] | Tensor) -> nn.Module:
    """T2: relabel the hidden units of ``layer`` by ``perm`` (rows of ``W_l``, ``b_l``; columns of ``W_{l+1}``).

    ``layer`` as in :func:`layer_rescale`; for ``(src, dst)`` (src a Linear or Conv) any
    parameter-free element-wise map may lie between (tanh, GELU too), and a BatchNorm or
    per-channel PReLU in between has its tensors permuted alike.
    ``perm`` holds integers (no floats, no bools), each of ``0..units-1`` once. The result keeps
    the model's dtype.

    Args:
        model: the network, as for :func:`layer_rescale`.
        layer: the weight layer or ``(src, dst)`` pair, as for :func:`layer_rescale`.
        perm: the new order of the units, integers, each of ``0..units−1`` once.

    Returns:
        The new model, as for :func:`layer_rescale`.

    Raises:
        InvalidInputError: ``perm`` is not a permutation of the layer's units.
        UnsupportedModelError: a map between ``src`` and ``dst`` that mixes units.

    See also:
        :func:`layer_rescale`, :func:`neuron_rescale`, :func:`function_gap`.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> moved = permute_neurons(net, 0, [2, 0, 1])
    >>> torch.equal(moved[0].bias, net[0].bias[[2, 0, 1]]), function_gap(net, moved, torch.randn(4, 2)) < 1e-6
    (True, True)
    """
    where, units = symmetry_target(model, layer, "permute")
    p = _numbers(perm, "perm", integer=True, units=units, layer=layer)
    if not torch.equal(torch.sort(p).values, torch.arange(units)):
        raise InvalidInputError(f"perm must be a permutation of 0..{units - 1}: pass each index once, e.g. "
                                f"{list(range(units))[::-1]}")
    return _transform(model, where, torch.ones(units, dtype=torch.float64), p)


def symmetry_target(model: nn.Module, layer: Layer, kind: Kind) -> tuple[int | ChannelPath, int]:
    """Where the map of ``kind`` acts for ``layer`` (checked), and how many units it acts on."""
    where = _locate(model, layer, kind)
    return where, layer_weight(layer_pair(model, where).this).shape[0]


def _numbers(values: object, name: str, *, integer: bool, units: int, layer: Layer) -> Tensor:
    """``values`` (a sequence, numpy array or tensor of real numbers, one per unit of ``layer``) as a flat
    long or float64 tensor; floats are refused where indices are meant (no silent truncation), bools
    and strings always."""
    kind = "integer indices, e.g. [2, 0, 1]" if integer else "real numbers, e.g. [1.0, 2.0, 0.5]"
    t = array_argument(values)
    if t is None or not (t.dtype in INTEGER_DTYPES or (not integer and t.is_floating_point())):
        raise InvalidInputError(f"{name} must hold {kind}; got {values!r}: pass {kind.split(', ')[0]}")
    if t.dim() > 1:
        raise InvalidInputError(f"{name} must be a flat list (one entry per unit), got shape {tuple(t.shape)}; "
                                "pass a 1-D sequence")
    if t.numel() != units:
        what = "a permutation of 0..n−1, one per unit" if integer else "one per unit"
        raise InvalidInputError(f"{name} has {t.numel()} entries; layer {layer} has {units} units: pass {what}")
    return (t.long() if integer else t.double()).reshape(-1)


def function_gap(a: nn.Module, b: nn.Module, X: Tensor, *, allow_train_mode: bool = False) -> float:
    """``max |a(X) − b(X)|`` over all inputs and outputs, evaluated in float64 on copies.

    ``X`` is checked as in ``diagnose`` (finite, at least one sample; a failing forward names the
    fix), the models' parameters must be finite, and non-finite outputs are refused rather than
    returned as NaN. A model with Dropout in train mode is refused (``TrainModeError``): its output is
    random, so a net would differ from itself; call ``.eval()`` first, or pass ``allow_train_mode=True``
    if you mean it. BatchNorm in train mode is deterministic given ``X`` (batch statistics of ``X``,
    the setting of ``bn_rescale``) and is taken as it is.

    Args:
        a: one network.
        b: the other, taking the same inputs.
        X: the inputs, finite, at least one sample.
        allow_train_mode: compare models with dropout in training mode anyway.

    Returns:
        ``max |a(X) − b(X)|`` as a float (0.0 for the same function).

    Raises:
        InvalidInputError: non-finite parameters, inputs or outputs, or a forward pass that fails (with the fix).
        TrainModeError: a model with dropout in training mode and ``allow_train_mode`` off.

    See also:
        :func:`layer_rescale`, :func:`neuron_rescale`, :func:`permute_neurons` and the attention maps, whose results
        it checks.

    >>> net = nn.Sequential(nn.Linear(2, 1))
    >>> function_gap(net, net, torch.randn(3, 2))
    0.0
    """
    Xd = prepare_inputs(X, "X")
    if isinstance(Xd, Tensor) and (Xd.dim() == 0 or Xd.shape[0] == 0):
        raise InvalidInputError(f"X holds no samples (shape {tuple(Xd.shape)}): the gap over no inputs says nothing; "
                                "pass at least one sample")
    check_flag(allow_train_mode, "allow_train_mode")
    for k, m in (("a", a), ("b", b)):
        random = [n for n, mod in (m.named_modules() if isinstance(m, nn.Module) else [])
                  if mod.training and layer_capabilities(mod).stochastic and mod.p > 0]
        if random and not allow_train_mode:
            raise TrainModeError(f"model {k}: module {random[0]!r} (Dropout) is in train mode, so its output is random "
                                 "and a net would differ from itself; call .eval() first, or pass "
                                 "allow_train_mode=True if you mean it")
    copies = [(k, float64_copy(m, allow_train_mode=True)) for k, m in (("a", a), ("b", b))]
    outputs = [(k, forward_checked(m, Xd, f"model {k}")) for k, m in copies]
    ya, yb = (_finite_output(k, y) for k, y in outputs)
    if ya.shape != yb.shape:
        raise InvalidInputError(f"the models' outputs differ in shape: {tuple(ya.shape)} vs {tuple(yb.shape)}")
    if not ya.numel():
        raise InvalidInputError(f"the models give empty outputs (shape {tuple(ya.shape)}) on X; there is no gap to "
                                "measure")
    return float((ya - yb).abs().max())


def _finite_output(k: str, y: object) -> Tensor:
    """The output ``y`` of model ``k``, refused unless it is a tensor, finite where it is floating point."""
    if not isinstance(y, Tensor):
        raise InvalidInputError(f"model {k} returned {type(y).__name__}, not a tensor; pass models that return tensors")
    if y.is_floating_point() and not bool(torch.isfinite(y).all()):
        raise InvalidInputError(f"model {k} gives non-finite outputs (NaN or inf) on X; check its weights "
                                "(a symmetry factor outside the dtype's range?) and X")
    return y


from coupled_curvature.numeric.symmetries.reparam import (  # noqa: E402,F401  (the symmetries of reparam.py, re-exported)
    ScaledLoss, SymmetryResult, bn_rescale, linear_mix, orthogonal_mix, random_invertible,
    random_orthogonal, reparametrize, scale_loss,
)
