"""The theorem registry: one record per theorem T1–T12, read by every layer.

Each :class:`Theorem` holds the id, the title, the one statement text (the catalogue, the
SymPy derivations and the reports all show this text), where its derivation lives, what its
numeric cross-check measures (``None`` where there is none) and the names of its formal Coq
proofs. This module is plain data and imports only the standard library, so ``symbolic/``
(no torch), ``numeric/`` (no sympy) and ``proofs/`` can all read it.

Notation: for a parameter block with value ``w``, gradient ``g`` and Hessian block ``H``,
``RQ = wᵀHw/wᵀw``, ``D = RQ/‖g‖²``, ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` (``H⁺`` the Moore–Penrose
pseudo-inverse, numerically with a cutoff relative to the block's largest ``|λ_i|``) and
``ρ = wᵀHw/(wᵀg)²``; ``CO(n) = {cQ : c > 0, Q orthogonal}``.

>>> list(THEOREMS)[:3], get("T4").title
(['T1', 'T2', 'T3'], 'Exact invariance group')
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from coupled_curvature.errors import InvalidInputError

__all__ = ["Theorem", "THEOREMS", "FORMAL_SCOPE", "get", "cited", "check_citations", "formal_names",
           "FORMAL_STEPS", "formal_step"]


@dataclass(frozen=True)
class Theorem:
    """One theorem: id, title, statement, derivation ``(module, function)``, cross-check.

    ``derivation`` names a function of ``coupled_curvature.symbolic.<module>`` returning its
    ``Derivation``; ``crosscheck`` says what the numeric cross-check on trained nets measures
    (``None``: the theorem has none). Its Coq theorems: :func:`formal_names`.
    """

    id: str
    title: str
    statement: str
    derivation: tuple[str, str]
    crosscheck: str | None = None


_ALL = (
    Theorem(
        "T1", "Transformation law",
        "For a linear symmetry T (T invertible, L(Tθ) = L(θ) for all θ): ∇L(Tθ) = T⁻ᵀ∇L(θ) and "
        "∇²L(Tθ) = T⁻ᵀ∇²L(θ)T⁻¹. For block-diagonal T = diag(A_1, …, A_B), block b maps as w → Aw, "
        "g → A⁻ᵀg, H → A⁻ᵀHA⁻¹; hence wᵀHw and wᵀg are invariant under every block-diagonal linear symmetry.",
        ("transformation", "derive_T1"),
    ),
    Theorem(
        "T2", "Homogeneous rescaling is a symmetry",
        "For an MLP (or a CNN, channel-wise) whose activation is positively homogeneous of degree k "
        "(σ(cz) = cᵏσ(z) for c > 0), the layer-wise rescaling W_l → cW_l, b_l → cb_l, W_{l+1} → c⁻ᵏW_{l+1} "
        "preserves the output for every input, at any depth and width. So do neuron-wise scalings by a positive "
        "vector a (diag(a) on the rows of W_l and b_l, diag(a)⁻ᵏ on the columns of W_{l+1}) and permutations of "
        "hidden units; max-pooling commutes with a positive per-channel scale.",
        ("homogeneous", "derive_T2"),
        "relative function gap after rescaling chains, permutations and neuron-wise scalings",
    ),
    Theorem(
        "T3", "The c⁻² law",
        "Under T2's layer-wise rescaling: for the blocks W_l and b_l, ‖g‖² and RQ both scale by c⁻² while "
        "wᵀHw, wᵀg, D and D⁺ are unchanged; for the block W_{l+1}, ‖g‖² and RQ both scale by c²ᵏ while D and "
        "D⁺ are unchanged; every other block is untouched.",
        ("homogeneous", "derive_T3"),
        "D and D⁺ changes under random rescaling chains and permutations of trained nets",
    ),
    Theorem(
        "T4", "Exact invariance group",
        "For A ∈ GL(n), n ≥ 2, acting by w → Aw, g → A⁻ᵀg, H → A⁻ᵀHA⁻¹, the following are equivalent: "
        "(i) D is unchanged for all w ≠ 0, g ≠ 0 and symmetric H; (ii) ‖Aw‖·‖A⁻ᵀg‖ = ‖w‖·‖g‖ for all w, g; "
        "(iii) AᵀA = c²I, i.e. A ∈ CO(n). For A ∉ CO(n) a witness exists among standard basis vectors "
        "(M = AᵀA: if some e_i is not an eigenvector of M, w = g = e_i changes D by the factor "
        "1/(M_ii·(M⁻¹)_ii) < 1; otherwise M is diagonal and not scalar, and w = e_i, g = e_j with M_ii ≠ M_jj "
        "works); with eigenvectors of M the factor is exactly κ(A)⁻².",
        ("group", "derive_T4"),
    ),
    Theorem(
        "T5", "ReLU symmetries inside the group",
        "On the per-tensor partition, a neuron-wise scaling (a > 0 this layer's scales, b > 0 the previous "
        "layer's) acts on W_l as vec(W) → (diag(b)⁻ᵏ ⊗ diag(a))·vec(W); it is conformal iff a and b are each "
        "uniform, and on b_l iff a is uniform; permutations are orthogonal. So the subgroup of "
        "{positive neuron scalings ⋊ permutations} that leaves D and D⁺ exactly invariant on every tensor block "
        "is {layer-uniform scalings ⋊ permutations}. On the 'layer' partition (weight and bias together) even a "
        "layer-uniform rescaling of layer l changes D of layer l+1, whose block maps by diag(c⁻ᵏI, I).",
        ("relu_group", "derive_T5"),
        "D change under non-uniform neuron scaling (must be large) and the 'layer' partition control",
    ),
    Theorem(
        "T6", "No nonlinear extension",
        "Let n ≥ 2 and φ: ℝⁿ → ℝⁿ a C² diffeomorphism reparameterizing one block: w = φ(w'), so g' = Jᵀg and "
        "H' = JᵀHJ + Σ_k g_k∇²φ_k (J the Jacobian of φ). If D is unchanged for every C² loss at every point "
        "where it is defined, then φ(w') = cQw' with c > 0 and Q orthogonal. For n = 1, D = H/g² and the "
        "admissible maps are exactly the affine ones w' → sw' + a, s ≠ 0.",
        ("nonlinear", "derive_T6"),
    ),
    Theorem(
        "T7", "Pseudo-inverse variant",
        "For A = cQ (c > 0, Q orthogonal): (A⁻ᵀHA⁻¹)⁺ = AH⁺Aᵀ, so D⁺ is invariant, also with a relative "
        "cutoff. Conversely, invariance of D⁺ for all (w, g, H) forces A ∈ CO(n). For singular H and "
        "non-conformal A even wᵀH⁺w alone can change (pseudo-inversion does not commute with congruence), "
        "unlike wᵀHw (T1); an exact witness is given.",
        ("pseudoinverse", "derive_T7"),
        "D⁺ change under the T3 rescaling chains",
    ),
    Theorem(
        "T8", "Monotonicity and the Laplace connection",
        "Under H → tH (t > 0): D → tD and D⁺ → D⁺/t. Under the Laplace approximation the posterior covariance "
        "is H⁻¹ (H⁺), so wᵀH⁺w/wᵀw is the posterior variance along the block's own direction and "
        "D⁺ = (that variance)·‖g‖². In a Gaussian-posterior PAC-Bayes KL the term ½ log det(H + δI) grows with "
        "curvature and ½ tr((H + δI)⁻¹)/σ² shrinks with it: D moves with curvature opposite to the variance "
        "terms, D⁺ with them. These are exact monotonicity facts; no bound is claimed.",
        ("monotonicity", "derive_T8"),
    ),
    Theorem(
        "T9", "Euler identities",
        "For a bias-free MLP with degree-k activation and m weight layers, the output f is homogeneous of "
        "degree p = k^{m−l} in W_l (fixed activation pattern along the ray). With P = E⟨∇_fℓ, f⟩ and "
        "Q = E[fᵀ∇²_fℓ f]: w_lᵀg_l = pP and w_lᵀH_ll w_l = p(p − 1)P + p²Q. For k = 1 both are the same for "
        "every layer and D_l = (Q/P²)·cos²∠(w_l, g_l) ≤ Q/P².",
        ("homogeneous", "derive_T9"),
        "wᵀg against P and wᵀHw against Q, layer by layer, on bias-free nets",
    ),
    Theorem(
        "T10", "Scale-invariant blocks",
        "If L(sw) = L(w) for all s > 0 (a weight followed by batch-statistics normalization), then wᵀg = 0 "
        "and Hw = −g, so wᵀHw = 0 and D = 0 identically: invariant and uninformative, so such blocks are "
        "flagged.",
        ("degenerate", "derive_T10"),
    ),
    Theorem(
        "T11", "Larger groups: the radial ratio",
        "The radial ratio ρ = wᵀHw/(wᵀg)² is invariant under every block-diagonal linear symmetry (T1), "
        "non-uniform neuron scaling included; it is undefined on scale-invariant blocks (T10); for bias-free "
        "degree-1 nets ρ_l = Q/P² for every layer (T9). The Newton decrement gᵀH⁻¹g is invariant under every "
        "linear symmetry when H is invertible.",
        ("larger_groups", "derive_T11"),
        "ρ change under non-uniform neuron scaling (must stay invariant)",
    ),
    Theorem(
        "T12", "Loss scaling",
        "Under L → sL (s > 0): D → D/s, D⁺ → sD⁺ and ρ → ρ/s, so D·D⁺ is invariant. Sum versus mean "
        "reduction over N samples is this with s = N.",
        ("loss_scaling", "derive_T12"),
        "sum vs mean reduction on trained nets",
    ),
)

#: theorem id -> :class:`Theorem`, in order T1 … T12
THEOREMS: dict[str, Theorem] = {t.id: t for t in _ALL}


def get(theorem_id: str) -> Theorem:
    """The registered theorem ``theorem_id`` (exactly ``"T1"`` … ``"T12"``).

    >>> get("T12").derivation
    ('loss_scaling', 'derive_T12')
    >>> get("T13")
    Traceback (most recent call last):
    ...
    coupled_curvature.errors.InvalidInputError: unknown theorem id 'T13'; valid ids: T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12
    """
    if not isinstance(theorem_id, str) or theorem_id not in THEOREMS:
        raise InvalidInputError(f"unknown theorem id {theorem_id!r}; valid ids: {', '.join(THEOREMS)}")
    return THEOREMS[theorem_id]



def cited(text: str) -> tuple[str, ...]:
    """The theorem ids ``T<number>`` that ``text`` cites, in order of appearance (registered or not).

    >>> cited("T3/T7: D and D⁺ unchanged; T1 gives the block action")
    ('T3', 'T7', 'T1')
    """
    return tuple(re.findall(r"\bT\d+\b", text))


def check_citations(texts: Iterable[str]) -> None:
    """Raise ``InvalidInputError`` if any text cites a theorem id that is not registered.

    >>> check_citations(["T4: A ∉ CO(n)", "no theorem cited"])
    >>> check_citations(["T13: no such theorem"])
    Traceback (most recent call last):
    ...
    coupled_curvature.errors.InvalidInputError: 'T13: no such theorem' cites T13, which is not a registered theorem; valid ids: T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12
    """
    for text in texts:
        for tid in cited(text):
            if tid not in THEOREMS:
                raise InvalidInputError(f"{text!r} cites {tid}, which is not a registered theorem; "
                                        f"valid ids: {', '.join(THEOREMS)}")

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
          "n = 1 pointwise law (D kept for all g, H iff φ'' = 0 at the point); not the global statements "
          "(n = 1 affine classification, C² diffeomorphisms), which assume derivatives everywhere",
    "T7": "the Moore–Penrose inverse constructed and unique, (A⁻ᵀHA⁻¹)⁺ = AH⁺Aᵀ for A ∈ CO(n), D⁺ "
          "invariant, the converse, and an exact singular witness; and the relative-cutoff H⁺_τ that diagnose "
          "computes, given an orthogonal eigendecomposition of H (MathComp 1.15 has no real spectral theorem)",
    "T8": "D → tD and D⁺ → D⁺/t under H → tH, with strict monotonicity; not the Laplace reading",
    "T9": "for a loss positively homogeneous of degree k in a block: wᵀg = k·L (L differentiable at w) and "
          "Hw = (k−1)·g (L differentiable near w, partials derivable at w); the network closed forms for "
          "L = Σ_i ℓ_i(F_i) with F_i(tw) = t^p F_i(w) for t near 1: wᵀg = pP and wᵀHw = p(p−1)P + p²Q with "
          "P = Σ⟨∇ℓ_i(f_i), f_i⟩, Q = Σ f_iᵀ∇²ℓ_i(f_i)f_i (L and each ℓ_i differentiable near the point, partials "
          "differentiable at it; instances p = 1 and p = 2); for p = 1 also D = (Q/P²)·cos² (P ≠ 0); not the "
          "bound D ≤ Q/P² nor the homogeneity of a deep net's outputs",
    "T10": "L(sw) = L(w) gives wᵀg = 0 (L differentiable at w), Hw = −g, wᵀHw = 0 and D = 0 (L "
           "differentiable near w, its partials derivable at w); instance L(x) = (first coordinate of x)²/‖x‖² at x = (1, 1)",
    "T11": "ρ invariant under every invertible block action; the Newton decrement gᵀH⁻¹g invariant under "
           "every invertible linear map (also with H⁺)",
    "T12": "D → D/s, D⁺ → sD⁺, ρ → ρ/s and D·D⁺ unchanged under L → sL",
}



#: per theorem, the derivation steps (by their exact description) whose claim a pinned Coq theorem
#: states in general (any n, depth and width), with those Coq theorems (``<Module>.<name>``, the
#: library prefix ``CoupledCurvature.`` left out). A step listed here gets the trust label
#: ``formal``; steps about one explicit instance or one certificate's arithmetic, the relative
#: cutoff, derivatives in t and the Laplace reading are not listed (no pinned statement says them).
#: A listed theorem's hypotheses are local and a pinned instance shows they can hold
#: (``coupled_curvature.proofs.formal_evidence.FORMAL_INSTANCES``, checked by the tests); T6's
#: n = 1 classification (derivatives everywhere) is not listed, and the permutation end to end
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
        **{s: ("T09_closed_forms_grad.T9_closed_forms_grad", "T09_closed_forms.T9_ray_closed_forms") for s in (
            "f(tW_l) = t^p f: wᵀg = d/dt L|_{t=1} = pP", "wᵀHw = d²/dt² L|_{t=1} = p(p-1)P + p²Q")},
        **{s: ("T09_closed_forms_grad.T9_k1_closed_forms_grad", "T09_closed_forms.T9_k1_closed_forms") for s in (
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
