"""T7: the pseudo-inverse variant ``D⁺ = (wᵀH⁺w / wᵀw)·‖g‖²``.

For ``A = cQ``: ``(A⁻ᵀHA⁻¹)⁺ = AH⁺Aᵀ`` (checked through the four Penrose conditions), so
``D⁺`` is invariant, also with the relative cutoff ``|λ| > rtol·max|λ|``.  Conversely, with
``H = uuᵀ`` (``H⁺ = uuᵀ/(uᵀu)²``) and ``g = u``: ``D⁺'/D⁺ = (uᵀu·wᵀw)/(‖A⁻ᵀu‖²‖Aw‖²)``, so
invariance forces T4 (ii) and hence ``A ∈ CO(n)``.  For singular ``H`` and a shear, even
``wᵀH⁺w`` changes: :func:`shear_pinv_witness`.

>>> W = shear_pinv_witness()
>>> W["before"], W["after"]
('1', '1/4')
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from coupled_curvature.symbolic.checker import check_certificate, check_pinv_witness
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic.derivation import Derivation, Step, derivation, exact_equal
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.symbolic.exact import exact_matrix, exact_vector
from coupled_curvature.symbolic.group import certificate
from coupled_curvature.symbolic.rules import generic_block, positivity, word_rule
from coupled_curvature.symbolic.unevaluated import Form, TexSymbol, frac, matmul, prod

__all__ = ["derive_T7", "shear_pinv_witness", "penrose_conditions"]


def penrose_conditions(X: sp.Matrix, P: sp.Matrix, evaluate: bool = True) -> list[tuple[Any, Any]]:
    """The four Penrose identities ``(XPX, X), (PXP, P), ((XP)ᵀ, XP), ((PX)ᵀ, PX)``; all hold
    (exactly) iff ``P = X⁺``.  With ``evaluate=False`` the left sides are unevaluated products
    (:func:`~coupled_curvature.symbolic.unevaluated.matmul`) for display in a step.

    >>> import sympy as sp
    >>> X = sp.Matrix([[1, 0], [0, 0]])
    >>> all((a - b).is_zero_matrix for a, b in penrose_conditions(X, X))
    True
    >>> penrose_conditions(X, X, evaluate=False)[0][0]
    Matrix([
    [1, 0],
    [0, 0]])*Matrix([
    [1, 0],
    [0, 0]])*Matrix([
    [1, 0],
    [0, 0]])
    """
    if evaluate:
        return [(X * P * X, X), (P * X * P, P), ((X * P).T, X * P), ((P * X).T, P * X)]
    return [(matmul(X, P, X), X), (matmul(P, X, P), P), (sp.Transpose(matmul(X, P)), X * P),
            (sp.Transpose(matmul(P, X)), P * X)]


def shear_pinv_witness(A: Any = None, H: Any = None, w: Any = None) -> dict[str, Any]:
    """Exact witness that ``wᵀH⁺w`` changes under ``A`` (default: shear ``[[1,1],[0,1]]``,
    ``H = diag(1, 0)``, ``w = e_1``).  Returns plain data for ``check_pinv_witness``:
    ``before = wᵀH⁺w``, ``after = (Aw)ᵀ(A⁻ᵀHA⁻¹)⁺(Aw)`` (pseudo-inverses from ``Matrix.pinv``,
    exact on rationals, and re-checked by Penrose).
    """
    A = sp.Matrix([[1, 1], [0, 1]]) if A is None else exact_matrix(A, "A")
    H = sp.diag(1, 0) if H is None else exact_matrix(H, "H")
    w = sp.Matrix([1, 0]) if w is None else exact_vector(w, "w")
    if A.det() == 0 or H != H.T or H.rows != A.rows or w.rows != A.rows:
        raise InvalidInputError("need an invertible A, a symmetric H and a vector w of one common size n")
    Ai = A.inv()
    H2 = Ai.T * H * Ai
    Hp, Hp2 = H.pinv(), H2.pinv()
    w2 = A * w
    s = lambda M: [[str(x) for x in M.row(i)] for i in range(M.rows)]
    return {
        "A": s(A), "H": s(H), "Hp": s(Hp), "Hp2": s(Hp2), "w": [str(x) for x in w],
        "before": str((w.T * Hp * w)[0]), "after": str((w2.T * Hp2 * w2)[0]),
        "wHw_before": str((w.T * H * w)[0]), "wHw_after": str((w2.T * H2 * w2)[0]),
    }


@derivation("T7")
def derive_T7(d: Derivation) -> None:
    """Derive T7 (sufficiency with cutoff, converse, shear witness)."""
    d.assume("H symmetric; H⁺ its Moore–Penrose pseudo-inverse (rule 'penrose': HH⁺H = H, H⁺HH⁺ = H⁺, HH⁺ = (HH⁺)ᵀ = H⁺H)",
             "Q orthogonal (rule 'orthogonality'), c > 0",
             "converse: a polynomial identity on the dense set wᵀu != 0 holds everywhere (continuity)")
    n, w, g, H, (Q, Hp) = generic_block("Q", "H^+")
    u = sp.MatrixSymbol("u", n, 1)
    c = sp.Symbol("c", positive=True)
    lam, rtol, mx = sp.symbols("lambda_i rtol m")
    pats = [((Q.T, Q), ()), ((Q.T.I,), (Q,)), ((Q.I.T,), (Q,)), ((Q.I,), (Q.T,)),
            ((H, Hp, H), (H,)), ((Hp, H, Hp), (Hp,)), ((Hp.T,), (Hp,)), ((H.T,), (H,)), ((Hp, H), (H, Hp))]
    R = word_rule("orthogonality+penrose", "QᵀQ = I, Q⁻ᵀ = Q, HH⁺H = H, H⁺HH⁺ = H⁺, Hᵀ = H, H⁺ᵀ = H⁺, H⁺H = HH⁺", pats)
    A = c * Q
    H2 = (A.I.T * H * A.I).doit()
    X = A * Hp * A.T
    d.rewrite(R, "H' = A⁻ᵀHA⁻¹ = c⁻² Q H Qᵀ", H2, c**-2 * Q * H * Q.T)
    H2 = c**-2 * Q * H * Q.T
    d.rewrite(R, "Penrose 1: H'XH' = H' for X = AH⁺Aᵀ", H2 * X * H2, H2)
    d.rewrite(R, "Penrose 2: XH'X = X", X * H2 * X, X)
    d.rewrite(R, "H'X = Q H H⁺ Qᵀ", H2 * X, Q * H * Hp * Q.T)
    d.rewrite(R, "Penrose 3: (H'X)ᵀ = Q H H⁺ Qᵀ = H'X", (Q * H * Hp * Q.T).T, Q * H * Hp * Q.T)
    d.rewrite(R, "X H' = Q H H⁺ Qᵀ", X * H2, Q * H * Hp * Q.T)
    d.rewrite(R, "Penrose 4: (XH')ᵀ = XH'", (Q * H * Hp * Q.T).T, Q * H * Hp * Q.T)
    d.rewrite(R, "w'ᵀH'⁺w' = c⁴ wᵀH⁺w", (A * w).T * X * (A * w), c**4 * w.T * Hp * w)
    d.rewrite(R, "‖w'‖² = c²‖w‖²", (A * w).T * (A * w), c**2 * w.T * w)
    d.rewrite(R, "‖g'‖² = c⁻²‖g‖²", (A.I.T * g).T * (A.I.T * g), c**-2 * g.T * g)
    p = sp.Symbol("p", positive=True)
    ww, gg = TexSymbol("w^Tw", w.T * w, positive=True), TexSymbol("g^Tg", g.T * g, positive=True)
    # D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² with p = wᵀH⁺w, after (the three steps above) and before
    d.exact("D⁺'/D⁺ = 1", frac(prod(frac(c**4 * p, c**2 * ww), frac(gg, c**2)), prod(frac(p, ww), gg)), 1)
    # relative cutoff
    d.rewrite(R, "H u = λu  =>  H'(Qu) = c⁻² Q H u (eigenvectors map to eigenvectors)", H2 * (Q * u), c**-2 * Q * H * u)
    d.exact("kept-set test: c⁻²|λ_i| - rtol·c⁻²max|λ| = c⁻²(|λ_i| - rtol·max|λ|)",
            c**-2 * sp.Abs(lam) - rtol * c**-2 * mx, c**-2 * (sp.Abs(lam) - rtol * mx))
    d.rewrite(positivity({c}), "c⁻² > 0, so the relative cutoff keeps the same eigen-indices", c**-2, sp.true)
    d.exact("each kept term: (c⁻²λ)⁻¹(Qu)(Qu)ᵀ = c² Q (λ⁻¹uuᵀ) Qᵀ, so H'⁺_τ' = A H⁺_τ Aᵀ",
            matmul(sp.Pow(c**-2 * lam, -1, evaluate=False), matmul(Q, u), sp.Transpose(matmul(Q, u))),
            c**2 * Q * (lam**-1 * u * u.T) * Q.T)
    # converse: rank-one H
    uu = sp.Matrix(sp.symbols("u1:4"))
    Hr = uu * uu.T
    Pr = Hr / (uu.T * uu)[0] ** 2
    for i, (a, b) in enumerate(penrose_conditions(Hr, Pr, evaluate=False)):
        d.exact(f"(uuᵀ)⁺ = uuᵀ/(uᵀu)² (n=3): Penrose condition {i + 1}", a, b)
    An = sp.MatrixSymbol("A", n, n)  # for the printed names only
    Atu, Anw = matmul(An.I.T, u), matmul(An, w)
    wu, uAu, wAw, uu_s = (TexSymbol(a, b, positive=True) for a, b in (
        ("w^Tu", w.T * u), ("||A^-Tu||^2", Form(matmul(sp.Transpose(Atu), Atu))),
        ("||Aw||^2", Form(matmul(sp.Transpose(Anw), Anw))), ("u^Tu", u.T * u)))
    # D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² with wᵀH⁺w = (wᵀu)²/(uᵀu)², ‖g‖² = uᵀu; after: w'ᵀu' = wᵀu (T1),
    # H' = u'u'ᵀ with u' = A⁻ᵀu, g' = u'
    Dp_before = prod(frac(frac(wu**2, uu_s**2), ww), uu_s)
    Dp_after = prod(frac(frac(wu**2, uAu**2), wAw), uAu)
    d.exact("H = uuᵀ, g = u: D⁺'/D⁺ = (uᵀu·wᵀw)/(‖A⁻ᵀu‖²‖Aw‖²), i.e. T4 (ii)", frac(Dp_after, Dp_before),
            uu_s * ww / (uAu * wAw))
    for k in (2, 3):
        d.add(Step(f"T4 (ii) => AᵀA = c²I (certificate n={k})", f"certificate({k})", True, StepMethod.of(MethodKind.CERTIFICATE),
                   check_certificate(certificate(k))))
    # shear witness
    W = shear_pinv_witness()
    d.witnesses.append(W)
    Am, Hm, Hpm, Hp2m = (sp.Matrix([[sp.Rational(x) for x in r] for r in W[k]]) for k in ("A", "H", "Hp", "Hp2"))
    H2m = Am.inv().T * Hm * Am.inv()
    conds = penrose_conditions(H2m, Hp2m, evaluate=False) + penrose_conditions(Hm, Hpm, evaluate=False)
    for i, (a, b) in enumerate(conds):
        d.exact(f"shear witness: Penrose condition {i % 4 + 1} for {'H' if i >= 4 else 'H' + chr(39)}", a, b)
    wv = sp.Matrix([sp.Rational(x) for x in W["w"]])
    Aw, Ai = matmul(Am, wv), sp.Inverse(sp.ImmutableMatrix(Am))
    d.exact("shear: wᵀHw unchanged (T1): (Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw",
            Form(matmul(sp.Transpose(Aw), matmul(sp.Transpose(Ai), Hm, Ai), Aw)), Form(matmul(wv.T, Hm, wv)))
    ratio = frac(Form(matmul(sp.Transpose(Aw), Hp2m, Aw)), Form(matmul(wv.T, Hpm, wv)))
    d.add(Step("shear: wᵀH⁺w changes, (Aw)ᵀH'⁺(Aw) / wᵀH⁺w = 1/4 != 1 with the witness's H⁺, H'⁺ (Penrose-checked "
               "above; the checker re-verifies)", ratio, sp.Rational(1, 4), StepMethod.of(MethodKind.CERTIFICATE),
               check_pinv_witness(W) and exact_equal(ratio, sp.Rational(1, 4))))
