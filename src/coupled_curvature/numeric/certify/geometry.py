"""Index maps of convolutions and poolings on per-sample flattened (channel-major) tensors.

A per-sample tensor of shape ``(C, *S)`` is held flat in torch's order: entry ``(c, s)`` at
``c·|S| + flat(s)``. Convolutions become gathers (im2col) and matrix products; poolings become
lists of input indices per output entry.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from torch import nn

from coupled_curvature.base.errors import UnsupportedModelError
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["ConvMap", "PoolMap", "conv_map", "pool_map"]


def _sizes(m: nn.Module, attr: str, d: int, default: object = None) -> tuple[int, ...]:
    """The size option ``m.attr`` (an int, or one int per spatial axis) as ``d`` ints; anything else (a
    padding given as ``"same"``, an adaptive size ``None``) is refused naming it."""
    v = getattr(m, attr, default)
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * d
    raise UnsupportedModelError(f"{type(m).__name__} has {attr}={v!r}; the exact index maps take sizes given as ints "
                                f"(one, or one per spatial axis): give {attr} as numbers")


@dataclass(frozen=True)
class ConvMap:
    """``cols[g][p]``: the input flat indices (−1 for zero padding) multiplying the kernel columns of
    group ``g`` at output position ``p``; output shape ``(out_channels, *out_spatial)``."""

    cols: tuple[tuple[tuple[int, ...], ...], ...]
    out_shape: tuple[int, ...]
    groups: int
    out_per_group: int


def conv_map(m: nn.Conv1d | nn.Conv2d, in_shape: tuple[int, ...]) -> ConvMap:
    """im2col indices of ``m`` on per-sample inputs of ``in_shape`` ``(C, *S)``.

    >>> cm = conv_map(nn.Conv1d(1, 1, 2), (1, 3))
    >>> cm.cols, cm.out_shape
    ((((0, 1), (1, 2)),), (1, 2))
    """
    d = len(in_shape) - 1
    cin, spatial = in_shape[0], in_shape[1:]
    k, st, pad, dil = (_sizes(m, a, d) for a in ("kernel_size", "stride", "padding", "dilation"))
    out_sp = tuple((spatial[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(d))
    size = math.prod(spatial)
    strides = [math.prod(spatial[i + 1:]) for i in range(d)]
    cin_g = cin // m.groups
    offsets = list(itertools.product(*(range(ki) for ki in k)))
    groups = []
    for g in range(m.groups):
        rows = []
        for o in itertools.product(*(range(s) for s in out_sp)):
            row = []
            for ci in range(g * cin_g, (g + 1) * cin_g):
                for off in offsets:
                    pos = [o[i] * st[i] - pad[i] + off[i] * dil[i] for i in range(d)]
                    inside = all(0 <= pos[i] < spatial[i] for i in range(d))
                    row.append(ci * size + sum(p * s for p, s in zip(pos, strides)) if inside else -1)
            rows.append(tuple(row))
        groups.append(tuple(rows))
    return ConvMap(tuple(groups), (m.out_channels, *out_sp), m.groups, m.out_channels // m.groups)


@dataclass(frozen=True)
class PoolMap:
    """``windows[o]``: the input flat indices pooled into output entry ``o``; ``divisors[o]`` the
    average's divisor (``None`` for max pooling)."""

    windows: tuple[tuple[int, ...], ...]
    divisors: tuple[int, ...] | None
    out_shape: tuple[int, ...]


def pool_map(m: nn.Module, in_shape: tuple[int, ...]) -> PoolMap:
    """Windows of a MaxPool/AvgPool/AdaptiveAvgPool module on per-sample inputs of ``in_shape``.

    >>> pool_map(nn.MaxPool1d(2), (1, 4)).windows
    ((0, 1), (2, 3))
    """
    d = len(in_shape) - 1
    c, spatial = in_shape[0], in_shape[1:]
    size = math.prod(spatial)
    strides = [math.prod(spatial[i + 1:]) for i in range(d)]
    pool = layer_capabilities(m).pool
    if pool == "adaptive_avg":
        osz = _sizes(m, "output_size", d)
        ranges = [[(j * spatial[i] // osz[i], -(-(j + 1) * spatial[i] // osz[i])) for j in range(osz[i])] for i in range(d)]
        per_axis = [[tuple(range(a, b)) for a, b in r] for r in ranges]
        include_pad = True
    else:
        k, pad = _sizes(m, "kernel_size", d), _sizes(m, "padding", d)
        st = _sizes(m, "kernel_size" if m.stride is None else "stride", d)
        dil = _sizes(m, "dilation", d, default=1)
        osz = tuple((spatial[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(d))
        per_axis = [[tuple(j * st[i] - pad[i] + t * dil[i] for t in range(k[i])) for j in range(osz[i])] for i in range(d)]
        include_pad = bool(getattr(m, "count_include_pad", True))
    is_max = pool == "max"
    windows, divisors = [], []
    for ch in range(c):
        for o in itertools.product(*(range(s) for s in osz)):
            axes = [per_axis[i][o[i]] for i in range(d)]
            full = list(itertools.product(*axes))
            inside = [p for p in full if all(0 <= p[i] < spatial[i] for i in range(d))]
            windows.append(tuple(ch * size + sum(p[i] * strides[i] for i in range(d)) for p in inside))
            if not is_max:
                if include_pad and pool != "adaptive_avg":
                    # torch counts padded positions but not positions beyond the padded input
                    lim = [(-pad[i], spatial[i] + pad[i]) for i in range(d)]
                    divisors.append(sum(all(lim[i][0] <= p[i] < lim[i][1] for i in range(d)) for p in full))
                else:
                    divisors.append(len(inside))
    return PoolMap(tuple(windows), None if is_max else tuple(divisors), (c, *osz))
