"""What the Coq development (``proofs/coq``) states of each theorem of the registry
(:mod:`coupled_curvature.theorems`): the pinned names per theorem, the scope of the formal part in
words, and the derivation steps that a pinned theorem states in general (labelled ``formal``).

Plain data and the standard library, like the registry; the pins themselves are read from
``proofs/coq/statements`` at call time (:func:`formal_names`), so importing this module loads no
prover code.

>>> formal_step("T12", "D -> D/s")
('CoupledCurvature.T12_loss_scaling.T12_D',)
"""

from __future__ import annotations

from coupled_curvature.theorems import get

__all__ = ["FORMAL_HEADLINES", "FORMAL_SCOPE", "FORMAL_STEPS", "formal_names", "formal_step"]


def formal_names(theorem_id: str) -> tuple[str, ...]:
    """Qualified Coq theorem names pinned for ``theorem_id`` (``()`` when none are pinned).

    The pins in ``proofs/coq/statements/`` are the contract (read by
    :func:`coupled_curvature.proofs.formal.formal_theorems`); the registry does not copy them.

    >>> all(n.startswith("CoupledCurvature.T04") for n in formal_names("T4"))
    True
    """
    tid = get(theorem_id).id
    from coupled_curvature.proofs.formal import formal_theorems  # read at call time: no import cycle

    return tuple(formal_theorems().get(tid, ()))


#: what the Coq development (``proofs/coq``) proves of each theorem, for every n, depth and width;
#: the parts not named here are checked symbolically and numerically only
FORMAL_SCOPE: dict[str, str] = {
    "T1": "the block action keeps wᵀHw and wᵀg for every invertible A and every block-diagonal T; "
          "the gradient and Hessian laws of L∘T (directional derivatives, mathcomp-analysis; vectors of "
          "dimension ≥ 1) with L differentiable near Tθ and its partials differentiable at Tθ",
    "T2": "layer-wise, positive neuron-wise and permutation maps preserve the output of a network of any "
          "depth and widths with a positively homogeneous activation (induction over the layers)",
    "T3": "end to end for the network's own loss (any depth, widths, data, per-sample loss, c > 0), blocks "
          "W_l and b_l: g' = c⁻¹g, H' = c⁻²H, ‖g‖² and RQ by c⁻², wᵀHw, wᵀg, D, D⁺ unchanged, with no "
          "differentiability hypothesis (equalities of the limits that define the derivatives), and "
          "W_{l+1} (factor c⁻ᵏ, hidden or output layer); a permutation of layer l's units end to end "
          "(blocks W_l and b_l: g' = Qg, H' = QHQᵀ, D, D⁺ unchanged, any σ, no hypothesis); instances: a deep "
          "linear net, and a ReLU net at a point off its kinks (loss = its linear-region polynomial nearby); αI",
    "T4": "(i) ⇔ (ii) ⇔ (iii) for every n over a real closed field, and the basis-vector witness with a "
          "factor in (0, 1); not the κ(A)⁻² form, which needs a spectral theorem",
    "T5": "the vec action of a positive neuron-wise scaling is conformal iff the scales are uniform; "
          "permutations are orthogonal; the layer partition's diag(c⁻ᵏI, I) is not conformal for cᵏ ≠ 1",
    "T6": "the pointwise core for every n (conformal Jacobian, Jw′ ∥ φ(w′), w′ᵀ∇²φ_k w′ = 0) and the "
          "n = 1 pointwise law (D kept for all g, H iff φ'' = 0 at the point); the n = 1 classification near a "
          "point (φ, φ' derivable near x0: φ'' = 0 near x0 iff φ is affine near x0); from a map φ with its "
          "Jacobian and second derivatives on a radial segment {tu : a ≤ t ≤ b} (0 < a): D(L∘φ, w') = D(L, φ(w')) "
          "for every (g, H) at every point of it forces φ(tu) = cQ(tu) + βQu there (c > 0, QᵀQ = I; instances "
          "2·R_90, and diag(2, 1), v + v_0²e_0 moving D); the global n = 1 classification, with global hypotheses "
          "(φ, φ′ derivable at every point of R: φ'' = 0 on R iff φ is affine on R; instances 3w + 1 and w + w³), "
          "pinned and shown as global, so it labels no step; not the same on an open set of Rⁿ, nor the global "
          "statement for C² diffeomorphisms of Rⁿ",
    "T7": "the Moore–Penrose inverse constructed and unique, (A⁻ᵀHA⁻¹)⁺ = AH⁺Aᵀ for A ∈ CO(n), D⁺ "
          "invariant, the converse, and an exact singular witness; and the relative-cutoff H⁺_τ that diagnose "
          "computes, given an orthogonal eigendecomposition of H (MathComp 1.15 has no real spectral theorem), "
          "and the same H⁺_τ from any two such eigendecompositions of one H",
    "T8": "D → tD and D⁺ → D⁺/t under H → tH, with strict monotonicity; not the Laplace reading",
    "T9": "for a loss positively homogeneous of degree k in a block: wᵀg = k·L (L differentiable at w) and "
          "Hw = (k−1)·g (L differentiable near w, partials derivable at w); the network closed forms for "
          "L = Σ_i ℓ_i(F_i) with F_i(tw) = t^p F_i(w) for t near 1: wᵀg = pP and wᵀHw = p(p−1)P + p²Q with "
          "P = Σ⟨∇ℓ_i(f_i), f_i⟩, Q = Σ f_iᵀ∇²ℓ_i(f_i)f_i (L and each ℓ_i differentiable near the point, partials "
          "differentiable at it; instances p = 1 and p = 2); for p = 1 also D = (Q/P²)·cos² (P ≠ 0); the "
          "homogeneity itself from the network: with σ positively k-homogeneous and zero biases after layer l, "
          "the output is positively homogeneous of degree k^(m−l) in W_l (any depth and widths); for the "
          "network's own loss Σ_s ℓ_s(F_s(W_l)) with W_l a hidden layer's weights, the ray hypothesis derived "
          "from the network, so wᵀg = pP and wᵀHw = p(p−1)P + p²Q with p = k^(m−l) under hypotheses on the ℓ_s and "
          "L near w only, and for k = 1 (P ≠ 0, Q ≥ 0) D = (Q/P²)·cos² ≤ Q/P² (Cauchy–Schwarz; instances: a depth-2 "
          "z² net, p = 4, wᵀg = 96, wᵀHw = 800, and a k = 1 linear net, D = 9/80 < Q/P² = 1/8); not the output "
          "layer's block in the network form, nor the Lagrange identity itself",
    "T10": "L(sw) = L(w) gives wᵀg = 0 (L differentiable at w), Hw = −g, wᵀHw = 0 and D = 0 (L "
           "differentiable near w, its partials derivable at w); instance L(x) = (first coordinate of x)²/‖x‖² at x = (1, 1)",
    "T11": "ρ invariant under every invertible block action; the Newton decrement gᵀH⁻¹g invariant under "
           "every invertible linear map (also with H⁺)",
    "T12": "D → D/s, D⁺ → sD⁺, ρ → ρ/s and D·D⁺ unchanged under L → sL",
    "T13": "for one head, every sequence length and width: the logits (XW_Q·A)(XW_K·A⁻ᵀ)ᵀ = (XW_Q)(XW_K)ᵀ for "
           "every invertible A, PXW_V·B·B⁻¹·W_O = PXW_V·W_O for every invertible B and pattern P, heads permuted "
           "with the row blocks of W_O alike give the same output; with T4 and T7, D and D⁺ of one row of W_Q (moved by "
           "Aᵀ) or of W_K (moved by A⁻¹) exact for all (w, g, H) iff A is conformal; not the whole d×h block (I ⊗ Aᵀ), "
           "the fused tensors or the norm layers",
    "T14": "for one head, every width: two balanced Q/K pairs (W_QᵀW_Q = W_KᵀW_K, W_Q of full column rank) of one "
           "orbit differ by an orthogonal A, so D of every query row (moved by Aᵀ) and key row (moved "
           "by A⁻¹) at the balanced point is the same for all (w, g, H); not the SVD construction of the balanced pair, "
           "the V/O pair or the ReLU unit balancing (those are exact SymPy steps)",
}


#: per theorem, its headline Coq theorems (``<Module>.<name>``, pinned under that theorem) said in words;
#: the report shows them first in the theorem's formal part, each marked by what it is (global or local
#: hypotheses: ``coupled_curvature.proofs.formal_evidence.GLOBAL_PINS`` decides, not this text)
FORMAL_HEADLINES: dict[str, tuple[tuple[str, str], ...]] = {
    "T6": (
        ("T06_n1_classification.n1_affine_iff",
         "n = 1: if φ and φ′ are derivable at every point of R, then φ'' = 0 on all of R iff φ(w′) = sw′ + a for "
         "every w′, i.e. φ is affine on R (the pointwise law n1_pointwise says that, where φ′ ≠ 0, φ''(w′) = 0 is "
         "exactly D(L∘φ, w′) = D(L, φ(w′)) for every loss)"),
        ("T06_map_affine.map_ray_affine_conformal",
         "any n: if φ: Rⁿ → Rⁿ has, at every point w′ = tu of a radial segment (0 < a ≤ t ≤ b, u ≠ 0), the "
         "Jacobian J(w′) (invertible) and the second derivatives K_k(w′), φ(w′) ≠ 0, and D(L∘φ, w′) = D(L, φ(w′)) "
         "for every loss (every g ≠ 0 and symmetric H, through the chain rule's JᵀHJ + Σ_k g_k K_k), then "
         "φ(tu) = cQ(tu) + βQu on the segment, with c > 0 and QᵀQ = I: φ is affine conformal there"),
    ),
}


#: per theorem, the derivation steps (by their exact description) whose claim a pinned Coq theorem
#: states in general (any n, depth and width), with those Coq theorems (``<Module>.<name>``, the
#: library prefix ``CoupledCurvature.`` left out). A step listed here gets the trust label
#: ``formal``; steps about one explicit instance or one certificate's arithmetic, the relative
#: cutoff, derivatives in t and the Laplace reading are not listed (no pinned statement says them).
#: A listed theorem's hypotheses are local and a pinned instance shows they can hold
#: (``coupled_curvature.proofs.formal_evidence.FORMAL_INSTANCES``, checked by the tests); T6's global
#: n = 1 classification (derivatives everywhere, ``formal_evidence.GLOBAL_PINS``) is never listed, and the permutation end to end
#: (``T03_network_perm``, pinned under T3) has no derivation step of its own to label.
FORMAL_STEPS: dict[str, dict[str, tuple[str, ...]]] = {
    "T1": {
        "n=2: chain rule ∇(L∘T)(θ) = Tᵀ(∇L)(Tθ) (SymPy diff)": ("T01_analytic.grad_comp_linear",),
        "n=2: chain rule ∇²(L∘T)(θ) = Tᵀ(∇²L)(Tθ)T (SymPy diff)": ("T01_analytic.hess_comp_linear",),
        "n=3: chain rule ∇(L∘T)(θ) = Tᵀ(∇L)(Tθ) (SymPy diff)": ("T01_analytic.grad_comp_linear",),
        "n=3: chain rule ∇²(L∘T)(θ) = Tᵀ(∇²L)(Tθ)T (SymPy diff)": ("T01_analytic.hess_comp_linear",),
        "L∘T = L gives g = Tᵀg' (g' = ∇L(Tθ)); solving: g' = T⁻ᵀg": ("T01_analytic.grad_symmetry",),
        "and H = TᵀH'T; solving: H' = T⁻ᵀHT⁻¹": ("T01_analytic.hess_symmetry",),
        "(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw (generic n)": ("T01_transformation_law.quad_act",),
        "(Aw)ᵀ(A⁻ᵀg) = wᵀg (generic n)": ("T01_transformation_law.dot_act",),
        "(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw (n=2, entrywise; A⁻¹ explicit)": ("T01_transformation_law.quad_act",),
        "(Aw)ᵀ(A⁻ᵀg) = wᵀg (n=2, entrywise)": ("T01_transformation_law.dot_act",),
    },
    "T2": {
        "c^-k Σ_i c^k(…) = Σ_i (…): output unchanged":
            ("T02_homogeneous_rescaling.layer_rescaling_preserves_output",),
        "σ(a_i z_i) = a_i^k σ(z_i) (a_i > 0), and a_i^-k a_i^k = 1: output unchanged":
            ("T02_homogeneous_rescaling.neuron_scaling_preserves_output",),
        "permutation π of hidden units: re-index Σ_i by the bijection π":
            ("T02_homogeneous_rescaling.permutation_preserves_output",),
    },
    "T3": {
        **{f"W_l, b_l: {q}": ("T03_network_law.T3_network_W", "T03_network_law.T3_network_b") for q in (
            "‖g'‖²/‖g‖² = c**(-2)", "RQ'/RQ = c**(-2)", "w'ᵀH'w' = wᵀHw", "w'ᵀg' = wᵀg", "D' = D",
            "D⁺' = D⁺")},
        **{f"W_{{l+1}}: {q}": ("T03_network_law.T3_network_next", "T03_network_law.T3_network_next_out")
           for q in ("‖g'‖²/‖g‖² = c**(2*k)", "RQ'/RQ = c**(2*k)", "w'ᵀH'w' = wᵀHw", "w'ᵀg' = wᵀg", "D' = D",
                     "D⁺' = D⁺")},
        **{f"{b}: {q}": ("T08_monotonicity.pinv_scale",) for b in ("W_l, b_l", "W_{l+1}") for q in (
            "Penrose 1 for (H/α²)⁺ = α²H⁺",
            "Penrose 2 for (H/α²)⁺ = α²H⁺ (3, 4: symmetric since scalar multiples)")},
        "2-3-2-1: output unchanged": ("T02_homogeneous_rescaling.layer_rescaling_preserves_output",),
        "3-2-2-2: output unchanged": ("T02_homogeneous_rescaling.layer_rescaling_preserves_output",),
        "2-2-1 generic σ, block W1: g' = g/α (α = c)": ("T03_network_law.T3_network_W",),
        "2-2-1 generic σ, block W1: H' = H/α²": ("T03_network_law.T3_network_W",),
        "2-2-1 generic σ, block W2: g' = g/α (α = c**(-k))": ("T03_network_law.T3_network_next_out",),
        "2-2-1 generic σ, block W2: H' = H/α²": ("T03_network_law.T3_network_next_out",),
    },
    "T4": {
        "numerator wᵀHw is invariant (T1)": ("T01_transformation_law.quad_act",),
        "D'/D = (wᵀw·gᵀg)/(wᵀMw·gᵀM⁻¹g); with H = wwᵀ (q_H = (wᵀw)² != 0), (i) => (ii) and (ii) => (i)":
            ("T04_invariance_group.T4_i_ii",),
        "n=2: independent checker accepts the certificate (M = M_00 I)": ("T04_invariance_group.T4_ii_iii",),
        "n=3: independent checker accepts the certificate (M = M_00 I)": ("T04_invariance_group.T4_ii_iii",),
        "hence D'/D = 1 for A = cQ (D' from the two norms above)": ("T04_invariance_group.T4_i_iii",),
        "M diagonal: w = e_i, g = e_j gives factor 1/(M_ii (M⁻¹)_jj) = M_jj/M_ii":
            ("T04_invariance_group.T4_witness_eigen",),
    },
    "T5": {
        "vec(diag(a) W diag(b)^-k) = (diag(b)^-k ⊗ diag(a)) vec(W)":
            ("T05_relu_group.vec_action_neuron_mapE", "T05_relu_group.vec_action_neuron_map"),
        "ratio of entries (i,j), (i',j): a_i/a_i' (b cancels), so equal entries force a uniform":
            ("T05_relu_group.neuron_scaling_W_conformal_iff",),
        "ratio of entries (i,j), (i,j'): (b_j'/b_j)^k, so equal entries force b uniform (t -> t^k injective)":
            ("T05_relu_group.neuron_scaling_W_conformal_iff",),
        "all 2! permutation matrices P satisfy PᵀP = I (block-diagonal of the 2 products)":
            ("T05_relu_group.permutation_b_orthogonal",),
        "all 3! permutation matrices P satisfy PᵀP = I (block-diagonal of the 6 products)":
            ("T05_relu_group.permutation_b_orthogonal",),
    },
    "T6": {
        "H = 0: D = 0, so D' = 0 needs Σ_k g_k w'ᵀ∇²φ_k w' = 0 for all g, w' (Euler: = Σ_k g_k Σ_d d(d-1)φ_k^(d))":
            ("T06_no_nonlinear_extension.pointwise_core",),
        "affine φ = Bw' + a, D' = D for all (g, H, w'): B11**2 - B12**2 + B21**2 - B22**2 lies in the ideal":
            ("T06_no_nonlinear_extension.pointwise_core",),
        "affine φ = Bw' + a, D' = D for all (g, H, w'): B11*B12 + B21*B22 lies in the ideal":
            ("T06_no_nonlinear_extension.pointwise_core",),
        "n=1: every affine φ = s w' + a is admissible: D' = H'/g'² = (φ'²H + gφ'')/(φ'g)² = H/g² = D":
            ("T06_n1_classification.n1_pointwise",),
    },
    "T7": {
        "Penrose 2: XH'X = X": ("T07_pseudo_inverse.T7_pinv_congruence",),
        "Penrose 1: H'XH' = H' for X = AH⁺Aᵀ": ("T07_pseudo_inverse.T7_pinv_congruence",),
        "Penrose 3: (H'X)ᵀ = Q H H⁺ Qᵀ = H'X": ("T07_pseudo_inverse.T7_pinv_congruence",),
        "Penrose 4: (XH')ᵀ = XH'": ("T07_pseudo_inverse.T7_pinv_congruence",),
        "D⁺'/D⁺ = 1": ("T07_pseudo_inverse.T7_Dplus_invariant", "T07_relative_cutoff.T7_cut_Dplus_invariant"),
        "H u = λu  =>  H'(Qu) = c⁻² Q H u (eigenvectors map to eigenvectors)":
            ("T07_relative_cutoff.T7_cut_decomposition",),
        "kept-set test: c⁻²|λ_i| - rtol·c⁻²max|λ| = c⁻²(|λ_i| - rtol·max|λ|)": ("T07_relative_cutoff.cut_invZ",),
        "c⁻² > 0, so the relative cutoff keeps the same eigen-indices": ("T07_relative_cutoff.cut_invZ",),
        "each kept term: (c⁻²λ)⁻¹(Qu)(Qu)ᵀ = c² Q (λ⁻¹uuᵀ) Qᵀ, so H'⁺_τ' = A H⁺_τ Aᵀ":
            ("T07_relative_cutoff.T7_cut_congruence",),
        "T4 (ii) => AᵀA = c²I (certificate n=2)": ("T04_invariance_group.T4_ii_iii",),
        "T4 (ii) => AᵀA = c²I (certificate n=3)": ("T04_invariance_group.T4_ii_iii",),
        "shear: wᵀHw unchanged (T1): (Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw": ("T07_pseudo_inverse.T7_witness_quad",),
        "shear: wᵀH⁺w changes, (Aw)ᵀH'⁺(Aw) / wᵀH⁺w = 1/4 != 1 with the witness's H⁺, H'⁺ (Penrose-checked "
        "above; the checker re-verifies)": ("T07_pseudo_inverse.T7_witness_quad",),
    },
    "T8": {
        "(tH)⁺ = H⁺/t: Penrose 1": ("T08_monotonicity.pinv_scale",),
        "(tH)⁺ = H⁺/t: Penrose 2 (3, 4: scalar multiples of symmetric HH⁺, H⁺H)": ("T08_monotonicity.pinv_scale",),
        "D(tH) = t·D(H)": ("T08_monotonicity.T8_D_scale",),
        "D⁺(tH) = D⁺(H)/t": ("T08_monotonicity.T8_Dplus_scale",),
    },
    "T9": {  # P = Σ⟨∇ℓ_i, f_i⟩, Q = Σ f_iᵀ∇²ℓ_i f_i in grad/hess form (T09_closed_forms_grad), directional (T09_closed_forms)
        # the ray hypothesis F(tw) = t^p F(w) is assumed by the first two names and derived from `net` by T09_network_loss
        **{s: ("T09_closed_forms_grad.T9_closed_forms_grad", "T09_closed_forms.T9_ray_closed_forms",
               "T09_network_loss.T9_net_closed_forms", "T09_network_loss.T9_net_ray_closed_forms") for s in (
            "f(tW_l) = t^p f: wᵀg = d/dt L|_{t=1} = pP", "wᵀHw = d²/dt² L|_{t=1} = p(p-1)P + p²Q")},
        **{s: ("T09_closed_forms_grad.T9_k1_closed_forms_grad", "T09_closed_forms.T9_k1_closed_forms",
               "T09_network_loss.T9_net_k1_bound") for s in (
            "k = 1 (p = 1): wᵀHw = Q for every layer", "k = 1: D_l = (wᵀHw/‖w‖²)/‖g‖² with wᵀHw = Q: = (Q/P²)·cos²∠(w_l, g_l)")}},
    "T10": {
        "d/ds L(sw)|_{s=1} = wᵀg (=0 as L(sw) is constant in s)":
            ("T10_scale_invariant_blocks.scale_invariant_radial", "T10_scale_invariant_blocks.scale_invariant_wg"),
        "∂/∂s ∇_w[L(sw)]|_{s=1} = g + Hw (=0 as ∇_w L(sw) = ∇L(w) is constant in s)":
            ("T10_scale_invariant_blocks.scale_invariant_Hw",),
        **{f"F(w_i/w_n), n={n}: {q}": names for n in (2, 3, 4) for q, names in (
            ("wᵀg = 0", ("T10_scale_invariant_blocks.scale_invariant_wg",)),
            ("Hw = -g", ("T10_scale_invariant_blocks.scale_invariant_Hw",)),
            ("wᵀHw = 0, hence D = wᵀHw/(wᵀw‖g‖²) = 0", ("T10_scale_invariant_blocks.scale_invariant_quad",)))},
    },
    "T11": {
        "numerator of ρ invariant": ("T01_transformation_law.quad_act",),
        "P = wᵀg invariant, so ρ = wᵀHw/P² invariant": ("T11_larger_groups.T11_rho_invariant",),
        "Newton decrement: (T⁻ᵀg)ᵀ(T⁻ᵀHT⁻¹)⁻¹(T⁻ᵀg) = gᵀH⁻¹g": ("T11_larger_groups.T11_newton_invariant",),
        "Newton decrement, n=2 entrywise: (T⁻ᵀg)ᵀ X (T⁻ᵀg) with X = (T⁻ᵀHT⁻¹)⁻¹ computed explicitly":
            ("T11_larger_groups.T11_newton_invariant",),
    },
    "T12": {
        "(sH)⁺ = H⁺/s: Penrose 1": ("T08_monotonicity.pinv_scale",),
        "(sH)⁺ = H⁺/s: Penrose 2 (3, 4: scalar multiples)": ("T08_monotonicity.pinv_scale",),
        "D -> D/s": ("T12_loss_scaling.T12_D",),
        "D⁺ -> s·D⁺": ("T12_loss_scaling.T12_Dplus",),
        "ρ -> ρ/s": ("T12_loss_scaling.T12_rho",),
        "D·D⁺ invariant": ("T12_loss_scaling.T12_product",),
        "instance (singular H, s = 5/2): D -> D/s (D = 5/42)": ("T12_loss_scaling.T12_D",),
        "instance: D⁺ -> s·D⁺ (pinv of rational matrices; D⁺ = 15/7)": ("T12_loss_scaling.T12_Dplus",),
    },
    "T13": {
        "logits: (XW_Q·A)(XW_K·A⁻ᵀ)ᵀ = (XW_Q)(XW_K)ᵀ (2×3 inputs, 3×2 head maps, symbolic A)":
            ("T13_attention.T13_logits",),
        "values: PX(W_V·B)(B⁻¹·W_O^h) = PXW_V·W_O^h (any pattern P, symbolic B)": ("T13_attention.T13_values",),
        "heads: [O_2 O_1]·[W_2; W_1] = [O_1 O_2]·[W_1; W_2] (two heads swapped with W_O's row blocks)":
            ("T13_attention.T13_two_heads_swap", "T13_attention.T13_heads_perm"),
        "query row action: (row r of W_Q·A)ᵀ = Aᵀ·(row r of W_Q)ᵀ, i.e. w -> Aᵀw": ("T13_attention.query_row_action",),
        "key row action: (row r of W_K·A⁻ᵀ)ᵀ = A⁻¹·(row r of W_K)ᵀ, i.e. w -> A⁻¹w": ("T13_attention.key_row_action",),
        "query row under A = c·[[3/5, -4/5], [4/5, 3/5]] (c > 0): D' = D for symbolic w, g, symmetric H":
            ("T13_attention.T13_query_row_D_iff",),
        "key row under A = c·[[3/5, -4/5], [4/5, 3/5]] (c > 0): D' = D for symbolic w, g, symmetric H":
            ("T13_attention.T13_key_row_D_iff",),
    },
    "T14": {
        "and moves a query row by Rᵀ, conformally: D' = D for symbolic w, g, symmetric H (T4)":
            ("T14_gauge_fixing.gauge_fixed_D_invariant",),
        "so the row at the balanced point moves by (A·A_bal)ᵀ = I: the gauge-fixed D'/D = 1 (symbolic w, g, H)":
            ("T14_gauge_fixing.gauge_fixed_D_invariant",),
    },
}


def formal_step(theorem_id: str, description: str) -> tuple[str, ...]:
    """Qualified Coq theorems that state the claim of step ``description`` of ``theorem_id`` in
    general (``()``: none; see :data:`FORMAL_STEPS`).

    >>> formal_step("T12", "D -> D/s")
    ('CoupledCurvature.T12_loss_scaling.T12_D',)
    >>> formal_step("T9", "closed form: q_{j+1} = k·q_j")
    ()
    """
    return tuple(f"CoupledCurvature.{n}" for n in FORMAL_STEPS.get(theorem_id, {}).get(description, ()))
