"""T4: the exact invariance group of ``D`` is ``CO(n)``; certificates for ``n = 2, 3``.

Necessity rests on the universally quantified identity (``M = AᵀA``, ``N = M⁻¹``)

    (wᵀMw)(gᵀNg) = (wᵀw)(gᵀg)   for all w, g            (T4 (ii))

whose coefficients in ``(w, g)`` are the hypotheses ``h``.  With ``h_{ik} = M_ii N_kk - 1``
(from ``w_i² g_k²``) and ``h_{ij;k} = 2 M_ij N_kk`` (from ``w_i w_j g_k²``):

    M_ij        = -M_ij·h_{00} + (M_00/2)·h_{ij;0}
    M_ii - M_00 = -M_ii·h_{00} + M_00·h_{i0}

so ``M = M_00 I = c² I``.  :func:`certificate` emits this as plain data for
:func:`~coupled_curvature.symbolic.checker.check_certificate`.

>>> from coupled_curvature.symbolic.checker import check_certificate
>>> check_certificate(certificate(3))
True
"""
from __future__ import annotations

from typing import Any

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixElement

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic.checker import check_certificate
from coupled_curvature.symbolic.derivation import Derivation, Step, derivation, exact_equal
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.symbolic.rules import generic_block, word_rule
from coupled_curvature.symbolic.unevaluated import TexSymbol, frac, matmul, prod
from coupled_curvature.symbolic.witness import witness, witness_step

__all__ = ["certificate_system", "certificate", "derive_T4"]


def certificate_system(n: int) -> dict[str, Any]:
    """Symbols, hypotheses (coefficient dict) and targets of the T4 identity for size ``n``."""
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    M: dict = {}
    N: dict = {}
    for i, j in pairs:
        M[i, j] = M[j, i] = sp.Symbol(f"M{i}{j}")
        N[i, j] = N[j, i] = sp.Symbol(f"N{i}{j}")
    w, g = sp.symbols(f"w0:{n}"), sp.symbols(f"g0:{n}")
    Mm, Nm = sp.Matrix(n, n, lambda i, j: M[i, j]), sp.Matrix(n, n, lambda i, j: N[i, j])
    W, G = sp.Matrix(w), sp.Matrix(g)
    identity = sp.expand((W.T * Mm * W)[0] * (G.T * Nm * G)[0] - (W.T * W)[0] * (G.T * G)[0])
    hyps = dict(sp.Poly(identity, *w, *g).terms())
    unknowns = [M[p] for p in pairs] + [N[p] for p in pairs]
    return {"n": n, "M": M, "N": N, "w": w, "g": g, "identity": identity, "hyps": hyps, "unknowns": unknowns}


def _key(n: int, wpow: dict, gpow: dict) -> tuple:
    return tuple(wpow.get(i, 0) for i in range(n)) + tuple(gpow.get(i, 0) for i in range(n))


def certificate(n: int) -> dict[str, Any]:
    """Plain-data certificate that T4 (ii) forces ``AᵀA = c² I`` for size ``n >= 2``.

    >>> cert = certificate(2)
    >>> [t["name"] for t in cert["targets"]]
    ['M01', 'M11-M00']
    """
    if not isinstance(n, int) or n < 2 or n > 9:
        raise InvalidInputError(f"certificate(n) needs an integer 2 <= n <= 9, got {n!r}")
    S = certificate_system(n)
    M = S["M"]
    unknowns = S["unknowns"]

    def poly(e: Any) -> list:
        return [[str(c), {str(v): int(p) for v, p in zip(unknowns, m) if p}] for m, c in sp.Poly(e, *unknowns).terms()]

    h00 = _key(n, {0: 2}, {0: 2})
    targets = []
    for i in range(n):
        for j in range(i + 1, n):
            comb = [[list(h00), poly(-M[i, j])], [list(_key(n, {i: 1, j: 1}, {0: 2})), poly(M[0, 0] / 2)]]
            targets.append({"name": f"M{i}{j}", "target": poly(M[i, j]), "combination": comb})
    for i in range(1, n):
        comb = [[list(h00), poly(-M[i, i])], [list(_key(n, {i: 2}, {0: 2})), poly(M[0, 0])]]
        targets.append({"name": f"M{i}{i}-M00", "target": poly(M[i, i] - M[0, 0]), "combination": comb})
    return {"n": n, "targets": targets}


def _combination(S: dict, t: dict) -> Any:
    """Rebuild ``Σ c_h h`` of a certificate target inside SymPy (for the ``exact`` step)."""
    names = {str(v): v for v in S["unknowns"]}
    to_expr = lambda p: sp.Add(*[sp.Rational(c) * sp.Mul(*[names[v] ** k for v, k in m.items()]) for c, m in p])
    return sp.Add(*[to_expr(c) * S["hyps"][tuple(key)] for key, c in t["combination"]]), to_expr(t["target"])


@derivation("T4")
def derive_T4(d: Derivation) -> None:
    """T4: (i) D invariant ⇔ (ii) ‖Aw‖‖A⁻ᵀg‖ = ‖w‖‖g‖ ⇔ (iii) AᵀA = c²I; witnesses otherwise."""
    d.assume("T1 block action w -> Aw, g -> A^-T g, H -> A^-T H A^-1",
             "for (iii) => (i): A = cQ with c > 0 and Q^T Q = I (rule 'orthogonality')",
             "for the eigenvector reduction: M = A^T A is symmetric positive definite (Cauchy-Schwarz in the M-inner product)")
    n, w, g, H, (A, Q) = generic_block("A", "Q")
    c = sp.Symbol("c", positive=True)
    # (i) <=> (ii): numerator invariant, denominators carry the whole change
    Aw, Ag = matmul(A, w), matmul(A.I.T, g)
    d.exact("numerator wᵀHw is invariant (T1)", matmul(sp.Transpose(Aw), matmul(A.I.T, H, A.I), Aw), w.T * H * w)
    d.exact("‖Aw‖² = wᵀ(AᵀA)w", matmul(sp.Transpose(Aw), Aw), matmul(w.T, matmul(A.T, A), w))
    d.exact("‖A⁻ᵀg‖² = gᵀ(AᵀA)⁻¹g", matmul(sp.Transpose(Ag), Ag), matmul(g.T, sp.Inverse(matmul(A.T, A)), g))
    Ms = sp.MatrixSymbol("M", n, n)  # M = AᵀA, for the printed names only
    qH = sp.Symbol("q_H", positive=True)
    ww, gg, wMw, gNg = (TexSymbol(a, b, positive=True) for a, b in (
        ("w^Tw", w.T * w), ("g^Tg", g.T * g), ("w^TMw", w.T * Ms * w), ("g^TM^-1g", g.T * Ms.I * g)))
    # D = (wᵀHw/wᵀw)/‖g‖² before and after (numerator q_H invariant, denominators from the two steps above)
    Dp, D0 = frac(frac(qH, wMw), gNg), frac(frac(qH, ww), gg)
    d.exact(
        "D'/D = (wᵀw·gᵀg)/(wᵀMw·gᵀM⁻¹g); with H = wwᵀ (q_H = (wᵀw)² != 0), (i) => (ii) and (ii) => (i)",
        frac(Dp, D0), ww * gg / (wMw * gNg),
    )
    # (ii) => (iii): certificates and Gröbner bases for n = 2, 3
    for k in (2, 3):
        S = certificate_system(k)
        cert = certificate(k)
        for t in cert["targets"]:
            comb, tgt = _combination(S, t)
            d.exact(f"n={k}: {t['name']} = Σ c_h·h (cofactors of the certificate)", comb, tgt)
        d.add(Step(f"n={k}: independent checker accepts the certificate (M = M_00 I)", f"certificate({k})", True,
                   StepMethod.of(MethodKind.CERTIFICATE), check_certificate(cert)))
        G = sp.groebner(list(S["hyps"].values()), *S["unknowns"], order="grevlex")
        M = S["M"]
        for t in [M[i, j] for i in range(k) for j in range(i + 1, k)] + [M[i, i] - M[0, 0] for i in range(1, k)]:
            d.add(Step(f"n={k}: {t} lies in the ideal of the coefficient equations", t, 0, StepMethod.of(MethodKind.GROEBNER), bool(G.contains(t)),
                       f"Gröbner basis: {[sp.sstr(e) for e in G.exprs]}"))
    # (iii) => (i): A = cQ, Q orthogonal, symbolic n
    orth = word_rule("orthogonality", "QᵀQ = I, Q⁻ᵀ = Q", [((Q.T, Q), ()), ((Q.T.I,), (Q,)), ((Q.I.T,), (Q,)), ((Q.I,), (Q.T,))])
    d.rewrite(orth, "‖cQw‖² = c²‖w‖²", (c * Q * w).T * (c * Q * w), c**2 * w.T * w)
    d.rewrite(orth, "‖(cQ)⁻ᵀg‖² = c⁻²‖g‖²", ((c * Q).I.T * g).T * ((c * Q).I.T * g), c**-2 * g.T * g)
    d.exact("hence D'/D = 1 for A = cQ (D' from the two norms above)",
            frac(frac(frac(qH, c**2 * ww), frac(gg, c**2)), D0), 1)
    # eigenvector reduction and witnesses
    a, b, e_ = sp.symbols("m11 m12 m22")
    M2 = sp.Matrix([[a, b], [b, e_]])
    d.exact("n=2, w = g = e_1: 1/factor - 1 = M_11 (M⁻¹)_11 - 1 = M_12²/det M (> 0 iff e_1 not an eigenvector)",
            M2[0, 0] * M2.inv()[0, 0] - 1, b**2 / M2.det())
    m = sp.Matrix(3, 3, lambda i, j: sp.Symbol(f"m{min(i, j) + 1}{max(i, j) + 1}"))
    v, Sb = m[1:, 0], m[1:, 1:]
    d.exact("n=3, w = g = e_1: M_11 (M⁻¹)_11 - 1 = vᵀ adj(S) v / det M (S = trailing block, positive definite)",
            m[0, 0] * m.inv()[0, 0] - 1, (v.T * Sb.adjugate() * v)[0] / m.det())
    l1, l2 = sp.symbols("lambda_1 lambda_2", positive=True)
    Md = sp.ImmutableMatrix(sp.diag(l1, l2))
    # factor = (wᵀw·gᵀg)/(wᵀMw·gᵀM⁻¹g) at w = e_1, g = e_2: 1/(M_11 (M⁻¹)_22), the inverse left unevaluated
    factor = frac(1, prod(Md[0, 0], MatrixElement(sp.Inverse(Md), 1, 1)))
    d.exact("M diagonal: w = e_i, g = e_j gives factor 1/(M_ii (M⁻¹)_jj) = M_jj/M_ii", factor, l2 / l1)
    kappa = frac(sp.sqrt(l1), sp.sqrt(l2))  # σ_max/σ_min of A, σ_i² eigenvalues of M = AᵀA
    d.exact("w, g eigenvectors of M for λ_max = λ_1, λ_min = λ_2: factor = λ_min/λ_max = κ(A)⁻² (κ = √λ_1/√λ_2)",
            factor, sp.Pow(kappa, -2, evaluate=False))
    for Am in (sp.diag(1, 2), sp.Matrix([[1, 1], [0, 1]]), sp.Matrix([[2, 1, 0], [0, 1, 0], [0, 0, 1]])):
        witness_step(d, f"witness for A = {Am.tolist()}", Am)
    Qr = sp.Matrix([[sp.Rational(3, 5), -sp.Rational(4, 5)], [sp.Rational(4, 5), sp.Rational(3, 5)]])
    A2 = sp.ImmutableMatrix(2 * Qr)
    AtA = matmul(sp.Transpose(A2), A2)
    d.add(Step("conformal A = 2·[[3/5,-4/5],[4/5,3/5]]: AᵀA = 4I, so A has no non-invariance witness (witness(A) finds none)", AtA, 4 * sp.eye(2),
               StepMethod.of(MethodKind.EXACT), exact_equal(AtA, 4 * sp.eye(2)) and witness(A2) is None))
