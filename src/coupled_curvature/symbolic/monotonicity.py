"""T8: monotonicity in curvature and the Laplace / PAC-Bayes connection.

``H -> tH`` (``t > 0``): ``D -> tD``, ``D⁺ -> D⁺/t``.  In a Gaussian-posterior PAC-Bayes KL the
term ``½ log det(H + δI)`` grows with curvature and ``½ tr((H + δI)⁻¹)/σ²`` shrinks.

>>> derive_T8().ok
True
"""
from __future__ import annotations

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.homogeneous import quadratic_scalar
from coupled_curvature.symbolic.rules import penrose_block, positivity
from coupled_curvature.symbolic.unevaluated import Form, frac, matmul, prod

__all__ = ["derive_T8"]


@derivation("T8")
def derive_T8(d: Derivation) -> None:
    """Derive T8 (scaling laws, derivative signs, KL curvature terms)."""
    d.assume("t > 0, δ > 0, σ > 0, and H + δI positive definite (λ_i + δ > 0; shown with λ_i > 0)",
             "log det and tr(·)^-1 are spectral: computed in an eigenbasis of H (orthogonal invariance)",
             "H⁺ is the Moore–Penrose pseudo-inverse (rule 'penrose')")
    _, w, g, H, Hp, pen = penrose_block()
    t = sp.Symbol("t", positive=True)
    d.rewrite(pen, "(tH)⁺ = H⁺/t: Penrose 1", (t * H) * (Hp / t) * (t * H), t * H)
    d.rewrite(pen, "(tH)⁺ = H⁺/t: Penrose 2 (3, 4: scalar multiples of symmetric HH⁺, H⁺H)", (Hp / t) * (t * H) * (Hp / t), Hp / t)
    ww, gg = quadratic_scalar(w.T * w), quadratic_scalar(g.T * g)
    q, qp = quadratic_scalar(w.T * H * w), quadratic_scalar(w.T * Hp * w)
    D0, P0 = q / ww / gg, qp / ww * gg
    # D and D⁺ at tH (H⁺ -> H⁺/t), shown as the defining formulas before the scalar pull-out
    Dt = frac(frac(Form(matmul(w.T, matmul(t, H), w)), ww), gg)
    Pt = prod(frac(Form(matmul(w.T, matmul(1 / t, Hp), w)), ww), gg)
    d.exact("D(tH) = t·D(H)", Dt, t * D0)
    d.exact("D⁺(tH) = D⁺(H)/t", Pt, P0 / t)
    d.exact("dD(tH)/dt = D(H): D increases with curvature when D > 0", sp.Derivative(Dt, t), D0)
    d.exact("dD⁺(tH)/dt = -D⁺(H)/t²: D⁺ decreases with curvature", sp.Derivative(Pt, t), -P0 / t**2)
    # Laplace: posterior covariance H⁺; variance along the unit direction û = w/‖w‖ is ûᵀH⁺û
    uhat = matmul(1 / sp.sqrt(ww), w)
    d.exact("D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² = (posterior variance ûᵀH⁺û along û = w/‖w‖)·‖g‖²",
            prod(frac(qp, ww), gg), prod(Form(matmul(sp.Transpose(uhat), Hp, uhat)), gg))
    lam = sp.symbols("lambda1:4", positive=True)
    delta, sig = sp.symbols("delta sigma", positive=True)
    Hd = sp.ImmutableMatrix(sp.diag(*lam) + delta * sp.eye(3))  # H + δI in an eigenbasis of H
    d.exact("eigenbasis: det(H + δI) = Π(λ_i + δ)", sp.Determinant(Hd), sp.Mul(*[x + delta for x in lam]))
    d.exact("eigenbasis: tr((H + δI)⁻¹) = Σ 1/(λ_i + δ)", sp.Trace(sp.Inverse(Hd)), sum(1 / (x + delta) for x in lam))
    logdet = sp.Rational(1, 2) * sum(sp.log(x + delta) for x in lam)
    trace = sp.Rational(1, 2) * sum(1 / (x + delta) for x in lam) / sig**2
    pos = positivity({*lam, delta, sig, t})
    d.exact("∂/∂λ_1 ½log det(H+δI) = 1/(2(λ_1+δ))", sp.Derivative(logdet, lam[0]), 1 / (2 * (lam[0] + delta)))
    d.rewrite(pos, "... > 0: grows with curvature", 1 / (2 * (lam[0] + delta)), sp.true)
    d.exact("∂/∂λ_1 ½tr((H+δI)⁻¹)/σ² = -1/(2σ²(λ_1+δ)²)", sp.Derivative(trace, lam[0]),
            -1 / (2 * sig**2 * (lam[0] + delta) ** 2))
    d.rewrite(pos, "-(...) > 0: shrinks with curvature", 1 / (2 * sig**2 * (lam[0] + delta) ** 2), sp.true)
    ld_t = sp.Rational(1, 2) * sum(sp.log(t * x + delta) for x in lam)
    d.exact("d/dt ½log det(tH+δI) = ½Σ λ_i/(tλ_i+δ)", sp.Derivative(ld_t, t),
            sp.Rational(1, 2) * sum(x / (t * x + delta) for x in lam))
    d.rewrite(pos, "... > 0", sp.Rational(1, 2) * sum(x / (t * x + delta) for x in lam), sp.true)
