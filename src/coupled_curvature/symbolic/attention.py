"""T13: attention's symmetry group, exactly, on explicit matrices of symbols.

For one head with ``Q = XW_Q``, ``K = XW_K``, ``V = XW_V`` (``X`` of size ``t × d``, the head maps
``d × h``; rows are tokens, the convention ``Q = XW_Q``, not torch's ``xWᵀ``):

* ``W_Q -> W_QA``, ``W_K -> W_KA⁻ᵀ`` keeps the logits ``QKᵀ`` (``A⁻¹ = adj(A)/det A``, ``det A ≠ 0``);
* ``W_V -> W_VB``, ``W_O^h -> B⁻¹W_O^h`` keeps ``P·V·W_O^h`` for every attention pattern ``P``;
* two heads swapped together with the row blocks of ``W_O`` give the same output;
* a linear map feeding a LayerNorm or RMSNorm (no bias in between, ``ε = 0``) is scale invariant;
* the T4 link: row ``r`` of ``W_Q`` (a vector of the head's ``h`` entries) moves as ``w -> Aᵀw``, row
  ``r`` of ``W_K`` as ``w -> A⁻¹w``; ``Aᵀ`` and ``A⁻¹`` are conformal iff ``A`` is, so ``D`` of a row
  block is exact iff ``A = cQ``: a witness for the shear ``[[2, 1], [0, 1]]``, invariance for
  ``c·[[3/5, -4/5], [4/5, 3/5]]``; the fused tensor's slice ``diag(Aᵀ, A⁻¹, I)`` is not conformal even for
  ``A = cQ`` (``c ≠ 1``): a witness.

>>> d = derive_T13()
>>> d.ok, len(d.witnesses)
(True, 3)
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.unevaluated import frac, matmul
from coupled_curvature.symbolic.witness import coupled_D, transform, witness_step

__all__ = ["derive_T13", "symbol_matrix", "inverse_by_adjugate"]


def symbol_matrix(name: str, rows: int, cols: int) -> sp.ImmutableMatrix:
    """A ``rows × cols`` matrix of fresh real symbols ``name_ij`` (1-based).

    >>> symbol_matrix("a", 1, 2)
    Matrix([[a_11, a_12]])
    """
    return sp.ImmutableMatrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True))


def inverse_by_adjugate(A: sp.MatrixBase) -> sp.ImmutableMatrix:
    """``A⁻¹ = adj(A)/det A`` entrywise (a rational function of the entries; valid where ``det A ≠ 0``).

    >>> inverse_by_adjugate(sp.Matrix([[2, 1], [0, 1]]))
    Matrix([
    [1/2, -1/2],
    [  0,    1]])
    """
    return sp.ImmutableMatrix(A.adjugate() / A.det())


@derivation("T13")
def derive_T13(d: Derivation) -> None:
    """Derive T13: exact identities on symbolic 2×3 and 3×2 matrices, the row actions, witnesses.

    Formula: ``(XW_Q·A)(XW_K·A⁻ᵀ)ᵀ = XW_Q A A⁻¹ W_Kᵀ Xᵀ = (XW_Q)(XW_K)ᵀ``; each step is an entrywise
    ``expand``/``cancel`` identity of rational functions.
    """
    d.assume("A, B invertible h × h (entries real symbols, det A ≠ 0, det B ≠ 0); A⁻¹ = adj(A)/det A",
             "X: t × d inputs (t = 2 tokens, d = 3), W_Q, W_K, W_V: d × h (h = 2), W_O^h: h × m; Q = XW_Q (rows are tokens)",
             "P: any t × t attention pattern (the softmax of the logits, after any mask and scaling)",
             "c > 0; the norm layers without ε (ε > 0 breaks the invariance by O(ε/var))")
    X, WQ, WK = symbol_matrix("x", 2, 3), symbol_matrix("q", 3, 2), symbol_matrix("k", 3, 2)
    A = symbol_matrix("a", 2, 2)
    Ai = inverse_by_adjugate(A)
    d.exact("A·(adj(A)/det A) = I (det A ≠ 0)", matmul(A, Ai), sp.eye(2))
    Q, K = matmul(X, WQ), matmul(X, WK)
    d.exact("logits: (XW_Q·A)(XW_K·A⁻ᵀ)ᵀ = (XW_Q)(XW_K)ᵀ (2×3 inputs, 3×2 head maps, symbolic A)",
            matmul(matmul(X, WQ, A), sp.Transpose(matmul(X, WK, sp.Transpose(Ai)))),
            sp.ImmutableMatrix(sp.Matrix(X * WQ) * sp.Matrix(X * WK).T))
    B, P = symbol_matrix("b", 2, 2), symbol_matrix("p", 2, 2)
    WV, WO = symbol_matrix("v", 3, 2), symbol_matrix("o", 2, 3)
    d.exact("values: PX(W_V·B)(B⁻¹·W_O^h) = PXW_V·W_O^h (any pattern P, symbolic B)",
            matmul(P, X, WV, B, inverse_by_adjugate(B), WO), sp.ImmutableMatrix(P * X * WV * WO))
    O1, O2 = symbol_matrix("u", 2, 2), symbol_matrix("z", 2, 2)
    W1, W2 = symbol_matrix("m", 2, 3), symbol_matrix("n", 2, 3)
    d.exact("heads: [O_2 O_1]·[W_2; W_1] = [O_1 O_2]·[W_1; W_2] (two heads swapped with W_O's row blocks)",
            matmul(sp.ImmutableMatrix(sp.Matrix.hstack(O2, O1)), sp.ImmutableMatrix(sp.Matrix.vstack(W2, W1))),
            sp.ImmutableMatrix(sp.Matrix.hstack(O1, O2) * sp.Matrix.vstack(W1, W2)))
    _norms(d)
    r = 1  # the second row of the 3×2 head maps: one input feature's weights into the head
    d.exact("query row action: (row r of W_Q·A)ᵀ = Aᵀ·(row r of W_Q)ᵀ, i.e. w -> Aᵀw",
            sp.Transpose(matmul(WQ, A)[r, :]), matmul(sp.Transpose(A), sp.Transpose(WQ[r, :])))
    d.exact("key row action: (row r of W_K·A⁻ᵀ)ᵀ = A⁻¹·(row r of W_K)ᵀ, i.e. w -> A⁻¹w",
            sp.Transpose(matmul(WK, sp.Transpose(Ai))[r, :]), matmul(Ai, sp.Transpose(WK[r, :])))
    S = sp.ImmutableMatrix([[2, 1], [0, 1]])
    witness_step(d, "query row under the shear A = [[2, 1], [0, 1]], action Aᵀ", S.T)
    witness_step(d, "key row under the shear A = [[2, 1], [0, 1]], action A⁻¹", S.inv())
    c = sp.Symbol("c", positive=True)
    R = sp.ImmutableMatrix([[sp.Rational(3, 5), -sp.Rational(4, 5)], [sp.Rational(4, 5), sp.Rational(3, 5)]])
    w, g = symbol_matrix("w", 2, 1), symbol_matrix("g", 2, 1)
    h1, h2, h3 = sp.symbols("h_11 h_12 h_22", real=True)
    H = sp.ImmutableMatrix([[h1, h2], [h2, h3]])
    D = coupled_D(w, g, H)
    for who, M in (("query", (c * R).T), ("key", sp.ImmutableMatrix((c * R).inv()))):
        d.exact(f"{who} row under A = c·[[3/5, -4/5], [4/5, 3/5]] (c > 0): D' = D for symbolic w, g, symmetric H",
                coupled_D(*transform(M, w, g, H)), D)
    A2 = 2 * R
    fused = sp.ImmutableMatrix(sp.diag(A2.T, A2.inv(), sp.eye(2)))
    witness_step(d, "fused Q|K|V slice of one input feature under the per-head A = 2·[[3/5, -4/5], [4/5, 3/5]]: "
                     "diag(Aᵀ, A⁻¹, I)", fused)


def _norms(d: Derivation) -> None:
    """LayerNorm and RMSNorm of ``z = Wx`` (three features) are unchanged by ``W -> cW``, ``c > 0``."""
    c = sp.Symbol("c", positive=True)
    W, x = symbol_matrix("w", 3, 2), symbol_matrix("x", 2, 1)
    z = sp.ImmutableMatrix(W * x)
    d.exact("(cW)x = c·(Wx): the map feeding the norm scales its input z", matmul(c * W, x), c * z)

    def mean(v: sp.MatrixBase) -> sp.Expr:
        return sum(v) / len(v)

    def var(v: sp.MatrixBase) -> sp.Expr:
        return mean(v.applyfunc(lambda e: (e - mean(v)) ** 2))

    cz = c * z
    d.exact("var(cz) = c²·var(z) (mean over the 3 features)", var(cz), c**2 * var(z))
    # with var(cz) = c²·var(z) (the step above), √(c²·var z) = c·√(var z) for c > 0
    ln_c = cz.applyfunc(lambda e: frac(e - mean(cz), sp.sqrt(c**2 * var(z))))
    d.exact("LayerNorm: (cz − mean(cz))/√var(cz) = (z − mean z)/√var z (c > 0)", ln_c,
            z.applyfunc(lambda e: (e - mean(z)) / sp.sqrt(var(z))))
    ms = mean(z.applyfunc(lambda e: e**2))
    d.exact("mean((cz)²) = c²·mean(z²)", mean(cz.applyfunc(lambda e: e**2)), c**2 * ms)
    d.exact("RMSNorm: cz/√mean((cz)²) = z/√mean(z²) (c > 0)", cz.applyfunc(lambda e: frac(e, sp.sqrt(c**2 * ms))),
            z.applyfunc(lambda e: e / sp.sqrt(ms)))
