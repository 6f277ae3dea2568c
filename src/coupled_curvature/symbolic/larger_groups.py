"""T11: larger groups.  ``ρ = wᵀHw/(wᵀg)²`` is invariant under every block-diagonal linear
symmetry (including non-uniform neuron scaling), undefined on scale-invariant blocks, and equals
``Q/P²`` for bias-free degree-1 nets; the Newton decrement ``gᵀH⁻¹g`` is invariant under every
linear symmetry when ``H`` is invertible.

>>> derive_T11().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.degenerate import scale_invariant_instance
from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.instances import block_grad_hess, layer_scaling, mlp
from coupled_curvature.symbolic.rules import generic_block
from coupled_curvature.symbolic.evaluation import at
from coupled_curvature.symbolic.unevaluated import Form, frac, matmul

__all__ = ["derive_T11"]


@derivation("T11")
def derive_T11(d: Derivation) -> None:
    """Derive T11 (generic MatrixSymbol algebra; neuron-wise instance; T10/T9 corollaries)."""
    d.assume("T1 transformation law",
             "T9 (k = 1: wᵀHw = Q, wᵀg = P)",
             "T10 (scale-invariant: wᵀg = 0)",
             "instance: 2-3-2-1 ReLU, fixed pattern, positive neuron scales a_i")
    _, w, g, H, (A, T) = generic_block("A", "T")
    Aw, Tg = matmul(A, w), matmul(T.I.T, g)
    d.exact("numerator of ρ invariant", matmul(sp.Transpose(Aw), matmul(A.I.T, H, A.I), Aw), w.T * H * w)
    d.exact("P = wᵀg invariant, so ρ = wᵀHw/P² invariant", matmul(sp.Transpose(Aw), matmul(A.I.T, g)), w.T * g)
    d.exact("Newton decrement: (T⁻ᵀg)ᵀ(T⁻ᵀHT⁻¹)⁻¹(T⁻ᵀg) = gᵀH⁻¹g",
            matmul(sp.Transpose(Tg), sp.Inverse(matmul(T.I.T, H, T.I)), Tg), g.T * H.I * g)
    t2 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"t{i + 1}{j + 1}"))
    h2 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"h{min(i, j) + 1}{max(i, j) + 1}"))
    g2 = sp.Matrix(sp.symbols("g1 g2"))
    ti = t2.inv()
    tg = matmul(ti.T, g2)
    # the inverse is computed explicitly (an unevaluated Inverse inside a product makes SymPy's printer invert it)
    d.exact("Newton decrement, n=2 entrywise: (T⁻ᵀg)ᵀ X (T⁻ᵀg) with X = (T⁻ᵀHT⁻¹)⁻¹ computed explicitly",
            Form(matmul(sp.Transpose(tg), (ti.T * h2 * ti).inv(), tg)), (g2.T * h2.inv() * g2)[0])
    a = sp.symbols("a1:4", positive=True)
    net = mlp([2, 3, 2, 1], "relu", [[1, 0, 1], [1, 1]])
    sub = layer_scaling(net, 1, None, 1, list(a))
    for name in ("W1", "b1", "W2"):
        gb, Hb = block_grad_hess(net.L, net.blocks[name])
        wv = sp.Matrix(net.blocks[name])
        q, p_ = (wv.T * Hb * wv)[0], (wv.T * gb)[0]
        tag = f"2-3-2-1, non-uniform neuron scaling a = (a1, a2, a3) on layer 1, block {name}"
        # primed = evaluated at the rescaled parameters: Subs(·, θ, Tθ)
        d.exact(f"{tag}: w'ᵀH'w' = wᵀHw", at(q, sub), q)
        d.exact(f"{tag}: w'ᵀg' = wᵀg, so ρ' = ρ", at(p_, sub), p_)
    wv, gv, _ = scale_invariant_instance(2)
    d.exact("scale-invariant block (T10): (wᵀg)² = 0, so ρ is undefined", Form(matmul(wv.T, gv)) ** 2, 0)
    P, Q, p = sp.symbols("P Q p")
    d.exact("bias-free, k = 1 (T9): ρ_l = wᵀHw/(wᵀg)² = (p(p-1)P + p²Q)/(pP)² at p = 1 is Q/P² for every layer",
            at(frac(p * (p - 1) * P + p**2 * Q, (p * P) ** 2), {p: 1}), Q / P**2)
