"""Each supported operation in arb ball arithmetic: its value, its tangent along parameter and input
directions, and its backward (vector-Jacobian) map.

An activation is an ``arb_mat`` with one row per sample (``K·N`` rows for ``K`` stacked tangent
directions, direction-major) and the per-sample tensor flattened channel-major in the columns.
Products are ``arb_mat`` products; element-wise steps walk the entries. A ReLU/LeakyReLU or
max-pool whose decision is not certified by the balls records a :class:`Kink` and marks it
undecided; the caller refuses every block upstream of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, cycle

import numpy as np
from flint import arb, arb_mat
from torch import nn

from coupled_curvature.numeric.certify.arrays import Rows, arr, as_array, as_mat, mat
from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.geometry import ConvMap, PoolMap, conv_map, pool_map
from coupled_curvature.numeric.certify.trace import running_stats, traced_module
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

__all__ = ["Kink", "Layer", "make_layer"]

ZERO = arb(0)


def ones(n: int) -> arb_mat:
    return arb_mat(n, 1, [1] * n)


def vstack(mats: list[Rows]) -> Rows:
    """Rows of ``mats`` one under the other (an arb_mat when all are, else an object array)."""
    arbs = [m for m in mats if isinstance(m, arb_mat)]
    if len(arbs) == len(mats):
        return arb_mat(sum(m.nrows() for m in arbs), arbs[0].ncols(), list(chain.from_iterable(m.entries() for m in arbs)))
    return np.concatenate([arr(m) for m in mats])


@dataclass(frozen=True)
class Kink:
    """An undecided ReLU/max-pool on sample ``sample`` at module ``layer``, flat unit ``unit``: the
    pre-activation ball (or the tied maxima) contains the kink, so the derivative is not determined."""

    sample: int
    layer: str
    unit: int
    value: Ball  # the pre-activation (ReLU) or the pooled maximum (max-pool)


class Layer:
    """Base: an op with per-sample ``in_shape`` and ``out_shape``; ``value`` fills the caches that
    ``tangent`` and ``backward`` use."""

    params: tuple[str, ...] = ()
    #: whether ``backward`` must return the input's cotangent (not when the input is the model's input)
    needs_dx: bool = True
    #: per output entry (``N·F``): locally the constant 0 (a ReLU on a certified negative input)
    locally_zero: list[bool] | None = None
    #: ``locally_zero`` of the op that feeds this one (set by the network before ``value``; a pool reads it)
    feed_zero: list[bool] | None = None

    def __init__(self, name: str, in_shape: tuple[int, ...]):
        self.name, self.in_shape, self.out_shape = name, in_shape, in_shape
        self.kinks: list[Kink] = []

    def value(self, x: arb_mat, p: dict[str, arb_mat]) -> arb_mat:
        return x

    def tangent(self, dx: Rows | None, dirs: list[dict[str, arb_mat]] | None, p: dict[str, arb_mat]) -> Rows | None:
        return dx

    def vjp(self, dy: Rows, p: dict[str, arb_mat]) -> Rows:
        """The cotangent of the input from that of the output, for any number of stacked directions
        (``K·N`` rows); no parameter gradients."""
        return dy

    def backward(self, dy: arb_mat, p: dict[str, arb_mat]) -> tuple[arb_mat | None, dict[str, arb_mat]]:
        """The input's cotangent and the parameters' gradients from the output's cotangent (``N`` rows)."""
        return mat(self.vjp(dy, p)), {}


def add(a: Rows | None, b: Rows) -> Rows:
    """``a + b`` (``a = None`` is 0; an arb_mat plus an array is an array)."""
    if a is None:
        return b
    return a + b if isinstance(a, arb_mat) and isinstance(b, arb_mat) else arr(a) + arr(b)


class Linear(Layer):
    def __init__(self, name: str, m: nn.Linear, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.out_shape = (m.out_features,)
        self.w, self.b = f"{name}.weight", (f"{name}.bias" if m.bias is not None else None)
        self.params = (self.w,) + ((self.b,) if self.b else ())

    def _apply(self, x: arb_mat, w: arb_mat, b: arb_mat | None) -> arb_mat:
        y = x * w.transpose()
        return y if b is None else y + ones(x.nrows()) * b

    def value(self, x, p):
        self.x = x
        return self._apply(x, p[self.w], p[self.b] if self.b else None)

    def tangent(self, dx, dirs, p):
        out = None if dx is None else mat(dx) * p[self.w].transpose()
        if dirs:
            n = self.x.ncols()
            zero_w = arb_mat(p[self.w].nrows(), n)
            out = add(out, vstack([self._apply(self.x, d.get(self.w, zero_w), d.get(self.b) if self.b else None)
                                    for d in dirs]))
        return out

    def vjp(self, dy, p):
        return mat(dy) * p[self.w]

    def backward(self, dy, p):
        grads = {self.w: dy.transpose() * self.x}
        if self.b:
            grads[self.b] = ones(dy.nrows()).transpose() * dy
        return (self.vjp(dy, p) if self.needs_dx else None), grads


class Conv(Layer):
    def __init__(self, name: str, m: nn.Conv1d | nn.Conv2d, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.map: ConvMap = conv_map(m, in_shape)
        self.out_shape = self.map.out_shape
        self.w, self.b = f"{name}.weight", (f"{name}.bias" if m.bias is not None else None)
        self.params = (self.w,) + ((self.b,) if self.b else ())
        self.P = math.prod(self.out_shape[1:])
        fin = math.prod(in_shape)
        #: per group, ``P × k`` input indices of the im2col rows (``fin`` for the zero padding)
        self.gather = [np.where(np.array(c) >= 0, np.array(c), fin) for c in self.map.cols]

    def _cols(self, x: Rows) -> list[arb_mat]:
        """im2col of every group: ``(rows·P) × (C_in/groups·|kernel|)`` (one gather per group; index
        ``F`` is an appended exact zero column: the zero padding)."""
        E = arr(x)
        E = np.concatenate([E, np.full((E.shape[0], 1), ZERO, dtype=object)], axis=1)
        return [as_mat(E[:, idx].reshape(-1, idx.shape[1])) for idx in self.gather]

    def _assemble(self, ys: list[arb_mat], rows: int) -> np.ndarray:
        """Per-group ``(rows·P) × cg`` outputs into ``rows × (C_out·P)`` (channel-major)."""
        parts = [as_array(y).reshape(rows, self.P, -1).transpose(0, 2, 1) for y in ys]
        return np.concatenate(parts, axis=1).reshape(rows, -1)

    def _split(self, w: arb_mat) -> list[arb_mat]:
        cg, k = self.map.out_per_group, w.ncols()
        e = w.entries()
        return [arb_mat(cg, k, e[g * cg * k:(g + 1) * cg * k]) for g in range(self.map.groups)]

    def _apply(self, cols: list[arb_mat], w: arb_mat, b: arb_mat | None, rows: int) -> np.ndarray:
        ws = self._split(w)
        ys = [c * wg.transpose() for c, wg in zip(cols, ws)]
        if b is not None:
            cg, be = self.map.out_per_group, b.entries()
            ys = [y + ones(y.nrows()) * arb_mat(1, cg, be[g * cg:(g + 1) * cg]) for g, y in enumerate(ys)]
        return self._assemble(ys, rows)

    def value(self, x, p):
        self.rows = x.nrows()
        self.cols = self._cols(x)
        return as_mat(self._apply(self.cols, p[self.w], p[self.b] if self.b else None, self.rows))

    def tangent(self, dx, dirs, p):
        if dx is not None:
            dx = arr(dx)
        out = None if dx is None else self._apply(self._cols(dx), p[self.w], None, dx.shape[0])
        if dirs:
            zero_w = arb_mat(p[self.w].nrows(), p[self.w].ncols())
            out = add(out, vstack([self._apply(self.cols, d.get(self.w, zero_w), d.get(self.b) if self.b else None,
                                                self.rows) for d in dirs]))
        return out

    def _per_group(self, dy: Rows) -> list[arb_mat]:
        """The output cotangent of every group as ``(rows·P) × cg``, the layout of :meth:`_cols`'s rows."""
        D = arr(dy)
        rows = D.shape[0]
        D = D.reshape(rows, self.map.groups, self.map.out_per_group, self.P)
        return [as_mat(D[:, g].transpose(0, 2, 1).reshape(rows * self.P, -1)) for g in range(self.map.groups)]

    def vjp(self, dy, p, dgs: list[arb_mat] | None = None):
        dgs = self._per_group(dy) if dgs is None else dgs
        rows, Fin = dgs[0].nrows() // self.P, math.prod(self.in_shape)
        dx = np.full(rows * (Fin + 1), ZERO, dtype=object)  # column Fin of each row collects the padding
        for g, (dg, wg) in enumerate(zip(dgs, self._split(p[self.w]))):
            target = (np.arange(rows)[:, None, None] * (Fin + 1) + self.gather[g][None]).ravel()
            np.add.at(dx, target, as_array(dg * wg).ravel())
        return dx.reshape(rows, Fin + 1)[:, :Fin]

    def backward(self, dy, p):
        dgs = self._per_group(dy)
        grads = {self.w: vstack([dg.transpose() * cols for dg, cols in zip(dgs, self.cols)])}
        if self.b:
            grads[self.b] = as_mat(np.concatenate([as_array(ones(dg.nrows()).transpose() * dg)[0] for dg in dgs]), 1)
        return as_mat(self.vjp(dy, p, dgs)), grads


class Relu(Layer):
    """ReLU (``slope = 0``) or LeakyReLU: ``y = x`` where ``x > 0``, ``slope·x`` where ``x < 0``."""

    def __init__(self, name: str, in_shape: tuple[int, ...], slope: float = 0.0):
        super().__init__(name, in_shape)
        self.slope = arb(slope)
        self.hull = arb(min(1.0, slope)).union(arb(max(1.0, slope)))

    def value(self, x, p):
        X = as_array(x)
        pos, neg = (X > 0).astype(bool), (X < 0).astype(bool)
        self.passes = pos  # the entries that pass unchanged (factor 1)
        factors = np.full(X.shape, 1, dtype=object)
        factors[neg] = self.slope
        out = X.copy()
        out[neg] = X[neg] * self.slope
        for r, c in zip(*np.nonzero(~(pos | neg))):  # undecided: the ball contains the kink
            v = X[r, c]
            self.kinks.append(Kink(int(r), self.name, int(c), from_arb(v)))
            factors[r, c] = self.hull
            out[r, c] = v.max(v * self.slope) if self.slope <= 1 else v.min(v * self.slope)
        self.factors = factors
        self.dead_only = self.slope == 0 and not self.kinks  # every other factor is an exact 0
        self.keep = pos.ravel().tolist()
        if self.slope == 0:
            self.locally_zero = neg.ravel().tolist()
        return as_mat(out)

    def _times(self, d: Rows) -> Rows:
        if self.dead_only and isinstance(d, arb_mat):  # a selection: cheaper on the entry list than via arrays
            return arb_mat(d.nrows(), d.ncols(), [v if k else ZERO for v, k in zip(d.entries(), cycle(self.keep))])
        D = arr(d)
        rows = D.shape[0]
        D = D.reshape(-1, *self.passes.shape)
        out = D.copy()
        other = ~self.passes
        out[:, other] = ZERO if self.dead_only else D[:, other] * self.factors[other]
        return out.reshape(rows, -1)

    def tangent(self, dx, dirs, p):
        return None if dx is None else self._times(dx)

    def vjp(self, dy, p):
        return self._times(dy)


class Pool(Layer):
    """Max or average pooling (fixed or adaptive windows)."""

    def __init__(self, name: str, m: nn.Module, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.map: PoolMap = pool_map(m, in_shape)
        self.out_shape = self.map.out_shape
        fin, wmax = math.prod(in_shape), max(len(w) for w in self.map.windows)
        #: ``n_out × wmax`` input indices of the windows, ``fin`` (an appended zero column) as padding
        self.windows = np.array([list(w) + [fin] * (wmax - len(w)) for w in self.map.windows])
        self.inv = None if self.map.divisors is None else np.array([arb(1) / d for d in self.map.divisors])

    def value(self, x, p):
        if self.inv is not None:
            return as_mat(self._linear(x))
        e, F, rows = x.entries(), x.ncols(), x.nrows()
        out, self.sel = [], []
        for r in range(rows):
            b = r * F
            for o, win in enumerate(self.map.windows):
                vals = [e[b + i] for i in win]
                best = max(range(len(vals)), key=lambda j: vals[j].mid())
                m = vals[best]
                for v in vals:
                    m = m.max(v)
                out.append(m)
                certain = all(vals[best] > v for j, v in enumerate(vals) if j != best)
                if certain:
                    self.sel.append(win[best])
                elif self._constant(b, win, vals, best):
                    self.sel.append(-1)
                else:
                    self.kinks.append(Kink(r, self.name, o, from_arb(m)))
                    self.sel.append(None)
        fin = math.prod(self.in_shape)  # a pooled entry that is not live follows the appended zero column
        self.source = np.array([fin if s is None or s < 0 else s for s in self.sel]).reshape(rows, -1)
        return arb_mat(rows, len(self.map.windows), out)

    def _constant(self, base: int, win: tuple[int, ...], vals: list[arb], best: int) -> bool:
        """The tie is harmless: every entry that may reach the maximum is locally the constant 0 (a dead
        ReLU), the others are certainly below it, so the pooled value is locally constant."""
        z = self.feed_zero
        if z is None:
            return False
        top = [j for j, v in enumerate(vals) if not vals[best] > v]
        return all(z[base + win[j]] for j in top) and all(v < 0 for j, v in enumerate(vals) if j not in top)
    def _linear(self, d: Rows) -> np.ndarray:
        """The pooling's (local) linear map on the rows of ``d`` (``K·N`` rows for ``K`` directions)."""
        E = arr(d)
        E = np.concatenate([E, np.full((E.shape[0], 1), ZERO, dtype=object)], axis=1)
        if self.inv is not None:
            return E[:, self.windows].sum(axis=2) * self.inv
        return np.take_along_axis(E, np.tile(self.source, (E.shape[0] // self.source.shape[0], 1)), axis=1)

    def tangent(self, dx, dirs, p):
        return None if dx is None else self._linear(dx)

    def vjp(self, dy, p):
        D = arr(dy)
        rows, Fin = D.shape[0], math.prod(self.in_shape)
        base = np.arange(rows)[:, None] * (Fin + 1)
        dx = np.full(rows * (Fin + 1), ZERO, dtype=object)  # column Fin of each row: padding, dead, kinks
        if self.inv is not None:
            V = np.broadcast_to((D * self.inv)[:, :, None], (rows, *self.windows.shape))
            np.add.at(dx, (base[:, :, None] + self.windows[None]).ravel(), V.ravel())
        else:
            src = np.tile(self.source, (rows // self.source.shape[0], 1))
            np.add.at(dx, (base + src).ravel(), D.ravel())
        return dx.reshape(rows, Fin + 1)[:, :Fin]


class BatchNorm(Layer):
    """Eval-mode BatchNorm: ``y = γ·(x − μ)/√(σ² + ε) + β`` per channel (running statistics)."""

    def __init__(self, name: str, m: nn.modules.batchnorm._BatchNorm, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.P = math.prod(in_shape[1:])
        self.channel = np.repeat(np.arange(in_shape[0]), self.P)  # the channel of each flat column
        mean, var = running_stats(m)
        self.mean = [arb(float(v)) for v in mean]
        self.root = [(arb(float(v)) + arb(float(m.eps))).sqrt() for v in var]
        self.affine = m.weight is not None
        self.w, self.b = f"{name}.weight", f"{name}.bias"
        self.params = (self.w, self.b) if self.affine else ()

    def _per_column(self, v: arb_mat | list | None, default: arb) -> np.ndarray:
        """A per-channel vector (``None``: ``default`` everywhere) repeated over each channel's ``P`` columns."""
        per = [default] * self.in_shape[0] if v is None else (v if isinstance(v, list) else v.entries())
        return np.array(per, dtype=object)[self.channel]

    def value(self, x, p):
        mean, root = self._per_column(self.mean, ZERO), self._per_column(self.root, ZERO)
        self.xhat = (as_array(x) - mean) / root
        g = self._per_column(p.get(self.w) if self.affine else None, arb(1))
        self.scale = g / root
        return as_mat(self.xhat * g + self._per_column(p.get(self.b) if self.affine else None, ZERO))

    def tangent(self, dx, dirs, p):
        out = None if dx is None else arr(dx) * self.scale
        if dirs and self.affine:
            parts = [self.xhat * self._per_column(d.get(self.w), ZERO) + self._per_column(d.get(self.b), ZERO)
                     for d in dirs]
            out = add(out, vstack(parts))
        return out

    def vjp(self, dy, p):
        return arr(dy) * self.scale

    def backward(self, dy, p):
        D = as_array(dy)
        dx = as_mat(D * self.scale)
        if not self.affine:
            return dx, {}
        C = self.in_shape[0]
        gg = (D * self.xhat).reshape(-1, C, self.P).sum(axis=(0, 2))
        gb = D.reshape(-1, C, self.P).sum(axis=(0, 2))
        return dx, {self.w: as_mat(gg, 1), self.b: as_mat(gb, 1)}


class Flatten(Layer):
    def __init__(self, name: str, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.out_shape = (math.prod(in_shape),)


def make_layer(kind: str, name: str, module: nn.Module | None, in_shape: tuple[int, ...]) -> Layer:
    """The :class:`Layer` of a traced op (``add`` is handled by the caller)."""
    if kind == "linear":
        return Linear(name, traced_module(module, nn.Linear), in_shape)
    if kind == "conv":
        return Conv(name, traced_module(module, nn.Conv1d, nn.Conv2d), in_shape)
    if kind == "relu":
        return Relu(name, in_shape)
    if kind == "leaky_relu":
        return Relu(name, in_shape, float(traced_module(module, nn.LeakyReLU).negative_slope))
    if kind in ("maxpool", "avgpool", "adaptive_avgpool"):
        return Pool(name, traced_module(module, nn.Module), in_shape)
    if kind == "batchnorm":
        return BatchNorm(name, traced_module(module, nn.modules.batchnorm._BatchNorm), in_shape)
    if kind == "flatten" or (kind == "identity" and layer_capabilities(module).reshape):
        return Flatten(name, in_shape)
    return Layer(name, in_shape)
