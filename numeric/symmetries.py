"""Function-preserving reparameterizations of ReLU-type ``nn.Sequential`` networks (T2)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.errors import InvalidInputError, UnsupportedModelError

_WEIGHT_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d)
# Positively homogeneous of degree 1 (σ(cz) = cσ(z), c > 0), or commuting with a positive
# per-channel scale and with channel permutations.
_HOMOGENEOUS = (
    nn.ReLU, nn.LeakyReLU, nn.Identity, nn.Flatten, nn.Dropout,
    nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
)


@dataclass(frozen=True)
class _Pair:
    this: nn.Module
    nxt: nn.Module
    spread: int  # next-layer input features per unit of this layer (> 1 after Flatten)


def weight_layers(model: nn.Module) -> list[nn.Module]:
    """The Linear/Conv layers of a (possibly nested) ``nn.Sequential``, in order."""
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError(
            f"symmetries act on nn.Sequential chains; got {type(model).__name__}. Build the "
            "network as nn.Sequential(Linear/Conv, ReLU, ...) to use them"
        )
    return [m for _, m in _leaves(model) if isinstance(m, _WEIGHT_LAYERS)]


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if not list(m.children())]


def _pair(model: nn.Module, layer: int) -> _Pair:
    layers = weight_layers(model)
    if not isinstance(layer, int) or not 0 <= layer < len(layers) - 1:
        raise InvalidInputError(
            f"layer={layer!r}: this model has weight layers 0..{len(layers) - 1}, and layer must "
            f"have a next weight layer to carry the compensation, so 0..{len(layers) - 2}"
        )
    leaves = _leaves(model)
    start = next(i for i, (_, m) in enumerate(leaves) if m is layers[layer])
    stop = next(i for i, (_, m) in enumerate(leaves) if m is layers[layer + 1])
    for name, m in leaves[start + 1 : stop]:
        if not isinstance(m, _HOMOGENEOUS):
            raise UnsupportedModelError(
                f"module {name!r} ({type(m).__name__}) between weight layers {layer} and "
                f"{layer + 1} is not positively homogeneous of degree 1, so rescaling would "
                "change the function; supported: ReLU, LeakyReLU, Identity, pooling, Flatten"
            )
    this, nxt = layers[layer], layers[layer + 1]
    units = this.weight.shape[0]
    fan_in = nxt.weight.shape[1]
    if fan_in % units:
        raise UnsupportedModelError(
            f"weight layer {layer + 1} takes {fan_in} inputs, not a multiple of the {units} "
            f"units of layer {layer}; cannot match units to the next layer's inputs"
        )
    return _Pair(this, nxt, fan_in // units)


def _transform(model: nn.Module, layer: int, row_scale: Tensor, perm: Tensor) -> nn.Module:
    """New model: rows of layer ``layer`` permuted by ``perm`` and scaled by ``row_scale``;
    the matching inputs of the next layer permuted and scaled by ``1/row_scale``."""
    new = copy.deepcopy(model)
    pair = _pair(new, layer)
    with torch.no_grad():
        a = row_scale.to(pair.this.weight.dtype)
        shape = (-1,) + (1,) * (pair.this.weight.dim() - 1)
        pair.this.weight.copy_(pair.this.weight[perm] * a.reshape(shape))
        if pair.this.bias is not None:
            pair.this.bias.copy_(pair.this.bias[perm] * a)
        # next layer: input index j*spread + s belongs to unit j (channel-major Flatten)
        W = pair.nxt.weight
        idx = (perm.reshape(-1, 1) * pair.spread + torch.arange(pair.spread)).reshape(-1)
        inv = (1.0 / a).repeat_interleave(pair.spread)
        shape_next = (1, -1) + (1,) * (W.dim() - 2)
        W.copy_(W[:, idx] * inv.reshape(shape_next))
    return new


def layer_rescale(model: nn.Module, layer: int, c: float) -> nn.Module:
    """T2: ``W_l -> cW_l, b_l -> cb_l, W_{l+1} -> W_{l+1}/c`` (degree-1 activations), as a new model.

    ``layer`` counts weight layers (Linear/Conv) from 0. The function is unchanged for
    every input; raw curvature of the affected blocks scales by ``c^{∓2}`` (T3).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> X = torch.randn(5, 2)
    >>> function_gap(net, layer_rescale(net, 0, 8.0), X) < 1e-5
    True
    """
    c = float(c)
    if not (c > 0.0) or c == float("inf"):
        raise InvalidInputError(f"c must be a finite positive number, got {c!r}")
    units = _pair(model, layer).this.weight.shape[0]
    return _transform(model, layer, torch.full((units,), c, dtype=torch.float64), torch.arange(units))


def neuron_rescale(model: nn.Module, layer: int, scales: Sequence[float] | Tensor) -> nn.Module:
    """T2 neuron-wise: rows of ``W_l``, ``b_l`` times ``a``; columns of ``W_{l+1}`` times ``1/a``.

    ``scales`` is a positive vector ``a`` with one entry per unit (channel) of ``layer``.
    Non-uniform ``a`` is not conformal on the tensor blocks (T5), so ``D`` moves.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> function_gap(net, neuron_rescale(net, 0, [1.0, 2.0, 0.5]), torch.randn(4, 2)) < 1e-5
    True
    """
    units = _pair(model, layer).this.weight.shape[0]
    a = torch.as_tensor(scales, dtype=torch.float64).reshape(-1)
    if a.numel() != units:
        raise InvalidInputError(f"scales has {a.numel()} entries; layer {layer} has {units} units")
    if not bool(torch.isfinite(a).all()) or not bool((a > 0).all()):
        raise InvalidInputError("scales must be finite and positive")
    return _transform(model, layer, a, torch.arange(units))


def permute_neurons(model: nn.Module, layer: int, perm: Sequence[int] | Tensor) -> nn.Module:
    """T2: relabel the hidden units of ``layer`` by ``perm`` (rows of ``W_l``, ``b_l``; columns of ``W_{l+1}``).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> function_gap(net, permute_neurons(net, 0, [2, 0, 1]), torch.randn(4, 2)) < 1e-6
    True
    """
    units = _pair(model, layer).this.weight.shape[0]
    p = torch.as_tensor(perm, dtype=torch.long).reshape(-1)
    if p.numel() != units or not torch.equal(torch.sort(p).values, torch.arange(units)):
        raise InvalidInputError(f"perm must be a permutation of 0..{units - 1}")
    return _transform(model, layer, torch.ones(units, dtype=torch.float64), p)


def function_gap(a: nn.Module, b: nn.Module, X: Tensor) -> float:
    """``max |a(X) − b(X)|`` over all inputs and outputs, evaluated in float64 on copies.

    >>> net = nn.Sequential(nn.Linear(2, 1))
    >>> function_gap(net, net, torch.randn(3, 2))
    0.0
    """
    X = torch.as_tensor(X)
    Xd = X.to(torch.float64) if X.is_floating_point() else X
    with torch.no_grad():
        ya = copy.deepcopy(a).to(torch.float64)(Xd)
        yb = copy.deepcopy(b).to(torch.float64)(Xd)
    if ya.shape != yb.shape:
        raise InvalidInputError(f"the models' outputs differ in shape: {tuple(ya.shape)} vs {tuple(yb.shape)}")
    return float((ya - yb).abs().max()) if ya.numel() else 0.0


from coupled_curvature.numeric.reparam import (  # noqa: E402,F401  (the symmetries of reparam.py, re-exported)
    ScaledLoss, SymmetryResult, bn_rescale, linear_mix, orthogonal_mix, random_invertible,
    random_orthogonal, reparametrize, scale_loss,
)
