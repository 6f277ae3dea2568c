"""T12: loss scaling ``L -> sL`` (``s > 0``): ``g -> sg``, ``H -> sH``, hence ``D -> D/s``,
``D⁺ -> sD⁺``, ``ρ -> ρ/s`` and ``D·D⁺`` invariant; mean vs sum reduction is ``s = N``.

>>> derive_T12().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation
from coupled_curvature.symbolic.functions import smooth_function
from coupled_curvature.symbolic.homogeneous import quadratic_scalar
from coupled_curvature.symbolic.rules import word_rule

__all__ = ["derive_T12"]


def derive_T12() -> Derivation:
    """Derive T12 (generic MatrixSymbol algebra and an explicit rational check)."""
    d = Derivation(
        "T12",
        "L -> sL (s > 0): D -> D/s, D+ -> sD+, ρ -> ρ/s; D·D+ is invariant. Mean vs sum reduction is s = N.",
        ["s > 0; H⁺ the Moore–Penrose pseudo-inverse (rule 'penrose')"],
    )
    s = sp.Symbol("s", positive=True)
    x1, x2 = sp.symbols("x1 x2")
    L = smooth_function("L2", 2)
    d.exact("∇(sL) = s∇L, ∇²(sL) = s∇²L (SymPy diff)", sp.hessian(s * L(x1, x2), (x1, x2)), s * sp.hessian(L(x1, x2), (x1, x2)))
    ls = sp.symbols("l1:4")
    d.exact("sum reduction = N · mean reduction (N = 3 samples): s = N", sum(ls), 3 * (sum(ls) / 3))
    n = sp.Symbol("n", integer=True, positive=True)
    w, g = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("g", n, 1)
    H, Hp = sp.MatrixSymbol("H", n, n), sp.MatrixSymbol("H^+", n, n)
    pen = word_rule("penrose", "HH⁺H = H, H⁺HH⁺ = H⁺", [((H, Hp, H), (H,)), ((Hp, H, Hp), (Hp,))])
    d.rewrite(pen, "(sH)⁺ = H⁺/s: Penrose 1", (s * H) * (Hp / s) * (s * H), s * H)
    d.rewrite(pen, "(sH)⁺ = H⁺/s: Penrose 2 (3, 4: scalar multiples)", (Hp / s) * (s * H) * (Hp / s), Hp / s)
    ww = quadratic_scalar(w.T * w)
    gg, gg2 = quadratic_scalar(g.T * g), quadratic_scalar((s * g).T * (s * g))
    q, q2 = quadratic_scalar(w.T * H * w), quadratic_scalar(w.T * (s * H) * w)
    qp, qp2 = quadratic_scalar(w.T * Hp * w), quadratic_scalar(w.T * (Hp / s) * w)
    p, p2 = quadratic_scalar(w.T * g), quadratic_scalar(w.T * (s * g))
    D, D2 = q / ww / gg, q2 / ww / gg2
    P, P2 = qp / ww * gg, qp2 / ww * gg2
    d.exact("D -> D/s", D2, D / s)
    d.exact("D⁺ -> s·D⁺", P2, s * P)
    d.exact("ρ -> ρ/s", q2 / p2**2, q / p**2 / s)
    d.exact("D·D⁺ invariant", D2 * P2, D * P)
    # explicit rational instance with singular H (pinv exact on rationals)
    Hm = sp.Matrix([[2, 1, 0], [1, 1, 0], [0, 0, 0]])
    wm, gm = sp.Matrix([1, 2, 3]), sp.Matrix([1, -1, 2])
    sv = sp.Rational(5, 2)

    def dd(Hx, gx):
        Px = Hx.pinv()
        return ((wm.T * Hx * wm)[0] / (wm.T * wm)[0] / (gx.T * gx)[0], (wm.T * Px * wm)[0] / (wm.T * wm)[0] * (gx.T * gx)[0])

    (D0, P0), (D1, P1) = dd(Hm, gm), dd(sv * Hm, sv * gm)
    d.exact("instance (singular H, s = 5/2): D -> D/s", D1, D0 / sv)
    d.exact("instance: D⁺ -> s·D⁺ (pinv of rational matrices)", P1, sv * P0)
    return d.finish()
