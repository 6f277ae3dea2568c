"""The theorem registry: one record per theorem T1–T14, read by every layer.

Each :class:`Theorem` holds the id, the title, the one statement text (the catalogue, the
SymPy derivations and the reports all show this text), where its derivation lives, what its
numeric cross-check measures (``None`` where there is none). What the Coq development states of
each theorem is in :mod:`coupled_curvature.formal_claims`. This module is plain data and imports only the standard library, so ``symbolic/``
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

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["Theorem", "THEOREMS", "get", "cited", "check_citations"]


@dataclass(frozen=True)
class Theorem:
    """One theorem: id, title, statement, derivation ``(module, function)``, cross-check.

    ``derivation`` names a function of ``coupled_curvature.symbolic.<module>`` returning its
    ``Derivation``; ``crosscheck`` says what the numeric cross-check on trained nets measures
    (``None``: the theorem has none). Its Coq theorems: :func:`coupled_curvature.formal_claims.formal_names`.
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
    Theorem(
        "T13", "Attention's symmetry group",
        "For one head with Q = XW_Q, K = XW_K, V = XW_V and the head's rows W_O^h of the output map: "
        "W_Q → W_Q·A, W_K → W_K·A⁻ᵀ (any invertible A) leaves the logits QKᵀ unchanged; W_V → W_V·B, "
        "W_O^h → B⁻¹·W_O^h (any invertible B) leaves the output unchanged; heads can be permuted together "
        "with the row blocks of W_O; a linear map followed by LayerNorm or RMSNorm (without a bias in between) "
        "is scale invariant (T10). Each row of W_Q maps as w → Aᵀw and each row of W_K as w → A⁻¹w, so by T4 and T7 "
        "D and D⁺ of a per-head row block are exact under A iff A = cQ (c > 0, Q orthogonal); a general A "
        "has a witness. Whole fused tensors (c_attn, in_proj_weight) are not exact even under a per-head cQ "
        "with c ≠ 1.",
        ("attention", "derive_T13"),
        "function gap and D of the Q weight under qk_transform: A = c·I on all heads (D unchanged), a "
        "non-conformal A (output unchanged, D moves), a per-head cQ on a fused in_proj_weight (D moves)",
    ),
    Theorem(
        "T14", "Gauge-fixed diagnostic",
        "Let G act on parameters by function-preserving linear maps, and let θ → θ* pick in each orbit a "
        "representative unique up to a map that is conformal on every block. Then D(θ*) and D⁺(θ*) are invariant "
        "under all of G. For a Q/K pair (W_Q, W_K of one head, d × h) the balanced representative W_Q* = UΣ^{1/2}, "
        "W_K* = VΣ^{1/2} from the SVD W_Q·W_Kᵀ = UΣVᵀ has (W_Q*)ᵀ(W_Q*) = Σ = (W_K*)ᵀ(W_K*) and "
        "(W_Q*)(W_K*)ᵀ = W_Q·W_Kᵀ; it depends on the orbit only, and two balanced pairs of one orbit differ by an "
        "orthogonal A (W_Q of full column rank), which acts conformally on every row block; the same holds for "
        "V/O. For ReLU neuron rescaling, each unit scaled by c = √(‖out‖/‖in‖) has equal incoming and outgoing "
        "norms √(‖in‖·‖out‖), whatever positive rescaling came before. So the gauge-fixed D is unchanged under a non-conformal A, "
        "under which the raw D moves (T4). This does not contradict T4–T7: those concern D as a function of "
        "(w, g, H) at one point; T14 evaluates it at a chosen point of the orbit.",
        ("gauge", "derive_T14"),
        "D of every block at the balanced point (gauge='balanced') under random non-conformal per-head A on "
        "Q/K and B on V/O (unchanged) against the raw D (moves), on trained nn.MultiheadAttention classifiers; "
        "the same under non-uniform ReLU neuron rescaling of a trained MLP",
    ),
)

#: theorem id -> :class:`Theorem`, in order T1 … T14
THEOREMS: dict[str, Theorem] = {t.id: t for t in _ALL}


def get(theorem_id: str) -> Theorem:
    """The registered theorem ``theorem_id`` (exactly ``"T1"`` … ``"T14"``).

    >>> get("T12").derivation
    ('loss_scaling', 'derive_T12')
    >>> get("T15")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: unknown theorem id 'T15'; valid ids: T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14
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
    >>> check_citations(["T15: no such theorem"])
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: 'T15: no such theorem' cites T15, which is not a registered theorem; valid ids: T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14
    """
    for text in texts:
        for tid in cited(text):
            if tid not in THEOREMS:
                raise InvalidInputError(f"{text!r} cites {tid}, which is not a registered theorem; "
                                        f"valid ids: {', '.join(THEOREMS)}")
