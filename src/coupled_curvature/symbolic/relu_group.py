"""T5: ReLU symmetries inside ``CO``.

Neuron-wise scaling acts on ``vec(W_l)`` (column-major) as ``diag(b)^{-k} ⊗ diag(a)``; this is
conformal iff ``a`` and ``b`` are uniform (entries ``a_i b_j^{-k}`` all equal); on ``b_l`` as
``diag(a)``; permutations are orthogonal.  On the "layer" partition a uniform rescaling of layer
``l`` maps the block ``(W_{l+1}, b_{l+1})`` by ``diag(c^{-k} I, I)``: not conformal.

>>> derive_T5().ok
True
"""
from __future__ import annotations

import itertools
from typing import Any

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, Step, derivation, exact_equal
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.symbolic.exact import exact_number
from coupled_curvature.symbolic.unevaluated import frac, matmul
from coupled_curvature.symbolic.witness import is_conformal, witness, witness_step

__all__ = ["derive_T5", "kron_action"]


def kron_action(a: list, b: list, k: Any = 1) -> sp.Matrix:
    """``diag(b)^{-k} ⊗ diag(a)``: the action of neuron-wise scaling on ``vec(W_l)``.

    >>> kron_action([1, 2], [1])
    Matrix([
    [1, 0],
    [0, 2]])
    """
    num = lambda x, nm: x if isinstance(x, sp.Symbol) else exact_number(x, nm)
    k = num(k, "k")
    return sp.kronecker_product(sp.diag(*[num(x, "b") ** (-k) for x in b]), sp.diag(*[num(x, "a") for x in a]))


@derivation("T5")
def derive_T5(d: Derivation) -> None:
    """Derive T5 with symbolic scales (2×3 weight) and exact witnesses."""
    d.assume("a_i, b_j > 0 (positive scalings); k != 0", "T4 (conformal <=> AᵀA = c²I)")
    k = sp.Symbol("k", positive=True)
    a = sp.symbols("a1:3", positive=True)
    b = sp.symbols("b1:4", positive=True)
    W = sp.Matrix(2, 3, lambda i, j: sp.Symbol(f"W{i + 1}{j + 1}"))
    vec = lambda X: sp.Matrix(list(X.T))
    Da, Db = sp.ImmutableMatrix(sp.diag(*a)), sp.ImmutableMatrix(sp.diag(*[x ** (-k) for x in b]))
    Wt = Da * W * Db
    K = kron_action(a, b, k)
    Kshown = sp.KroneckerProduct(Db, Da)  # unevaluated diag(b)^-k ⊗ diag(a)
    d.exact("vec(diag(a) W diag(b)^-k) = (diag(b)^-k ⊗ diag(a)) vec(W)", vec(Wt), matmul(Kshown, vec(W)))
    d.exact("KᵀK is diagonal with entries a_i² b_j^-2k", matmul(sp.Transpose(Kshown), Kshown),
            sp.diag(*[(a[i] * b[j] ** (-k)) ** 2 for j in range(3) for i in range(2)]))
    d.exact("ratio of entries (i,j), (i',j): a_i/a_i' (b cancels), so equal entries force a uniform",
            frac(K[0, 0], K[1, 1]), a[0] / a[1])
    d.exact("ratio of entries (i,j), (i,j'): (b_j'/b_j)^k, so equal entries force b uniform (t -> t^k injective)",
            frac(K[0, 0], K[2, 2]), (b[1] / b[0]) ** k)
    cc = sp.Symbol("c", positive=True)
    Ku = sp.KroneckerProduct(sp.ImmutableMatrix(sp.diag(*[cc ** (-k)] * 3)), sp.ImmutableMatrix(sp.diag(cc, cc)))
    d.exact("uniform a = b = c: KᵀK = c^(2-2k)·I (conformal)", matmul(sp.Transpose(Ku), Ku), cc ** (2 - 2 * k) * sp.eye(6))
    for n in (2, 3):
        perms = [sp.ImmutableMatrix(n, n, lambda i, j: int(p[i] == j)) for p in itertools.permutations(range(n))]
        lhs = sp.BlockDiagMatrix(*[matmul(sp.Transpose(P), P) for P in perms])
        d.exact(f"all {n}! permutation matrices P satisfy PᵀP = I (block-diagonal of the {len(perms)} products)",
                lhs, sp.eye(n * len(perms)))
    cases = [
        ("non-uniform a = (1, 2), b = (1, 1, 1), k = 1 on W_l", kron_action([1, 2], [1, 1, 1])),
        ("non-uniform b = (1, 2), a = (1, 1), k = 1 on W_l", kron_action([1, 1], [1, 2])),
        ("non-uniform a = (1, 3) on b_l", sp.diag(1, 3)),
        ("'layer' partition, block (W_{l+1}, b_{l+1}) with c = 2, k = 1: diag(1/2 I_2, I_1)",
         sp.diag(sp.Rational(1, 2), sp.Rational(1, 2), 1)),
    ]
    for desc, A in cases:
        witness_step(d, desc, A)
    Au = sp.ImmutableMatrix(kron_action([2, 2], [2, 2, 2]))
    AtA = matmul(sp.Transpose(Au), Au)
    d.add(Step("uniform a = b = 2, k = 1 on W_l: the action K = diag(b)^-1 ⊗ diag(a) has KᵀK = I (conformal), "
               "so K has no non-invariance witness (witness(K) finds none)", AtA, sp.eye(6), StepMethod.of(MethodKind.EXACT),
               exact_equal(AtA, sp.eye(6)) and witness(Au) is None and is_conformal(Au)))
