"""Explicit small networks with fully symbolic weights, differentiated by SymPy itself.

``mlp([2, 3, 2, 1], "relu", pattern=...)`` builds ``f(x; θ)`` for a fixed ReLU activation
pattern (``σ(z) = m·z``, ``m ∈ {0, 1}`` per hidden unit; the pattern is preserved by positive
rescalings), ``"relu2"`` (``σ(z) = m·z²``, degree 2) or ``"sigma"`` (undefined activation with
named derivatives, to be used with the homogeneity rule).  The loss is ``ℓ(f)`` with ``ℓ`` a
generic C² function (:func:`~coupled_curvature.symbolic.functions.smooth_function`).

>>> net = mlp([1, 1, 1], "relu", pattern=[[1]])
>>> net.outputs
[W1_11*W2_11*x1 + W2_11*b1_1 + b2_1]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from coupled_curvature.symbolic.functions import activation, smooth_function
from coupled_curvature.symbolic.rules import rebuild

__all__ = ["Net", "mlp", "block_grad_hess", "layer_scaling", "at"]


@dataclass
class Net:
    widths: list[int]
    blocks: dict[str, list[sp.Symbol]]
    x: list[sp.Symbol]
    outputs: list[Any]
    pre: list[list[Any]] = field(default_factory=list)
    loss: Any = None

    @property
    def L(self) -> Any:
        """``ℓ(f_1, …, f_m)``."""
        return self.loss(*self.outputs)


def mlp(widths: list[int], act: str = "relu", pattern: list[list[int]] | None = None, bias: bool = True,
        loss: str = "ell") -> Net:
    """Symbolic MLP ``x -> W_m σ(… σ(W_1 x + b_1) …) + b_m`` (see module docstring)."""
    x = list(sp.symbols(f"x1:{widths[0] + 1}"))
    sig = activation()[0]
    blocks: dict[str, list[sp.Symbol]] = {}
    h: list[Any] = x
    pre = []
    m = len(widths) - 1
    for l in range(1, m + 1):
        W = sp.Matrix(widths[l], widths[l - 1], lambda i, j: sp.Symbol(f"W{l}_{i + 1}{j + 1}"))
        blocks[f"W{l}"] = list(W.T)  # column-major vec(W)
        z = W * sp.Matrix(h)
        if bias:
            b = sp.Matrix(sp.symbols(f"b{l}_1:{widths[l] + 1}"))
            blocks[f"b{l}"] = list(b)
            z = z + b
        z = [sp.expand(e) for e in z]
        pre.append(z)
        if l == m:
            h = z
        elif act == "relu":
            assert pattern is not None, "a ReLU net needs its activation pattern"
            h = [pattern[l - 1][i] * e for i, e in enumerate(z)]
        elif act == "relu2":
            assert pattern is not None, "a ReLU² net needs its activation pattern"
            h = [sp.expand(pattern[l - 1][i] * e**2) for i, e in enumerate(z)]
        elif act == "sigma":
            h = [sig(e) for e in z]
        else:  # pragma: no cover
            raise ValueError(act)
    return Net(list(widths), blocks, x, list(h), pre, smooth_function(loss, len(h)))


def block_grad_hess(expr: Any, block: list[sp.Symbol]) -> tuple[sp.Matrix, sp.Matrix]:
    """Gradient and Hessian block of ``expr`` w.r.t. ``block`` (SymPy ``diff``)."""
    g = sp.Matrix([sp.diff(expr, v) for v in block])
    H = sp.Matrix(len(block), len(block), lambda i, j: sp.diff(g[i], block[j]))
    return g, H


def layer_scaling(net: Net, l: int, c: Any, k: Any = 1, a: list | None = None) -> dict:
    """Substitution for the layer-wise (or neuron-wise, scales ``a``) map at layer ``l``:
    ``W_l -> diag(a) W_l``, ``b_l -> diag(a) b_l``, ``W_{l+1} -> W_{l+1} diag(a)^{-k}``."""
    n_out = net.widths[l]
    a = [c] * n_out if a is None else a
    sub = {}
    for i in range(n_out):
        for j in range(net.widths[l - 1]):
            s = sp.Symbol(f"W{l}_{i + 1}{j + 1}")
            sub[s] = a[i] * s
        if f"b{l}" in net.blocks:
            s = sp.Symbol(f"b{l}_{i + 1}")
            sub[s] = a[i] * s
        for r in range(net.widths[l + 1]):
            s = sp.Symbol(f"W{l + 1}_{r + 1}{i + 1}")
            sub[s] = a[i] ** (-k) * s
    return sub


def at(expr: Any, sub: dict) -> Any:
    """``expr`` evaluated at the substituted parameters, arguments of applied functions expanded
    (exact normal form of their polynomial arguments)."""
    e = expr.xreplace(sub) if sub else expr

    def norm(x: Any) -> Any:
        if isinstance(x, sp.Function) and not isinstance(x, (sp.Abs,)):
            return x.func(*[sp.expand(a) for a in x.args])
        return x

    return rebuild(e, norm)
