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
from coupled_curvature.symbolic.derivation import Derivation
from coupled_curvature.symbolic.instances import at, block_grad_hess, layer_scaling, mlp

__all__ = ["derive_T11"]


def derive_T11() -> Derivation:
    """Derive T11 (generic MatrixSymbol algebra; neuron-wise instance; T10/T9 corollaries)."""
    d = Derivation(
        "T11",
        "ρ = wᵀHw/(wᵀg)² is invariant under every block-diagonal linear symmetry (so under non-uniform neuron "
        "scaling), undefined on scale-invariant blocks, and ρ_l = Q/P² for bias-free degree-1 nets; the Newton "
        "decrement gᵀH⁻¹g is invariant under every linear symmetry when H is invertible.",
        ["T1 transformation law", "T9 (k = 1: wᵀHw = Q, wᵀg = P)", "T10 (scale-invariant: wᵀg = 0)",
         "instance: 2-3-2-1 ReLU, fixed pattern, positive neuron scales a_i"],
    )
    n = sp.Symbol("n", integer=True, positive=True)
    A, T = sp.MatrixSymbol("A", n, n), sp.MatrixSymbol("T", n, n)
    w, g, H = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("g", n, 1), sp.MatrixSymbol("H", n, n)
    d.exact("numerator of ρ invariant", (A * w).T * (A.I.T * H * A.I) * (A * w), w.T * H * w)
    d.exact("P = wᵀg invariant, so ρ = wᵀHw/P² invariant", (A * w).T * (A.I.T * g), w.T * g)
    d.exact("Newton decrement: (T⁻ᵀg)ᵀ(T⁻ᵀHT⁻¹)⁻¹(T⁻ᵀg) = gᵀH⁻¹g", (T.I.T * g).T * (T.I.T * H * T.I).I * (T.I.T * g),
            g.T * H.I * g)
    t2 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"t{i + 1}{j + 1}"))
    h2 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"h{min(i, j) + 1}{max(i, j) + 1}"))
    g2 = sp.Matrix(sp.symbols("g1 g2"))
    ti = t2.inv()
    d.exact("Newton decrement, n=2 entrywise", ((ti.T * g2).T * (ti.T * h2 * ti).inv() * (ti.T * g2))[0], (g2.T * h2.inv() * g2)[0])
    a = sp.symbols("a1:4", positive=True)
    net = mlp([2, 3, 2, 1], "relu", [[1, 0, 1], [1, 1]])
    sub = layer_scaling(net, 1, None, 1, list(a))
    for name in ("W1", "b1", "W2"):
        gb, Hb = block_grad_hess(net.L, net.blocks[name])
        wv = sp.Matrix(net.blocks[name])
        g_, H_, w_ = at(gb, sub), at(Hb, sub), at(wv, sub)
        tag = f"2-3-2-1, non-uniform neuron scaling a = (a1, a2, a3) on layer 1, block {name}"
        d.exact(f"{tag}: w'ᵀH'w' = wᵀHw", (w_.T * H_ * w_)[0], (wv.T * Hb * wv)[0])
        d.exact(f"{tag}: w'ᵀg' = wᵀg, so ρ' = ρ", (w_.T * g_)[0], (wv.T * gb)[0])
    wv, gv, _ = scale_invariant_instance(2)
    d.exact("scale-invariant block (T10): (wᵀg)² = 0, so ρ is undefined", (wv.T * gv)[0] ** 2, 0)
    P, Q = sp.symbols("P Q")
    d.exact("bias-free, k = 1 (T9): ρ_l = Q/P² for every layer", Q / P**2, (1 * (1 - 1) * P + 1 * Q) / (1 * P) ** 2)
    return d.finish()
