"""T10: scale-invariant blocks, ``L(sw) = L(w)`` for ``s > 0``: ``wᵀg = 0``, ``Hw = -g``,
``wᵀHw = 0``, ``D ≡ 0``.

On the open set ``w_n > 0`` every scale-invariant ``L`` is ``F(w_1/w_n, …, w_{n-1}/w_n)``
(``F`` generic C²); SymPy differentiates it.

>>> derive_T10().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.functions import smooth_function
from coupled_curvature.symbolic.unevaluated import Form, matmul

__all__ = ["derive_T10", "scale_invariant_instance"]


def scale_invariant_instance(n: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """``(w, g, H)`` of ``L(w) = F(w_1/w_n, …, w_{n-1}/w_n)`` for symbolic ``w ∈ Rⁿ``.

    >>> w, g, H = scale_invariant_instance(2)
    >>> sp.expand((w.T * g)[0])
    0
    """
    w = sp.Matrix(sp.symbols(f"w1:{n + 1}", positive=True))
    F = smooth_function(f"F{n}", n - 1)
    L = F(*[x / w[n - 1] for x in w[: n - 1]])
    g = sp.Matrix([L.diff(x) for x in w])
    H = sp.hessian(L, list(w))
    return w, g, H


@derivation("T10")
def derive_T10(d: Derivation) -> None:
    """Derive T10 generically (ray argument) and on F(w_i/w_n) for n = 2, 3, 4."""
    d.assume("L is C² on w != 0 and L(sw) = L(w) for all s > 0; on w_n > 0 every such L is F(w_1/w_n, ..., w_{n-1}/w_n) with F C²")
    s = sp.Symbol("s", positive=True)
    L2 = smooth_function("L2", 2)
    w1, w2 = sp.symbols("w1 w2")
    wv = sp.Matrix([w1, w2])
    gL = sp.Matrix([L2(w1, w2).diff(x) for x in (w1, w2)])
    HL = sp.hessian(L2(w1, w2), (w1, w2))
    d.exact("d/ds L(sw)|_{s=1} = wᵀg (=0 as L(sw) is constant in s)",
            sp.Subs(sp.Derivative(L2(s * w1, s * w2), s), s, 1), (wv.T * gL)[0])
    # ∇_w[L(sw)] = s(∇L)(sw) = ∇L(w) is constant in s; its s-derivative at s = 1
    grad_s = sp.Matrix([sp.Subs(sp.Derivative(L2(s * w1, s * w2), x, s), s, 1) for x in (w1, w2)])
    d.exact("∂/∂s ∇_w[L(sw)]|_{s=1} = g + Hw (=0 as ∇_w L(sw) = ∇L(w) is constant in s)", grad_s, gL + HL * wv)
    for n in (2, 3, 4):
        w, g, H = scale_invariant_instance(n)
        d.exact(f"F(w_i/w_n), n={n}: wᵀg = 0", Form(matmul(w.T, g)), 0)
        d.exact(f"F(w_i/w_n), n={n}: Hw = -g", matmul(H, w), -g)
        d.exact(f"F(w_i/w_n), n={n}: wᵀHw = 0, hence D = wᵀHw/(wᵀw‖g‖²) = 0", Form(matmul(w.T, H, w)), 0)
