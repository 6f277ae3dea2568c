"""T12: loss scaling ``L -> sL`` (``s > 0``): ``g -> sg``, ``H -> sH``, hence ``D -> D/s``,
``D⁺ -> sD⁺``, ``ρ -> ρ/s`` and ``D·D⁺`` invariant; mean vs sum reduction is ``s = N``.

>>> derive_T12().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.functions import smooth_function
from coupled_curvature.symbolic.homogeneous import quadratic_scalar
from coupled_curvature.symbolic.rules import penrose_block
from coupled_curvature.symbolic.unevaluated import Form, PseudoInverse, frac, matmul, prod

__all__ = ["derive_T12"]


@derivation("T12")
def derive_T12(d: Derivation) -> None:
    """Derive T12 (generic MatrixSymbol algebra and an explicit rational check)."""
    d.assume("s > 0; H⁺ the Moore–Penrose pseudo-inverse (rule 'penrose')")
    s = sp.Symbol("s", positive=True)
    x1, x2 = sp.symbols("x1 x2")
    L = smooth_function("L2", 2)
    x12 = (x1, x2)
    d.exact("∇²(sL) = s∇²L (SymPy diff; ∇(sL) = s∇L likewise)",
            sp.Matrix(2, 2, lambda i, j: sp.Derivative(s * L(x1, x2), x12[i], x12[j])), s * sp.hessian(L(x1, x2), x12))
    ls = sp.symbols("l1:4")
    d.exact("sum reduction = N · mean reduction (N = 3 samples): s = N", sum(ls), prod(3, frac(sum(ls), 3)))
    _, w, g, H, Hp, pen = penrose_block()
    d.rewrite(pen, "(sH)⁺ = H⁺/s: Penrose 1", (s * H) * (Hp / s) * (s * H), s * H)
    d.rewrite(pen, "(sH)⁺ = H⁺/s: Penrose 2 (3, 4: scalar multiples)", (Hp / s) * (s * H) * (Hp / s), Hp / s)
    ww, gg = quadratic_scalar(w.T * w), quadratic_scalar(g.T * g)
    q, qp, p = quadratic_scalar(w.T * H * w), quadratic_scalar(w.T * Hp * w), quadratic_scalar(w.T * g)
    D, P = q / ww / gg, qp / ww * gg
    # after L -> sL: g' = sg, H' = sH, H'⁺ = H⁺/s, shown in the defining formulas before the scalar pull-out
    sg = matmul(s, g)
    gg2 = Form(matmul(sp.Transpose(sg), sg))
    q2, qp2, p2 = Form(matmul(w.T, matmul(s, H), w)), Form(matmul(w.T, matmul(1 / s, Hp), w)), Form(matmul(w.T, sg))
    D2, P2 = frac(frac(q2, ww), gg2), prod(frac(qp2, ww), gg2)
    d.exact("D -> D/s", D2, D / s)
    d.exact("D⁺ -> s·D⁺", P2, s * P)
    d.exact("ρ -> ρ/s", frac(q2, p2**2), q / p**2 / s)
    d.exact("D·D⁺ invariant", prod(D2, P2), D * P)
    # explicit rational instance with singular H (pinv exact on rationals)
    Hm = sp.ImmutableMatrix([[2, 1, 0], [1, 1, 0], [0, 0, 0]])
    wm, gm = sp.ImmutableMatrix([1, 2, 3]), sp.ImmutableMatrix([1, -1, 2])
    sv = sp.Rational(5, 2)

    def dd(Hx, gx, shown=False):
        """(D, D⁺) at (w, gx, Hx); ``shown``: the formulas with unevaluated products and pseudo-inverse."""
        if shown:
            ww_, gg_ = Form(matmul(wm.T, wm)), Form(matmul(sp.Transpose(gx), gx))
            return (frac(frac(Form(matmul(wm.T, Hx, wm)), ww_), gg_),
                    prod(frac(Form(matmul(wm.T, PseudoInverse(Hx), wm)), ww_), gg_))
        Px = Hx.pinv()
        return ((wm.T * Hx * wm)[0] / (wm.T * wm)[0] / (gx.T * gx)[0], (wm.T * Px * wm)[0] / (wm.T * wm)[0] * (gx.T * gx)[0])

    (D0, P0), (D1, P1) = dd(Hm, gm), dd(matmul(sv, Hm), matmul(sv, gm), shown=True)
    d.exact(f"instance (singular H, s = 5/2): D -> D/s (D = {D0})", D1, frac(D0, sv))
    d.exact(f"instance: D⁺ -> s·D⁺ (pinv of rational matrices; D⁺ = {P0})", P1, prod(sv, P0))
