"""T14: the gauge-fixed diagnostic, exactly, on explicit matrices of symbols.

A pair ``(X, Z)`` of ``d × h`` head maps (``X = W_Q``, ``Z = W_K``; or ``W_V`` and ``W_O^hᵀ``) is
*balanced* when ``XᵀX = ZᵀZ``. The group of T13 moves it to ``(XA, ZA⁻ᵀ)`` and keeps ``XZᵀ``, the
only thing the logits see.

* **Balanced representative.** With ``U``, ``V`` of orthonormal columns (the Cayley map
  ``(I − S)(I + S)⁻¹`` of a skew ``S``, rational in its entries, keeps the derivation exact) and
  ``Σ^{1/2} = diag(σ_1, σ_2)``, ``X* = UΣ^{1/2}``, ``Z* = VΣ^{1/2}`` has ``X*ᵀX* = Σ = Z*ᵀZ*`` and
  ``X*Z*ᵀ = UΣVᵀ``: the balanced pair read off the SVD of the product.
* **It depends on the orbit only.** For ``X = X*A``, ``Z = Z*A⁻ᵀ`` (symbolic invertible ``A``) the product
  is ``X*Z*ᵀ``, and the least-squares balancing map that :mod:`coupled_curvature.numeric.symmetries.gauge`
  computes, ``(XᵀX)⁻¹XᵀX*``, is exactly ``A⁻¹``: it brings every point of the orbit back to ``(X*, Z*)``.
* **Residual freedom.** An orthogonal ``R`` keeps the pair balanced and acts on the rows of ``X`` by
  ``Rᵀ``, conformally, so ``D`` is exact under it (T4); ``A = 2I`` breaks the balance (control).
* **Witness.** On a rational balanced pair, the shear ``A = [[2, 1], [0, 1]]`` moves a query row by
  ``Aᵀ``: a witness that the raw ``D`` moves; re-balancing composes to the identity, so the
  gauge-fixed ``D`` is unchanged.
* **ReLU units.** A unit with incoming norm ``‖in‖`` and outgoing norm ``‖out‖`` scaled by ``c`` is
  balanced iff ``c⁴‖in‖² = ‖out‖²``, whose positive root is ``c = √(‖out‖/‖in‖)``; the balanced
  weights are the same after any prior positive rescaling ``in → r·in``, ``out → out/r``.

What is not derived here: that two balanced pairs of one orbit differ by an orthogonal map
(``balanced_unique`` in the Coq development, pinned in ``statements/T13.txt``).

>>> d = derive_T14()
>>> d.ok, len(d.witnesses)
(True, 2)
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.attention import inverse_by_adjugate, symbol_matrix
from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.unevaluated import frac, matmul, prod
from coupled_curvature.symbolic.witness import coupled_D, transform, witness_step

__all__ = ["derive_T14", "cayley", "balancing_map", "unit_balance_scale"]


def cayley(S: sp.MatrixBase) -> sp.ImmutableMatrix:
    """The Cayley map ``(I − S)(I + S)⁻¹`` of a skew-symmetric ``S``: an orthogonal matrix whose entries are
    rational functions of ``S``'s (``I + S`` is invertible for every real skew ``S``).

    >>> Q = cayley(sp.Matrix([[0, sp.Rational(1, 2)], [-sp.Rational(1, 2), 0]]))
    >>> Q
    Matrix([
    [3/5, -4/5],
    [4/5,  3/5]])
    >>> Q.T * Q == sp.eye(2)
    True
    """
    n = S.rows
    return sp.ImmutableMatrix((sp.eye(n) - S) * inverse_by_adjugate(sp.eye(n) + S))


def balancing_map(X: sp.MatrixBase, X_star: sp.MatrixBase) -> sp.ImmutableMatrix:
    """``A_bal = (XᵀX)⁻¹XᵀX*``: the least-squares solution of ``X·A_bal = X*`` (exact where ``X`` has full
    column rank), the map the numeric gauge fixing applies.

    >>> balancing_map(sp.Matrix([[2, 0], [0, 1], [0, 0]]), sp.Matrix([[1, 0], [0, 1], [0, 0]]))
    Matrix([
    [1/2, 0],
    [  0, 1]])
    """
    G = sp.Matrix(X.T * X)
    return sp.ImmutableMatrix(inverse_by_adjugate(G) * X.T * X_star)


def unit_balance_scale(norm_in: sp.Expr, norm_out: sp.Expr) -> sp.Expr:
    """``c = √(‖out‖/‖in‖)``: the scale that gives a ReLU unit equal incoming and outgoing norms.

    Formula: ``‖c·in‖ = c‖in‖ = √(‖in‖‖out‖) = ‖out‖/c``.

    >>> unit_balance_scale(sp.Integer(1), sp.Integer(4))
    2
    """
    return sp.sqrt(norm_out / norm_in)


def _row_data() -> tuple[sp.ImmutableMatrix, sp.ImmutableMatrix, sp.ImmutableMatrix]:
    w, g = symbol_matrix("w", 2, 1), symbol_matrix("g", 2, 1)
    h1, h2, h3 = sp.symbols("h_11 h_12 h_22", real=True)
    return w, g, sp.ImmutableMatrix([[h1, h2], [h2, h3]])


@derivation("T14")
def derive_T14(d: Derivation) -> None:
    """Derive T14: the balanced representative of a symbolic Q/K pair, its dependence on the orbit only,
    the residual orthogonal freedom, a witness pair (raw ``D`` moves, gauge-fixed ``D`` does not) and the ReLU
    unit's balancing scale.

    Formula: ``X* = UΣ^{1/2}``, ``Z* = VΣ^{1/2}``; ``X*ᵀX* = Σ = Z*ᵀZ*``; ``(X*A)(Z*A⁻ᵀ)ᵀ = X*Z*ᵀ``;
    ``(XᵀX)⁻¹XᵀX* = A⁻¹`` for ``X = X*A``; each step an entrywise ``expand``/``cancel`` identity.
    """
    d.assume("X = W_Q, Z = W_K: d × h head maps (d = 3 inputs, h = 2); (X, Z) balanced iff XᵀX = ZᵀZ",
             "U = first two columns of the Cayley map (I − S)(I + S)⁻¹ of a skew 3 × 3 S (entries s_1, s_2, s_3), "
             "V likewise with t_1, t_2, t_3; σ_1, σ_2 > 0, Σ^{1/2} = diag(σ_1, σ_2), Σ = diag(σ_1², σ_2²)",
             "A invertible h × h (entries real symbols, det A ≠ 0); A⁻¹ = adj(A)/det A",
             "a ReLU unit: incoming weights and bias (m_11, m_21, m_31), outgoing weights (o_11, o_21), norms "
             "N_in = ‖in‖ > 0, N_out = ‖out‖ > 0; "
             "r > 0 any prior rescaling")
    _pair(d)
    _witness_pair(d)
    _units(d)


def _pair(d: Derivation) -> None:
    s = sp.symbols("s_1 s_2 s_3", real=True)
    t = sp.symbols("t_1 t_2 t_3", real=True)
    skew = lambda a: sp.Matrix([[0, a[0], a[1]], [-a[0], 0, a[2]], [-a[1], -a[2], 0]])
    U, V = sp.ImmutableMatrix(cayley(skew(s))[:, :2]), sp.ImmutableMatrix(cayley(skew(t))[:, :2])
    d.exact("Cayley: UᵀU = I (U = the first two columns of (I − S)(I + S)⁻¹, S skew)", matmul(U.T, U), sp.eye(2))
    sig = sp.symbols("sigma_1 sigma_2", positive=True)
    root = sp.ImmutableMatrix(sp.diag(*sig))
    Sigma = sp.ImmutableMatrix(sp.diag(sig[0] ** 2, sig[1] ** 2))
    X, Z = sp.ImmutableMatrix(U * root), sp.ImmutableMatrix(V * root)
    d.exact("balanced: (W_Q*)ᵀ(W_Q*) = Σ for W_Q* = UΣ^{1/2}", matmul(root, U.T, U, root), Sigma)
    d.exact("balanced: (W_K*)ᵀ(W_K*) = Σ for W_K* = VΣ^{1/2}", matmul(root, V.T, V, root), Sigma)
    d.exact("product: (W_Q*)(W_K*)ᵀ = UΣVᵀ (the SVD the balanced pair is read from)", matmul(X, Z.T),
            sp.ImmutableMatrix(U * Sigma * V.T))
    A = symbol_matrix("a", 2, 2)
    Ai = inverse_by_adjugate(A)
    P, K = symbol_matrix("q", 3, 2), symbol_matrix("k", 3, 2)
    d.exact("orbit: (W_Q·A)(W_K·A⁻ᵀ)ᵀ = W_Q·W_Kᵀ for any head maps and symbolic A, so (W_Q*)(W_K*)ᵀ is the "
            "orbit's product", matmul(sp.ImmutableMatrix(P * A), sp.ImmutableMatrix(K * Ai.T).T), sp.ImmutableMatrix(P * K.T))
    ZA = sp.ImmutableMatrix(Z * Ai.T)
    # with UᵀU = I (first step), XᵀX = AᵀΣA and the balancing map is (AᵀΣA)⁻¹AᵀΣ; evaluated entrywise
    gram = sp.ImmutableMatrix(A.T * Sigma * A)
    d.exact("Gram of W_Q = (W_Q*)A: W_QᵀW_Q = AᵀΣA (UᵀU = I)", matmul(A.T, root, U.T, U, root, A), gram)
    bal = sp.ImmutableMatrix(inverse_by_adjugate(gram) * A.T * Sigma)
    d.exact("balancing map: (W_QᵀW_Q)⁻¹W_Qᵀ(W_Q*) = (AᵀΣA)⁻¹AᵀΣ = A⁻¹, so W_Q·A_bal = W_Q*, for every A", bal, Ai)
    d.exact("and W_K·A_bal⁻ᵀ = (W_K*·A⁻ᵀ)Aᵀ = W_K*: the gauge-fixed pair is the orbit's own", matmul(ZA, A.T), Z)
    c = sp.Symbol("c", positive=True)
    R = cayley(sp.Matrix([[0, c], [-c, 0]]))
    Ri = inverse_by_adjugate(R)
    d.exact("R = cayley(c) = (I − C)(I + C)⁻¹, C = [[0, c], [−c, 0]], is orthogonal: RᵀR = I", matmul(R.T, R), sp.eye(2))
    d.exact("residual freedom: an orthogonal R = cayley(c) keeps the pair balanced, (W_Q*·R)ᵀ(W_Q*·R) = RᵀΣR = "
            "R⁻¹ΣR⁻ᵀ = (W_K*·R⁻ᵀ)ᵀ(W_K*·R⁻ᵀ)", matmul(R.T, Sigma, R),
            sp.ImmutableMatrix(Ri * Sigma * Ri.T).applyfunc(sp.factor))
    w, g, H = _row_data()
    d.exact("and moves a query row by Rᵀ, conformally: D' = D for symbolic w, g, symmetric H (T4)",
            coupled_D(*transform(R.T, w, g, H)), coupled_D(w, g, H))
    X2, Z2 = sp.ImmutableMatrix(2 * X), sp.ImmutableMatrix(Z / 2)
    d.exact("control: A = 2I leaves the balance, (2W_Q*)ᵀ(2W_Q*) − (W_K*/2)ᵀ(W_K*/2) = (15/4)Σ ≠ 0",
            sp.ImmutableMatrix(X2.T * X2 - Z2.T * Z2), sp.Rational(15, 4) * Sigma)


def _witness_pair(d: Derivation) -> None:
    """On a rational balanced pair: the shear moves the raw D (witness), re-balancing composes to the identity."""
    U = cayley(sp.Matrix([[0, sp.Rational(1, 2), 0], [-sp.Rational(1, 2), 0, 1], [0, -1, 0]]))[:, :2]
    X = sp.ImmutableMatrix(U * sp.diag(2, 1))
    shear = sp.ImmutableMatrix([[2, 1], [0, 1]])
    witness_step(d, "raw: a query row of (W_Q*)·A under the shear A = [[2, 1], [0, 1]] moves by Aᵀ", shear.T)
    bal = balancing_map(sp.ImmutableMatrix(X * shear), X)
    d.exact("gauge-fixed: the balancing map of (W_Q*)·A undoes A, A·A_bal = I (rational W_Q* = U·diag(2, 1))",
            matmul(shear, bal), sp.eye(2))
    w, g, H = _row_data()
    d.exact("so the row at the balanced point moves by (A·A_bal)ᵀ = I: the gauge-fixed D'/D = 1 (symbolic w, g, H)",
            frac(coupled_D(*transform(sp.ImmutableMatrix(shear * bal).T, w, g, H)), coupled_D(w, g, H)), 1)
    witness_step(d, "raw: the unit scaling diag(2, 1) of a layer's incoming rows moves D of a 2-weight row block",
                  sp.ImmutableMatrix(sp.diag(2, 1)))


def _units(d: Derivation) -> None:
    a, o = symbol_matrix("m", 3, 1), symbol_matrix("o", 2, 1)
    s = sp.Symbol("s", positive=True)
    d.exact("a unit scaled by s: ‖s·in‖² = s²‖in‖², ‖out/s‖² = ‖out‖²/s² (on the entries)",
            sp.ImmutableMatrix([((s * a).T * (s * a))[0, 0], ((o / s).T * (o / s))[0, 0]]),
            sp.ImmutableMatrix([s**2 * (a.T * a)[0, 0], (o.T * o)[0, 0] / s**2]))
    p, q, r = sp.symbols("N_in N_out r", positive=True)
    d.exact("balance s²‖in‖² = ‖out‖²/s² ⇔ (s²‖in‖ − ‖out‖)(s²‖in‖ + ‖out‖) = 0; the second factor is > 0",
            s**4 * p**2 - q**2, (s**2 * p - q) * (s**2 * p + q))
    c = unit_balance_scale(p, q)
    root = lambda n_in, n_out: sp.Pow(frac(n_out, n_in), sp.Rational(1, 2), evaluate=False)  # c as written
    d.exact("so s² = ‖out‖/‖in‖: c = √(‖out‖/‖in‖) solves it, c²‖in‖ − ‖out‖ = 0",
            sp.Add(prod(root(p, q), root(p, q), p), -q, evaluate=False), 0)
    d.exact("balanced norms: ‖c·in‖² = ‖out/c‖² = ‖in‖·‖out‖",
            sp.ImmutableMatrix([prod(root(p, q), root(p, q), p, p), frac(q**2, prod(root(p, q), root(p, q)))]),
            sp.ImmutableMatrix([p * q, p * q]))
    d.exact("after a prior rescaling in → r·in, out → out/r (r > 0): c' = c/r", root(prod(r, p), frac(q, r)), c / r)
    n_in, n_out = sp.sqrt((a.T * a)[0, 0]), sp.sqrt((o.T * o)[0, 0])
    cr, c0 = root(prod(r, n_in), frac(n_out, r)), unit_balance_scale(n_in, n_out)
    d.exact("the balanced weights are the orbit's own: c'·(r·in) = c·in and (out/r)/c' = out/c (on the entries)",
            sp.ImmutableMatrix([*(prod(cr, r, x) for x in a), *(frac(frac(x, r), cr) for x in o)]),
            sp.ImmutableMatrix([*(c0 * a), *(o / c0)]))
