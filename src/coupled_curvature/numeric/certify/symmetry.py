"""The T2 symmetries applied exactly, in ball arithmetic, to a model's float64 parameters.

``("layer_rescale", layer, c)``, ``("neuron_rescale", layer, scales)`` and
``("permute_neurons", layer, perm)``, with ``layer`` as in
:func:`~coupled_curvature.numeric.symmetries.homogeneous.layer_rescale` (the same checks locate the
pair and refuse a path that does not commute with the map). Factors are exact rationals
(``Fraction``, int, or a float taken as the dyadic it stores): ``W_src`` rows times ``a_i`` and the
matching inputs of ``W_dst`` divided by ``a_i`` are computed in arb, so a non-dyadic ``c = 37/10``
gives balls of radius ``~2^-prec`` around the exact transformed weights, never float64-rounded ones.
A permutation is exact in float64 and is applied by ``permute_neurons`` itself.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from flint import arb, arb_mat
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.certify.exact import exact_params
from coupled_curvature.numeric.symmetries.graph import ChannelPath
from coupled_curvature.numeric.symmetries.homogeneous import layer_pair, symmetry_target, permute_neurons

if TYPE_CHECKING:
    from coupled_curvature.numeric.symmetries.passthrough import Kind

__all__ = ["ExactSymmetry", "apply_exact", "parse_symmetry"]

_KINDS: dict[str, Kind] = {"layer_rescale": "layer", "neuron_rescale": "neuron", "permute_neurons": "permute"}


@dataclass(frozen=True)
class ExactSymmetry:
    """A parsed symmetry: ``name``, the ``layer`` argument and exact ``scales`` (rescalings) or ``perm``."""

    name: str
    layer: object
    scales: tuple[Fraction, ...] | None
    perm: tuple[int, ...] | None


def _fraction(v: object, what: str) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (numbers.Rational, float)):
        raise InvalidInputError(f"{what} must be a Fraction, int or float, got {v!r}; pass e.g. Fraction(37, 10)")
    if isinstance(v, float) and not math.isfinite(v):
        raise InvalidInputError(f"{what} must be finite, got {v!r}")
    f = Fraction(v)
    if f <= 0:
        raise InvalidInputError(f"{what} must be positive, got {v!r}: a T2 rescaling uses factors > 0")
    return f


def parse_symmetry(model64: nn.Module, symmetry: object) -> ExactSymmetry:
    """``(name, layer, argument)`` checked against the model (the pair located and its path checked as
    the float symmetries do).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> parse_symmetry(net, ("layer_rescale", 0, Fraction(37, 10))).scales
    (Fraction(37, 10), Fraction(37, 10), Fraction(37, 10))
    """
    if not isinstance(symmetry, tuple) or len(symmetry) != 3 or symmetry[0] not in _KINDS:
        raise InvalidInputError(f"symmetry must be (name, layer, argument) with name one of {', '.join(_KINDS)}, got "
                                f"{symmetry!r}; e.g. ('layer_rescale', ('conv2', 'conv3'), Fraction(37, 10))")
    name, layer, arg = symmetry
    where, units = symmetry_target(model64, layer, _KINDS[name])
    if name == "layer_rescale":
        return ExactSymmetry(name, where, (_fraction(arg, "c"),) * units, None)
    if name == "neuron_rescale":
        scales = tuple(_fraction(v, "each scale") for v in arg)
        if len(scales) != units:
            raise InvalidInputError(f"scales has {len(scales)} entries; layer {layer!r} has {units} units: pass one per unit")
        return ExactSymmetry(name, where, scales, None)
    permute_neurons(model64, layer, arg)  # validates the permutation (and the path) as the float map does
    return ExactSymmetry(name, layer, None, tuple(int(v) for v in arg))


def _module_name(model: nn.Module, module: nn.Module) -> str:
    return next(n for n, m in model.named_modules() if m is module)


def apply_exact(model64: nn.Module, params: dict[str, arb_mat], sym: ExactSymmetry
                ) -> tuple[nn.Module, dict[str, arb_mat]]:
    """The transformed model (only a permutation changes it) and its parameters as arb matrices."""
    if sym.perm is not None:
        assert isinstance(sym.layer, (int, tuple)), "a permutation keeps the layer it was given (checked)"
        moved = permute_neurons(model64, sym.layer, list(sym.perm))
        return moved, exact_params(moved)
    assert isinstance(sym.layer, (int, ChannelPath)) and sym.scales is not None, "a rescaling holds where and scales"
    pair = layer_pair(model64, sym.layer)
    a = [arb(s.numerator) / s.denominator for s in sym.scales]
    src, dst = _module_name(model64, pair.this), _module_name(model64, pair.nxt)
    out = dict(params)
    for kind in ("weight", "bias"):
        key = f"{src}.{kind}"
        if key not in out:
            continue
        p = out[key]
        if getattr(pair.this, kind).dim() == 1:  # a vector: one entry per unit
            out[key] = arb_mat(1, p.ncols(), [v * a[i] for i, v in enumerate(p.entries())])
        else:  # rows are units
            k = p.ncols()
            out[key] = arb_mat(p.nrows(), k, [v * a[i // k] for i, v in enumerate(p.entries())])
    W = out[f"{dst}.weight"]
    rows, cols = W.nrows(), W.ncols()
    weight = pair.nxt.weight
    assert isinstance(weight, Tensor), "the next layer of a pair has a weight"
    inputs = weight.shape[1]
    inner = cols // inputs  # kernel positions per input channel
    if pair.spread is None:
        inv = [1 / a[0]] * inputs
    else:
        inv = [1 / a[j // pair.spread] for j in range(inputs)]
    e = W.entries()
    out[f"{dst}.weight"] = arb_mat(rows, cols, [v * inv[(i % cols) // inner] for i, v in enumerate(e)])
    return model64, out
