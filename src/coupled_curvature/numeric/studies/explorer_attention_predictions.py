"""What the theorems predict for each measure under attention's symmetries (T13), reasons citing theorem ids.

Columns (acting on the last attention module of a tiny transformer, and on the Linear that feeds its
head's LayerNorm):

- ``qk_conformal``: ``W_Q -> W_Q·cR``, ``W_K -> W_K·(cR)⁻ᵀ`` on head 0 only (``R`` orthogonal, ``c ≠ 1``):
  conformal on head 0's own q and k blocks, not on the whole tensor;
- ``qk_general``: a general invertible ``A_h`` per head (not conformal anywhere);
- ``vo``: a general invertible ``B_h`` per head on V and the head's rows of O;
- ``head_perm``: the heads relabelled (an orthogonal map of each tensor; per-head blocks swap names and
  are compared under the relabelling);
- ``norm_scale``: ``W -> cW`` of the bias-free Linear before the LayerNorm (a scale-invariant block, T10).

Rows are the registry's measures on tensor blocks, and four more (:data:`EXTRA_MEASURES`): ``D`` and ``D⁺``
on per-head blocks (``blocks="head"``), and ``D`` and ``D⁺`` gauge-fixed (``gauge="balanced"``, T14).
"""

from __future__ import annotations

ATTENTION_SYMMETRIES = ("qk_conformal", "qk_general", "vo", "head_perm", "norm_scale")
#: the rows this explorer adds to the registry's: per-head blocks and the gauge-fixed diagnostic
EXTRA_MEASURES = ("D[head]", "Dplus[head]", "D[gauge]", "Dplus[gauge]")

#: the quantity on each sweep's x axis
ATTENTION_PARAMETERS = {
    "qk_conformal": "scale c of A = c·R on head 0 (R a seeded random rotation)",
    "qk_general": "mixing strength t of A_h = exp(tG_h/√d) per head",
    "vo": "mixing strength t of B_h = exp(tG_h/√d) per head",
    "head_perm": "heads moved by the permutation",
    "norm_scale": "scale c of the Linear before the LayerNorm (W -> cW)",
}
#: the parameter at which each map is the identity
ATTENTION_IDENTITY: dict[str, float | None] = {"qk_conformal": 1.0, "qk_general": 0.0, "vo": 0.0, "head_perm": 0.0,
                                               "norm_scale": 1.0}

I, MV, DG = "invariant", "moves", "degenerate"
_T1 = "T1: H -> T⁻ᵀHT⁻¹ with T not orthogonal"
_PERM = "T1: a head permutation is orthogonal on every tensor"
_SCALE = "T1/T10: the block's Hessian scales by c⁻²"
_TENSOR = "T13/T4: a map of some heads' columns is not conformal on the whole tensor"
_ADAPT_NO = "the set ‖δ/|w|‖ ≤ ρ does not follow a map that mixes a head's columns"
_ADAPT = "the set ‖δ/|w|‖ ≤ ρ follows an element-wise scaling"
_FEATURES = "the map leaves the last layer and the features it reads unchanged"
_T11 = "T11: block-diagonal linear (wᵀg, wᵀHw unchanged)"
_NEWTON = "T11: gᵀH⁻¹g is invariant under every linear map when H is invertible"


def _row(conformal: tuple[str, str], general: tuple[str, str], perm: tuple[str, str],
         norm: tuple[str, str]) -> dict[str, tuple[str, str]]:
    """One measure's predictions: ``general`` holds for both ``qk_general`` and ``vo``."""
    return {"qk_conformal": conformal, "qk_general": general, "vo": general, "head_perm": perm, "norm_scale": norm}


ATTENTION_PREDICTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "top_eig": _row((MV, _T1 + " (c ≠ 1)"), (MV, _T1), (I, _PERM), (MV, _SCALE)),
    "trace": _row((MV, _T1 + " (c ≠ 1)"), (MV, _T1), (I, _PERM), (MV, _SCALE)),
    "sam": _row((MV, "a fixed ℓ2 ball does not follow w -> Tw, T not orthogonal"), (MV, "fixed ℓ2 ball, T not orthogonal"),
                (I, "ball and ascent from 0 are orthogonally equivariant"), (MV, "fixed ℓ2 ball, w -> cw")),
    "adaptive_worst": _row((MV, _ADAPT_NO), (MV, _ADAPT_NO), (I, "ascent from 0 is permutation-equivariant"), (I, _ADAPT)),
    "adaptive_avg": _row((MV, _ADAPT_NO), (MV, _ADAPT_NO),
                         (MV, "common random numbers are tied to coordinate indices: invariant only in distribution"),
                         (I, "common random numbers: " + _ADAPT)),
    "norm_flat": _row((MV, "the Hessian diagonal is not preserved by mixing"), (MV, "the Hessian diagonal is not preserved by mixing"),
                      (I, "a re-indexing of Σ_i"), (I, "element-wise scaling, H_ii -> H_ii/c²")),
    "rel_flat": _row((I, _FEATURES), (I, _FEATURES), (I, _FEATURES), (I, _FEATURES)),
    "fisher_rao": _row((I, "T1: θᵀ∇ℓ_n is unchanged by a linear symmetry"), (I, "T1: θᵀ∇ℓ_n"), (I, "T1: θᵀ∇ℓ_n"),
                       (I, "T1: θᵀ∇ℓ_n")),
    "laplace_logdet": _row((MV, "T1/T8: det(T⁻ᵀHT⁻¹ + δI) ≠ det(H + δI)"), (MV, "T1/T8"), (I, "T1: orthogonal per block"),
                           (MV, "T8: det(c⁻²H + δI)")),
    "D": _row((MV, _TENSOR), (MV, "T4: A, B ∉ CO on the tensor"), (I, "T4/T5: orthogonal on each tensor"),
              (DG, "T10: scale-invariant block, wᵀg = 0, D ≡ 0")),
    "Dplus": _row((MV, "T7: " + _TENSOR), (MV, "T7: not conformal"), (I, "T7: orthogonal"), (I, "T7: conformal cI")),
    "D*Dplus": _row((MV, "T4/T7: " + _TENSOR), (MV, "T4/T7"), (I, "T4/T7: orthogonal"), (DG, "T10: D ≡ 0")),
    "rho": _row((I, _T11), (I, _T11), (I, _T11), (DG, "T10/T11: wᵀg = 0, ρ undefined")),
    "newton": _row((I, _NEWTON), (I, _NEWTON), (I, "T11: orthogonal"),
                   (DG, "T10/T11: scale-invariant block, Hw = −g so gᵀH⁺g = 0")),
    "D[head]": _row((I, "T13/T4: cR is conformal on head 0's q and k blocks"), (MV, "T13/T4: A, B ∉ CO(d) on a head's blocks"),
                    (I, "T13: the heads' blocks are relabelled (compared under the relabelling)"),
                    (DG, "T10: scale-invariant block")),
    "Dplus[head]": _row((I, "T13/T7: conformal on head 0's blocks"), (MV, "T13/T7: not conformal on a head's blocks"),
                        (I, "T13: relabelled blocks"), (I, "T7: conformal cI")),
    "D[gauge]": _row((I, "T14: the balanced point is unique up to per-head orthogonal maps"), (I, "T14: GL(d) per head"),
                     (I, "T14 (T4: heads permuted orthogonally)"), (DG, "T10: the gauge fixes attention, the norm's block stays scale-invariant")),
    "Dplus[gauge]": _row((I, "T14"), (I, "T14: GL(d) per head"), (I, "T14"), (I, "T7: conformal cI on a block the gauge leaves alone")),
}
