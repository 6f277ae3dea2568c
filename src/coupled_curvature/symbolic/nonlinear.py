"""T6: no nonlinear extension.

Reparameterize one block by ``w = φ(w')``.  Differentiating ``L(φ(w'))`` gives
``g' = Jᵀg`` and ``H' = JᵀHJ + Σ_k g_k ∇²φ_k``.  For ``n = 2`` and ``φ`` a generic polynomial
map of degree ≤ 3: invariance of ``D`` for all ``(g, H)`` at all points forces ``φ`` linear
conformal; for ``n = 1`` the admissible maps are exactly the affine ones.

>>> nonlinear_factor(lambda u: [u[0], u[1] + 1], [1, 0], [1, 0], [[1, 0], [0, 0]])   # translation
2
"""
from __future__ import annotations

from typing import Any, Callable

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, Step, derivation
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.symbolic.functions import smooth_function
from coupled_curvature.symbolic.evaluation import at
from coupled_curvature.symbolic.unevaluated import frac

__all__ = ["derive_T6", "nonlinear_factor", "nonlinear_D_pair", "reparam_grad_hess"]


def reparam_grad_hess(phi: list, u: list, g: sp.Matrix, H: sp.Matrix) -> tuple[sp.Matrix, sp.Matrix]:
    """``(g', H') = (Jᵀg, JᵀHJ + Σ_k g_k ∇²φ_k)`` for ``w = φ(u)``."""
    J = sp.Matrix(phi).jacobian(u)
    Hp = J.T * H * J
    for kk, f in enumerate(phi):
        Hp += g[kk] * sp.hessian(f, u)
    return J.T * g, Hp


def nonlinear_D_pair(phi: Callable, u0: list, g: list, H: list) -> tuple[sp.Rational, sp.Rational]:
    """Exact ``(D', D)`` at ``w' = u0`` for ``w = φ(w')``, original ``(g, H)`` at ``w = φ(u0)``.

    ``D = (wᵀHw/wᵀw)/‖g‖²`` at ``w``; ``D' = (w'ᵀH'w'/w'ᵀw')/‖g'‖²`` with T6's laws.

    >>> nonlinear_D_pair(lambda u: [u[0], u[1] + 1], [1, 0], [1, 0], [[1, 0], [0, 0]])
    (1, 1/2)
    """
    n = len(u0)
    u = list(sp.symbols(f"u1:{n + 1}"))
    ph = [sp.sympify(e) for e in phi(u)]
    gm, Hm = sp.Matrix(g), sp.Matrix(H)
    g2, H2 = reparam_grad_hess(ph, u, gm, Hm)
    pt = dict(zip(u, [sp.Rational(x) for x in u0]))
    w2 = sp.Matrix(u0)
    w = sp.Matrix(ph).subs(pt)
    g2, H2 = g2.subs(pt), H2.subs(pt)
    D = (w.T * Hm * w)[0] / (w.T * w)[0] / (gm.T * gm)[0]
    D2 = (w2.T * H2 * w2)[0] / (w2.T * w2)[0] / (g2.T * g2)[0]
    return sp.Rational(D2), sp.Rational(D)


def nonlinear_factor(phi: Callable, u0: list, g: list, H: list) -> sp.Rational:
    """Exact ``D'/D`` at the point ``w' = u0`` for ``w = φ(w')`` (see :func:`nonlinear_D_pair`).

    >>> nonlinear_factor(lambda u: [u[0]**3, u[1]**3], [1, 1], [1, 1], [[1, 0], [0, 1]])  # θ = φ³
    5/3
    """
    D2, D = nonlinear_D_pair(phi, u0, g, H)
    return sp.Rational(D2 / D)


def _coeffs(expr: Any, gens: list) -> list:
    return [c for c in sp.Poly(sp.expand(expr), *gens).coeffs()]


@derivation("T6")
def derive_T6(d: Derivation) -> None:
    """Derive T6 (Hessian law; n = 2 cubic φ by Gröbner bases; n = 1 affine; witnesses)."""
    d.assume("scope of the checked steps: n = 2 with φ a generic polynomial map of degree ≤ 3",
             "L is C² (mixed partials commute); φ is a diffeomorphism (det J != 0, Rabinowitsch variable t)",
             "invariance for all (g, H) is used through the specialisations H = 0 (D = 0) and generic symmetric H",
             "n = 1: φ'' ≡ 0 on an interval implies φ affine (integrate twice)")
    # Hessian law by differentiating, n = 2, generic φ and L
    u1, u2 = sp.symbols("u1 u2")
    f1, f2 = sp.Function("phi1")(u1, u2), sp.Function("phi2")(u1, u2)
    L = smooth_function("L2", 2)
    comp = L(f1, f2)
    y = sp.symbols("y1 y2")
    back = dict(zip(y, (f1, f2)))
    g = sp.Matrix([L(*y).diff(v) for v in y]).xreplace(back)
    H = sp.hessian(L(*y), y).xreplace(back)
    g2, H2 = reparam_grad_hess([f1, f2], [u1, u2], g, H)
    d.exact("g' = ∇(L∘φ) = Jᵀg (SymPy diff)", sp.Matrix([sp.Derivative(comp, u1), sp.Derivative(comp, u2)]), g2)
    d.exact("H' = ∇²(L∘φ) = JᵀHJ + Σ_k g_k ∇²φ_k (SymPy diff)",
            sp.Matrix(2, 2, lambda i, j: sp.Derivative(comp, (u1, u2)[i], (u1, u2)[j])), H2)
    # n = 2, generic cubic φ
    u = [u1, u2]
    monos = [u1**i * u2**j for i in range(4) for j in range(4) if i + j <= 3]
    A = [[sp.Symbol(f"a{kk + 1}_{sp.Poly(m, u1, u2).monoms()[0][0]}{sp.Poly(m, u1, u2).monoms()[0][1]}") for m in monos]
         for kk in range(2)]
    phi = [sum(c * m for c, m in zip(A[kk], monos)) for kk in range(2)]
    unknowns = A[0] + A[1]
    high = [c for kk in range(2) for c, m in zip(A[kk], monos) if sp.Poly(m, u1, u2).total_degree() >= 2]
    gs = sp.symbols("g1 g2")
    gv = sp.Matrix(gs)
    wp = sp.Matrix(u)
    zero_part = sum(gs[kk] * (wp.T * sp.hessian(phi[kk], u) * wp)[0] for kk in range(2))
    eqs = _coeffs(zero_part, [u1, u2, *gs])
    d.exact("H = 0: D = 0, so D' = 0 needs Σ_k g_k w'ᵀ∇²φ_k w' = 0 for all g, w' (Euler: = Σ_k g_k Σ_d d(d-1)φ_k^(d))",
            zero_part, sum(gs[kk] * sum(sp.Poly(m, u1, u2).total_degree() * (sp.Poly(m, u1, u2).total_degree() - 1) * c * m
                                           for c, m in zip(A[kk], monos)) for kk in range(2)))
    G = sp.groebner(eqs, *unknowns, order="grevlex")
    d.add(Step("n=2 cubic φ: every quadratic and cubic coefficient lies in the ideal of these equations (φ affine)",
               sp.Matrix(high).T, sp.zeros(1, len(high)), StepMethod.of(MethodKind.GROEBNER), all(G.contains(c) for c in high),
               f"Gröbner basis: {[sp.sstr(e) for e in G.exprs]}"))
    # affine φ = Bw' + a: invariance for all symmetric H and all g
    b = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"B{i + 1}{j + 1}"))
    a = sp.Matrix(sp.symbols("c1 c2"))
    t = sp.Symbol("t")
    h11, h12, h22 = sp.symbols("h11 h12 h22")
    Hs = sp.Matrix([[h11, h12], [h12, h22]])
    w = b * wp + a
    gq, Hq = reparam_grad_hess(list(w), u, gv, Hs)
    num2, den2 = (wp.T * Hq * wp)[0], (wp.T * wp)[0] * (gq.T * gq)[0]
    num, den = (w.T * Hs * w)[0], (w.T * w)[0] * (gv.T * gv)[0]
    ident = sp.expand(num2 * den - num * den2)
    eqs2 = _coeffs(ident, [u1, u2, *gs, h11, h12, h22]) + [t * b.det() - 1]
    G2 = sp.groebner(eqs2, *b, *a, t, order="grevlex")
    targets = [a[0], a[1], b[0, 0] ** 2 + b[1, 0] ** 2 - b[0, 1] ** 2 - b[1, 1] ** 2, b[0, 0] * b[0, 1] + b[1, 0] * b[1, 1]]
    for tg in targets:
        d.add(Step(f"affine φ = Bw' + a, D' = D for all (g, H, w'): {sp.sstr(tg)} lies in the ideal", tg, 0, StepMethod.of(MethodKind.GROEBNER),
                   bool(G2.contains(tg)), f"Gröbner basis: {[sp.sstr(e) for e in G2.exprs]}"))
    p, q = sp.symbols("p q")
    for B in (sp.Matrix([[p, -q], [q, p]]), sp.Matrix([[p, q], [q, -p]])):
        d.exact(f"sufficiency: B = {B.tolist()} (BᵀB = (p²+q²)I), a = 0 satisfies the identity",
                at(ident, {**dict(zip(b, B)), a[0]: 0, a[1]: 0}), 0)
    # n = 1
    x, s_, c0 = sp.symbols("x s a")
    ph = sp.Function("phi")(x)
    g1, h1 = sp.symbols("g h")
    gp, hp = ph.diff(x) * g1, ph.diff(x) ** 2 * h1 + g1 * ph.diff(x, 2)
    d.exact("n=1: D = H/g², D' - D = φ''/(φ'² g) (g' = φ'g, H' = φ'²H + gφ'')", hp / gp**2 - h1 / g1**2,
            ph.diff(x, 2) / (ph.diff(x) ** 2 * g1))
    cs = sp.symbols("s0:4")
    pol = sum(cs[i] * x**i for i in range(4))
    G1 = sp.groebner(_coeffs(pol.diff(x, 2), [x]), *cs, order="grevlex")
    d.add(Step("n=1 cubic φ: φ'' ≡ 0 forces s2 = s3 = 0 (affine)", sp.Matrix([cs[2], cs[3]]).T, sp.zeros(1, 2), StepMethod.of(MethodKind.GROEBNER),
               bool(G1.contains(cs[2]) and G1.contains(cs[3]))))
    aff = s_ * x + c0
    d1, d2 = sp.Derivative(aff, x), sp.Derivative(aff, (x, 2))  # φ', φ'' of the affine map, unevaluated
    d.exact("n=1: every affine φ = s w' + a is admissible: D' = H'/g'² = (φ'²H + gφ'')/(φ'g)² = H/g² = D",
            frac(d1**2 * h1 + g1 * d2, (d1 * g1) ** 2), h1 / g1**2)
    # witnesses: D'/D as the quotient of the two exact values
    cases = [("translation w = w' + (0, 1)", "witness: translation w = w' + (0,1) at w' = (1,0), g = e_1, H = e_1e_1ᵀ",
              lambda v: [v[0], v[1] + 1], [1, 0], [1, 0], [[1, 0], [0, 0]], sp.Integer(2)),
             ("θ = φ³ (coordinatewise)", "witness: θ = φ³ at w' = (1,1), g = (1,1), H = I",
              lambda v: [v[0] ** 3, v[1] ** 3], [1, 1], [1, 1], [[1, 0], [0, 1]], sp.Rational(5, 3))]
    for name, desc, fn, u0, gw, Hw, want in cases:
        D2, D1 = nonlinear_D_pair(fn, u0, gw, Hw)
        d.witnesses.append({"phi": name, "w'": u0, "g": gw, "H": Hw, "factor": str(D2 / D1)})
        d.exact(f"{desc}: D'/D = {want} (D' = {D2}, D = {D1})", frac(D2, D1), want)
