"""More symmetries: BatchNorm scale, mixing in deep linear nets, nonlinear reparameterizations, loss scaling.

Each map returns a :class:`SymmetryResult` with the new model (or loss) and the measured
``function_gap = max |f(X) − f'(X)|`` on the inputs given, so function preservation is checked
every time it is used.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.symmetries.homogeneous import (function_gap, layer_bias, layer_weight, leaf_modules,
                                                                weight_layers)


@dataclass
class SymmetryResult:
    """A transformed model and loss, the function gap measured on ``X`` and what was done."""

    model: nn.Module
    loss_fn: Callable | None
    function_gap: float
    description: str


def _module_after(model: nn.Module, layer: int) -> tuple[nn.Module, nn.Module | None, list[nn.Module]]:
    layers = weight_layers(model)
    if not isinstance(layer, int) or not 0 <= layer < len(layers):
        raise InvalidInputError(f"layer={layer!r}: the model has weight layers 0..{len(layers) - 1}")
    leaves = [m for _, m in leaf_modules(model)]
    start = next(i for i, m in enumerate(leaves) if m is layers[layer])
    following = leaves[start + 1:]
    return layers[layer], (following[0] if following else None), following


def bn_rescale(model: nn.Module, layer: int, c: float, X: Tensor) -> SymmetryResult:
    """``W_l -> cW_l``, ``b_l -> cb_l`` for a weight layer followed by BatchNorm in batch-statistics mode.

    ``BN(cz) = (cz − cμ)/√(c²σ² + eps)``: the output (and the loss) is unchanged exactly only as
    ``eps -> 0``; with ``eps > 0`` the gap is ``O(eps/σ²)``. The BatchNorm's ``eps`` is read from the
    model and reported; torch requires ``eps > 0`` in train mode, so build it with a small one
    (e.g. ``nn.BatchNorm1d(n, eps=1e-12)``) to approach the exact symmetry.

    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, eps=1e-12), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> X = torch.randn(16, 3, dtype=torch.float64)
    >>> bn_rescale(net, 0, 8.0, X).function_gap < 1e-10
    True
    >>> net[1].eps = 1e-2
    >>> bn_rescale(net, 0, 8.0, X).function_gap > 1e-4
    True
    """
    c = float(c)
    if not (c > 0.0) or not math.isfinite(c):
        raise InvalidInputError(f"c must be a finite positive number, got {c!r}")
    this, nxt, _ = _module_after(model, layer)
    if nxt is None or not layer_capabilities(nxt).batch_statistics:
        raise UnsupportedModelError(
            f"weight layer {layer} is followed by {type(nxt).__name__ if nxt is not None else 'nothing'}, "
            "not BatchNorm; bn_rescale needs Linear/Conv -> BatchNorm"
        )
    if not (nxt.training or not nxt.track_running_stats):
        raise UnsupportedModelError(
            "the BatchNorm after this layer uses running statistics (eval mode), which do not cancel "
            "the scale; put the model in train mode (batch statistics) to use bn_rescale"
        )
    new = copy.deepcopy(model)
    this_new = _module_after(new, layer)[0]
    with torch.no_grad():
        for t in (layer_weight(this_new), layer_bias(this_new)):
            if t is not None:
                t.mul_(c)
    gap = function_gap(model, new, X)
    return SymmetryResult(new, None, gap, f"bn_rescale(layer={layer}, c={c:.6g}; BatchNorm eps={nxt.eps:g})")


def random_orthogonal(n: int, t: float = 1.0, seed: int = 0) -> Tensor:
    """``Q = exp(tS)``, ``S`` a seeded random skew-symmetric matrix (``t = 0`` gives ``I``)."""
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(n, n, generator=g, dtype=torch.float64)
    return torch.linalg.matrix_exp(t * (G - G.T) / math.sqrt(2 * n))


def random_invertible(n: int, t: float = 1.0, seed: int = 0) -> Tensor:
    """``M = exp(tG/√n)``, ``G`` a seeded Gaussian matrix: invertible, far from conformal as ``t`` grows."""
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.matrix_exp(t * torch.randn(n, n, generator=g, dtype=torch.float64) / math.sqrt(n))


def linear_mix(model: nn.Module, layer: int, M: Tensor, X: Tensor) -> SymmetryResult:
    """``W_l -> MW_l``, ``b_l -> Mb_l``, ``W_{l+1} -> W_{l+1}M⁻¹`` for two Linear layers joined by Identity.

    Preserves the function of a deep linear net for any invertible ``M`` (``GL(n)``); on the tensor
    blocks it acts as ``I⊗M``, ``M`` and ``M⁻ᵀ⊗I``: conformal iff ``M ∈ CO(n)`` (T4).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.Identity(), nn.Linear(3, 1))
    >>> linear_mix(net, 0, random_invertible(3), torch.randn(4, 2)).function_gap < 1e-5
    True
    """
    layers = weight_layers(model)
    if not isinstance(layer, int) or not 0 <= layer < len(layers) - 1:
        raise InvalidInputError(f"layer={layer!r}: mixing needs weight layers l and l+1, l in 0..{len(layers) - 2}")
    this, _, following = _module_after(model, layer)
    nxt = layers[layer + 1]
    between = following[: next(i for i, m in enumerate(following) if m is nxt)]
    if type(this) is not nn.Linear or type(nxt) is not nn.Linear or any(
        not layer_capabilities(m).identity for m in between
    ):
        raise UnsupportedModelError(
            "mixing needs Linear -> Identity -> Linear (a deep linear net); a nonlinearity between "
            "the layers does not commute with a general matrix"
        )
    M = torch.as_tensor(M, dtype=torch.float64)
    n = this.weight.shape[0]
    if M.shape != (n, n):
        raise InvalidInputError(f"M must be {n}×{n} for layer {layer}, got {tuple(M.shape)}")
    if not bool(torch.isfinite(M).all()) or abs(float(torch.linalg.det(M))) == 0.0:
        raise InvalidInputError("M must be finite and invertible")
    new = copy.deepcopy(model)
    a, b = weight_layers(new)[layer:layer + 2]
    Wa, ba, Wb = layer_weight(a), layer_bias(a), layer_weight(b)
    with torch.no_grad():
        Mt = M.to(Wa.dtype)
        Wa.copy_(Mt @ Wa)
        if ba is not None:
            ba.copy_(Mt @ ba)
        Wb.copy_(torch.linalg.solve(Mt.T, Wb.T).T)
    gap = function_gap(model, new, X)
    return SymmetryResult(new, None, gap, f"linear_mix(layer={layer}, cond(M)={float(torch.linalg.cond(M)):.3g})")


def orthogonal_mix(model: nn.Module, layer: int, Q: Tensor, X: Tensor) -> SymmetryResult:
    """:func:`linear_mix` with ``Q`` orthogonal (checked to 1e-10): block-conformal, so ``D``, ``D⁺``, ρ stay.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.Identity(), nn.Linear(3, 1))
    >>> orthogonal_mix(net, 0, random_orthogonal(3), torch.randn(4, 2)).function_gap < 1e-5
    True
    """
    Q = torch.as_tensor(Q, dtype=torch.float64)
    if Q.dim() != 2 or Q.shape[0] != Q.shape[1] or float((Q.T @ Q - torch.eye(Q.shape[0], dtype=torch.float64)).abs().max()) > 1e-10:
        raise InvalidInputError("Q must be a square orthogonal matrix (QᵀQ = I to 1e-10)")
    r = linear_mix(model, layer, Q, X)
    r.description = r.description.replace("linear_mix", "orthogonal_mix")
    return r


class _Scaled(nn.Module):
    """A parametrization ``θ = scale·h(φ)`` with a fixed positive ``scale``."""

    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = float(scale)


class Sinh(_Scaled):
    """``θ = scale·sinh(φ)``, ``φ = asinh(θ/scale)``."""

    def forward(self, phi: Tensor) -> Tensor:
        return self.scale * torch.sinh(phi)

    def right_inverse(self, theta: Tensor) -> Tensor:
        return torch.asinh(theta / self.scale)


class Cube(_Scaled):
    """``θ = scale·φ³``, ``φ = sign(θ)|θ/scale|^{1/3}``."""

    def forward(self, phi: Tensor) -> Tensor:
        return self.scale * phi * phi * phi

    def right_inverse(self, theta: Tensor) -> Tensor:
        t = theta / self.scale
        return torch.sign(t) * t.abs().pow(1.0 / 3.0)


NONLINEAR = {"sinh": Sinh, "cube": Cube}


def reparametrize(model: nn.Module, kind: str, X: Tensor, *, scale: float = 1.0) -> SymmetryResult:
    """Every weight and bias ``θ`` becomes ``θ = h(φ)`` (``torch.nn.utils.parametrize``), ``h`` = ``sinh`` or ``cube``.

    The new model's parameters are the ``φ`` (``…parametrizations.<name>.original``), so every
    measure is then taken with respect to ``φ``: ``g' = h'(φ)⊙g``,
    ``H' = diag(h')H diag(h') + diag(g⊙h'')``. By T6 no such nonlinear map keeps ``D``.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)).double()
    >>> r = reparametrize(net, "sinh", torch.randn(4, 2, dtype=torch.float64))
    >>> r.function_gap < 1e-12, sorted(n for n, _ in r.model.named_parameters())[0]
    (True, '0.parametrizations.bias.original')
    """
    if kind not in NONLINEAR:
        raise InvalidInputError(f"unknown reparameterization {kind!r}; available: {', '.join(NONLINEAR)}")
    if not (float(scale) > 0 and math.isfinite(float(scale))):
        raise InvalidInputError(f"scale must be finite and positive, got {scale!r}")
    new = copy.deepcopy(model)
    for _, module in leaf_modules(new):
        for pname in [n for n, _ in module.named_parameters(recurse=False)]:
            parametrize.register_parametrization(module, pname, NONLINEAR[kind](scale))
    gap = function_gap(model, new, X)
    return SymmetryResult(new, None, gap, f"reparametrize(θ = {scale:g}·{kind}(φ) on every tensor)")


class ScaledLoss(nn.Module):
    """``s·loss_fn``; ``reduction`` reads and writes through to the wrapped loss."""

    def __init__(self, loss_fn: Callable, s: float):
        super().__init__()
        self.base = copy.deepcopy(loss_fn)
        self.s = float(s)

    @property
    def reduction(self) -> str:
        return getattr(self.base, "reduction", "mean")

    @reduction.setter
    def reduction(self, value: str) -> None:
        setattr(self.base, "reduction", value)  # any callable: a torch loss, or a function that takes the attribute

    def forward(self, out: Tensor, y: Tensor) -> Tensor:
        return self.s * self.base(out, y)


def scale_loss(model: nn.Module, loss_fn: Callable, s: float, X: Tensor) -> SymmetryResult:
    """``L -> sL`` (T12): the model is unchanged (gap 0); ``D -> D/s``, ``D⁺ -> sD⁺``, ``D·D⁺`` stays.

    >>> r = scale_loss(nn.Linear(2, 1), nn.MSELoss(), 4.0, torch.randn(3, 2))
    >>> float(r.loss_fn(torch.ones(2, 1), torch.zeros(2, 1))), r.function_gap
    (4.0, 0.0)
    """
    s = float(s)
    if not (s > 0 and math.isfinite(s)):
        raise InvalidInputError(f"s must be finite and positive, got {s!r}")
    new = copy.deepcopy(model)
    return SymmetryResult(new, ScaledLoss(loss_fn, s), function_gap(model, new, X), f"scale_loss(s={s:g})")
