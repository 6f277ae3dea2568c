"""T1: transformation law of gradient and Hessian under a linear symmetry ``T``.

If ``L(Tθ) = L(θ)`` for all ``θ`` then ``∇L(Tθ) = T⁻ᵀ∇L(θ)`` and
``∇²L(Tθ) = T⁻ᵀ∇²L(θ)T⁻¹``; for ``T = diag(A, B)`` block ``b`` maps as ``w -> Aw``,
``g -> A⁻ᵀg``, ``H -> A⁻ᵀHA⁻¹``, so ``wᵀHw`` and ``wᵀg`` are invariant:

    (Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw,      (Aw)ᵀ(A⁻ᵀg) = wᵀg.

>>> derive_T1().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.functions import smooth_function
from coupled_curvature.symbolic.unevaluated import Form, matmul

__all__ = ["derive_T1", "chain_rule_instance"]


def _chain_rule_parts(n: int) -> tuple[sp.Matrix, tuple, sp.Expr, sp.Matrix, sp.Matrix]:
    """``(T, θ, L(Tθ), Tᵀ(∇L)(Tθ), Tᵀ(∇²L)(Tθ)T)`` for symbolic ``n×n`` ``T`` and generic C² ``L``."""
    th = sp.symbols(f"theta1:{n + 1}")
    T = sp.Matrix(n, n, lambda i, j: sp.Symbol(f"t{i + 1}{j + 1}"))
    L = smooth_function(f"L{n}", n)
    u = T * sp.Matrix(th)
    y = sp.symbols(f"y1:{n + 1}")
    Ly = L(*y)
    G = sp.Matrix([sp.diff(Ly, v) for v in y]).subs(dict(zip(y, u)), simultaneous=True)
    Hy = sp.Matrix(n, n, lambda i, j: sp.diff(Ly, y[i], y[j])).subs(dict(zip(y, u)), simultaneous=True)
    return T, th, L(*u), T.T * G, T.T * Hy * T


def chain_rule_instance(n: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]:
    """For symbolic ``n×n`` ``T`` and generic C² ``L``: returns ``(T, ∇(L∘T), Tᵀ(∇L)(Tθ),
    ∇²(L∘T), Tᵀ(∇²L)(Tθ)T)``, the left sides computed by SymPy's ``diff``.

    >>> T, g1, g2, H1, H2 = chain_rule_instance(2)
    >>> (g1 - g2).expand() == sp.zeros(2, 1)
    True
    """
    T, th, comp, g2, H2 = _chain_rule_parts(n)
    grad = sp.Matrix([sp.diff(comp, x) for x in th])
    hess = sp.Matrix(n, n, lambda i, j: sp.diff(comp, th[i], th[j]))
    return T, grad, g2, hess, H2


def _chain_rule_claims(n: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]:
    """``(∇(L∘T), Tᵀ(∇L)(Tθ), ∇²(L∘T), Tᵀ(∇²L)(Tθ)T)`` with the left sides as unevaluated
    ``Derivative`` objects (what SymPy differentiates when the step is checked)."""
    _T, th, comp, g2, H2 = _chain_rule_parts(n)
    grad = sp.ImmutableMatrix([sp.Derivative(comp, x) for x in th])
    hess = sp.ImmutableMatrix(n, n, lambda i, j: sp.Derivative(comp, th[i], th[j]))
    return grad, g2, hess, H2


@derivation("T1")
def derive_T1(d: Derivation) -> None:
    """Derive T1 (chain rule by SymPy for n = 2, 3; MatrixSymbol algebra for generic n)."""
    d.assume("L is C² (mixed partials commute)", "T is invertible and L(Tθ) = L(θ) for all θ")
    for n in (2, 3):
        g1, g2, H1, H2 = _chain_rule_claims(n)
        d.exact(f"n={n}: chain rule ∇(L∘T)(θ) = Tᵀ(∇L)(Tθ) (SymPy diff)", g1, g2)
        d.exact(f"n={n}: chain rule ∇²(L∘T)(θ) = Tᵀ(∇²L)(Tθ)T (SymPy diff)", H1, H2)
    n = sp.Symbol("n", integer=True, positive=True)
    T, A = sp.MatrixSymbol("T", n, n), sp.MatrixSymbol("A", n, n)
    G, Gp, Hm, Hp = (sp.MatrixSymbol(s, n, k) for s, k in (("g", 1), ("g'", 1), ("H", n), ("H'", n)))
    # unevaluated products, so that the step shows what is cancelled (SymPy would cancel on construction)
    d.exact("L∘T = L gives g = Tᵀg' (g' = ∇L(Tθ)); solving: g' = T⁻ᵀg",
            sp.MatMul(T.I.T, T.T, Gp, evaluate=False), Gp)
    d.exact("and H = TᵀH'T; solving: H' = T⁻ᵀHT⁻¹",
            sp.MatMul(T.I.T, T.T, Hp, T, T.I, evaluate=False), Hp)
    # block-diagonal restriction, explicit sizes 2 + 1
    a = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"a{i + 1}{j + 1}"))
    b = sp.Symbol("b")
    Tb = sp.diag(a, b)
    Hf = sp.Matrix(3, 3, lambda i, j: sp.Symbol(f"h{min(i, j) + 1}{max(i, j) + 1}"))
    gf = sp.Matrix(sp.symbols("g1:4"))
    # left sides unevaluated: the inverse of the explicit 3x3 block-diagonal T, then the blocks
    # (the products below use the explicit T⁻ᵀ established by the first step)
    Ti = Tb.inv()
    d.exact("T = diag(A, b): T⁻ᵀ = diag(A⁻ᵀ, b⁻¹)", sp.Transpose(sp.Inverse(sp.ImmutableMatrix(Tb))),
            sp.diag(a.inv().T, 1 / b))
    d.exact("gradient block: (T⁻ᵀg)_A = A⁻ᵀ g_A", matmul(Ti.T, gf)[:2, :], a.inv().T * gf[:2, :])
    d.exact("Hessian diagonal block: (T⁻ᵀHT⁻¹)_AA = A⁻ᵀ H_AA A⁻¹", matmul(Ti.T, Hf, Ti)[:2, :2],
            a.inv().T * Hf[:2, :2] * a.inv())
    # invariants, generic n and explicit n = 2
    w, g, H = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("g", n, 1), sp.MatrixSymbol("H", n, n)
    Aw = matmul(A, w)
    d.exact("(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw (generic n)", matmul(sp.Transpose(Aw), matmul(A.I.T, H, A.I), Aw), w.T * H * w)
    d.exact("(Aw)ᵀ(A⁻ᵀg) = wᵀg (generic n)", matmul(sp.Transpose(Aw), matmul(A.I.T, g)), w.T * g)
    w2, g2 = sp.Matrix(sp.symbols("w1:3")), sp.Matrix(sp.symbols("g1:3"))
    H2 = Hf[:2, :2]
    ai = a.inv()
    aw = matmul(a, w2)
    d.exact("(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw (n=2, entrywise; A⁻¹ explicit)",
            Form(matmul(sp.Transpose(aw), ai.T, H2, ai, aw)), (w2.T * H2 * w2)[0])
    d.exact("(Aw)ᵀ(A⁻ᵀg) = wᵀg (n=2, entrywise)", Form(matmul(sp.Transpose(aw), ai.T, g2)), (w2.T * g2)[0])
