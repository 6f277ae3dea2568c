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

from flint import arb, arb_mat
from torch import nn

from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.geometry import ConvMap, PoolMap, conv_map, pool_map

__all__ = ["Kink", "Layer", "make_layer"]

ZERO = arb(0)


def ones(n: int) -> arb_mat:
    return arb_mat(n, 1, [1] * n)


def vstack(mats: list[arb_mat]) -> arb_mat:
    """Rows of ``mats`` one under the other."""
    return arb_mat(sum(m.nrows() for m in mats), mats[0].ncols(), [e for m in mats for e in m.entries()])


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
    #: per output entry (``N·F``): locally the constant 0 (a ReLU on a certified negative input)
    locally_zero: list[bool] | None = None

    def __init__(self, name: str, in_shape: tuple[int, ...]):
        self.name, self.in_shape, self.out_shape = name, in_shape, in_shape
        self.kinks: list[Kink] = []

    def value(self, x: arb_mat, p: dict[str, arb_mat]) -> arb_mat:
        return x

    def tangent(self, dx: arb_mat | None, dirs: list[dict[str, arb_mat]] | None, p: dict[str, arb_mat]) -> arb_mat | None:
        return dx

    def backward(self, dy: arb_mat, p: dict[str, arb_mat]) -> tuple[arb_mat, dict[str, arb_mat]]:
        return dy, {}


def _add(a: arb_mat | None, b: arb_mat | None) -> arb_mat | None:
    return b if a is None else a if b is None else a + b


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
        out = None if dx is None else dx * p[self.w].transpose()
        if dirs:
            n = self.x.ncols()
            zero_w = arb_mat(p[self.w].nrows(), n)
            out = _add(out, vstack([self._apply(self.x, d.get(self.w, zero_w), d.get(self.b) if self.b else None)
                                    for d in dirs]))
        return out

    def backward(self, dy, p):
        grads = {self.w: dy.transpose() * self.x}
        if self.b:
            grads[self.b] = ones(dy.nrows()).transpose() * dy
        return dy * p[self.w], grads


class Conv(Layer):
    def __init__(self, name: str, m: nn.Conv1d | nn.Conv2d, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.map: ConvMap = conv_map(m, in_shape)
        self.out_shape = self.map.out_shape
        self.w, self.b = f"{name}.weight", (f"{name}.bias" if m.bias is not None else None)
        self.params = (self.w,) + ((self.b,) if self.b else ())
        self.P = math.prod(self.out_shape[1:])

    def _cols(self, x: arb_mat) -> list[arb_mat]:
        """im2col of every group: ``(rows·P) × (C_in/groups·|kernel|)``."""
        e, F, rows = x.entries(), x.ncols(), x.nrows()
        out = []
        for cols in self.map.cols:
            k = len(cols[0])
            flat = [e[r * F + i] if i >= 0 else ZERO for r in range(rows) for row in cols for i in row]
            out.append(arb_mat(rows * self.P, k, flat))
        return out

    def _assemble(self, ys: list[arb_mat], rows: int) -> arb_mat:
        cg, P = self.map.out_per_group, self.P
        F = cg * len(ys) * P
        out = [ZERO] * (rows * F)
        for g, y in enumerate(ys):
            e = y.entries()
            for r in range(rows):
                for p in range(P):
                    base = (r * P + p) * cg
                    for co in range(cg):
                        out[r * F + (g * cg + co) * P + p] = e[base + co]
        return arb_mat(rows, F, out)

    def _split(self, w: arb_mat) -> list[arb_mat]:
        cg, k = self.map.out_per_group, w.ncols()
        e = w.entries()
        return [arb_mat(cg, k, e[g * cg * k:(g + 1) * cg * k]) for g in range(self.map.groups)]

    def _apply(self, cols: list[arb_mat], w: arb_mat, b: arb_mat | None, rows: int) -> arb_mat:
        ws = self._split(w)
        ys = [c * wg.transpose() for c, wg in zip(cols, ws)]
        if b is not None:
            cg, be = self.map.out_per_group, b.entries()
            ys = [y + ones(y.nrows()) * arb_mat(1, cg, be[g * cg:(g + 1) * cg]) for g, y in enumerate(ys)]
        return self._assemble(ys, rows)

    def value(self, x, p):
        self.rows = x.nrows()
        self.cols = self._cols(x)
        return self._apply(self.cols, p[self.w], p[self.b] if self.b else None, self.rows)

    def tangent(self, dx, dirs, p):
        out = None if dx is None else self._apply(self._cols(dx), p[self.w], None, dx.nrows())
        if dirs:
            zero_w = arb_mat(p[self.w].nrows(), p[self.w].ncols())
            out = _add(out, vstack([self._apply(self.cols, d.get(self.w, zero_w), d.get(self.b) if self.b else None,
                                                self.rows) for d in dirs]))
        return out

    def backward(self, dy, p):
        cg, P, rows = self.map.out_per_group, self.P, dy.nrows()
        e, F = dy.entries(), dy.ncols()
        gws, gbs, dx = [], [], [ZERO] * (rows * math.prod(self.in_shape))
        Fin = math.prod(self.in_shape)
        for g, (cols, wg) in enumerate(zip(self.cols, self._split(p[self.w]))):
            dg = arb_mat(rows * P, cg, [e[r * F + (g * cg + co) * P + q] for r in range(rows) for q in range(P)
                                         for co in range(cg)])
            gws.append(dg.transpose() * cols)
            gbs.extend((ones(rows * P).transpose() * dg).entries())
            dcols = (dg * wg).entries()
            k = wg.ncols()
            for r in range(rows):
                for q, row in enumerate(self.map.cols[g]):
                    base = (r * P + q) * k
                    for j, i in enumerate(row):
                        if i >= 0:
                            dx[r * Fin + i] += dcols[base + j]
        grads = {self.w: vstack(gws)}
        if self.b:
            grads[self.b] = arb_mat(1, len(gbs), gbs)
        return arb_mat(rows, Fin, dx), grads


class Relu(Layer):
    """ReLU (``slope = 0``) or LeakyReLU: ``y = x`` where ``x > 0``, ``slope·x`` where ``x < 0``."""

    def __init__(self, name: str, in_shape: tuple[int, ...], slope: float = 0.0):
        super().__init__(name, in_shape)
        self.slope = arb(slope)
        self.hull = arb(min(1.0, slope)).union(arb(max(1.0, slope)))

    def value(self, x, p):
        F, factors, out = x.ncols(), [], []
        for idx, v in enumerate(x.entries()):
            if v > 0:
                factors.append(1)  # an int: the entry passes unchanged
                out.append(v)
            elif v < 0:
                factors.append(self.slope)
                out.append(v * self.slope)
            else:  # undecided: the ball contains the kink
                self.kinks.append(Kink(idx // F, self.name, idx % F, from_arb(v)))
                factors.append(self.hull)
                out.append(v.max(v * self.slope) if self.slope <= 1 else v.min(v * self.slope))
        self.factors = factors
        if self.slope == 0:
            self.locally_zero = [f is self.slope for f in factors]
        return arb_mat(x.nrows(), F, out)

    def _times(self, d: arb_mat) -> arb_mat:
        f, n = self.factors, len(self.factors)
        e = d.entries()
        return arb_mat(d.nrows(), d.ncols(), [v if f[i % n] == 1 else v * f[i % n] for i, v in enumerate(e)])

    def tangent(self, dx, dirs, p):
        return None if dx is None else self._times(dx)

    def backward(self, dy, p):
        return self._times(dy), {}


class Pool(Layer):
    """Max or average pooling (fixed or adaptive windows)."""

    def __init__(self, name: str, m: nn.Module, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.map: PoolMap = pool_map(m, in_shape)
        self.out_shape = self.map.out_shape
        self.inv = None if self.map.divisors is None else [arb(1) / d for d in self.map.divisors]

    #: ``locally_zero`` of the op that feeds this one (set by the network before ``value``)
    feed_zero: list[bool] | None = None

    def value(self, x, p):
        e, F, rows = x.entries(), x.ncols(), x.nrows()
        out = []
        if self.inv is not None:
            for r in range(rows):
                b = r * F
                out.extend(sum((e[b + i] for i in win), ZERO) * c for win, c in zip(self.map.windows, self.inv))
            return arb_mat(rows, len(self.map.windows), out)
        self.sel = []
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
        return arb_mat(rows, len(self.map.windows), out)

    def _constant(self, base: int, win: tuple[int, ...], vals: list[arb], best: int) -> bool:
        """The tie is harmless: every entry that may reach the maximum is locally the constant 0 (a dead
        ReLU), the others are certainly below it, so the pooled value is locally constant."""
        z = self.feed_zero
        if z is None:
            return False
        top = [j for j, v in enumerate(vals) if not vals[best] > v]
        return all(z[base + win[j]] for j in top) and all(v < 0 for j, v in enumerate(vals) if j not in top)
    def _linear(self, d: arb_mat) -> arb_mat:
        e, F, rows, n_out = d.entries(), d.ncols(), d.nrows(), len(self.map.windows)
        out = []
        if self.inv is not None:
            for r in range(rows):
                b = r * F
                out.extend(sum((e[b + i] for i in win), ZERO) * c for win, c in zip(self.map.windows, self.inv))
        else:
            n = len(self.sel) // n_out  # samples; rows = K·samples
            for r in range(rows):
                b, s = r * F, (r % n) * n_out
                out.extend(e[b + self.sel[s + o]] if self._live(s + o) else ZERO for o in range(n_out))
        return arb_mat(rows, n_out, out)

    def _live(self, k: int) -> bool:
        """The pooled entry ``k`` follows one selected input (not a kink, not a dead tie)."""
        s = self.sel[k]
        return s is not None and s >= 0

    def tangent(self, dx, dirs, p):
        return None if dx is None else self._linear(dx)

    def backward(self, dy, p):
        e, rows, n_out, Fin = dy.entries(), dy.nrows(), dy.ncols(), math.prod(self.in_shape)
        dx = [ZERO] * (rows * Fin)
        for r in range(rows):
            for o, win in enumerate(self.map.windows):
                v = e[r * n_out + o]
                if self.inv is not None:
                    v = v * self.inv[o]
                    for i in win:
                        dx[r * Fin + i] += v
                elif self._live(r * n_out + o):
                    dx[r * Fin + self.sel[r * n_out + o]] += v
        return arb_mat(rows, Fin, dx), {}


class BatchNorm(Layer):
    """Eval-mode BatchNorm: ``y = γ·(x − μ)/√(σ² + ε) + β`` per channel (running statistics)."""

    def __init__(self, name: str, m: nn.modules.batchnorm._BatchNorm, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.P = math.prod(in_shape[1:])
        self.mean = [arb(float(v)) for v in m.running_mean.double()]
        self.root = [(arb(float(v)) + arb(float(m.eps))).sqrt() for v in m.running_var.double()]
        self.affine = m.weight is not None
        self.w, self.b = f"{name}.weight", f"{name}.bias"
        self.params = (self.w, self.b) if self.affine else ()

    def _per_channel(self, v: arb_mat | None, default: int) -> list:
        return [default] * self.in_shape[0] if v is None else v.entries()

    def value(self, x, p):
        F, P = x.ncols(), self.P
        self.xhat = [(v - self.mean[(i % F) // P]) / self.root[(i % F) // P] for i, v in enumerate(x.entries())]
        g = self._per_channel(p.get(self.w) if self.affine else None, 1)
        b = self._per_channel(p.get(self.b) if self.affine else None, 0)
        self.scale = [gc / r for gc, r in zip(g, self.root)]
        return arb_mat(x.nrows(), F, [v * g[(i % F) // P] + b[(i % F) // P] for i, v in enumerate(self.xhat)])

    def tangent(self, dx, dirs, p):
        F, P = math.prod(self.in_shape), self.P
        out = None
        if dx is not None:
            out = arb_mat(dx.nrows(), F, [v * self.scale[(i % F) // P] for i, v in enumerate(dx.entries())])
        if dirs and self.affine:
            parts = []
            for d in dirs:
                g, b = self._per_channel(d.get(self.w), 0), self._per_channel(d.get(self.b), 0)
                parts.append(arb_mat(len(self.xhat) // F, F, [v * g[(i % F) // P] + b[(i % F) // P]
                                                                for i, v in enumerate(self.xhat)]))
            out = _add(out, vstack(parts))
        return out

    def backward(self, dy, p):
        F, P, C = dy.ncols(), self.P, self.in_shape[0]
        e = dy.entries()
        dx = arb_mat(dy.nrows(), F, [v * self.scale[(i % F) // P] for i, v in enumerate(e)])
        if not self.affine:
            return dx, {}
        gg, gb = [ZERO] * C, [ZERO] * C
        for i, v in enumerate(e):
            c = (i % F) // P
            gg[c] += v * self.xhat[i]
            gb[c] += v
        return dx, {self.w: arb_mat(1, C, gg), self.b: arb_mat(1, C, gb)}


class Flatten(Layer):
    def __init__(self, name: str, in_shape: tuple[int, ...]):
        super().__init__(name, in_shape)
        self.out_shape = (math.prod(in_shape),)


def make_layer(kind: str, name: str, module: nn.Module | None, in_shape: tuple[int, ...]) -> Layer:
    """The :class:`Layer` of a traced op (``add`` is handled by the caller)."""
    if kind == "linear":
        return Linear(name, module, in_shape)
    if kind == "conv":
        return Conv(name, module, in_shape)
    if kind == "relu":
        return Relu(name, in_shape)
    if kind == "leaky_relu":
        return Relu(name, in_shape, float(module.negative_slope))
    if kind in ("maxpool", "avgpool", "adaptive_avgpool"):
        return Pool(name, module, in_shape)
    if kind == "batchnorm":
        return BatchNorm(name, module, in_shape)
    if kind == "flatten" or (kind == "identity" and isinstance(module, nn.Flatten)):
        return Flatten(name, in_shape)
    return Layer(name, in_shape)
