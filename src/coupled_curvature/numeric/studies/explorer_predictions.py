"""What the theorems predict for each cell of the invariance matrix, and how a cell is judged.

:data:`PREDICTIONS` maps measure → symmetry → ``(prediction, reason)``, the reasons citing theorem
ids (tests check them against the registry :mod:`coupled_curvature.theorems`; numeric/ imports
neither the front door nor the proofs package). :func:`judge` compares one measured deviation with its prediction.

BatchNorm with ``eps > 0`` is a symmetry only in the limit: ``BN(cz) = (z − μ)/√(σ² + eps/c²)``
differs from ``BN(z)`` by ``O(eps·|1/c² − 1|/σ²)``. A measure that is invariant under the exact
symmetry then changes by ``C·eps^p`` with ``p ≈ 1``; :func:`eps_limit` fits ``p`` on a sweep of
larger eps and predicts, out of sample, the deviation at the run's own eps. A cell passes "invariant
as eps → 0" only if the order is at least :data:`MIN_ORDER` and the run's deviation is within
:data:`SLACK` of that prediction, so a measure that truly moves (order ≈ 0) fails it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.studies.stats import loglog_slope

SYMMETRIES = ("layer", "neuron", "perm", "bn", "orthogonal", "gl", "nonlinear", "loss")

I, MV, DG = "invariant", "moves", "degenerate"
_EW = "element-wise scaling θ_i → a_iθ_i"
_ADAPT = f"the set ‖δ/|w|‖ ≤ ρ follows {_EW}"
_MIX, _CRN, _LS, _INC = "mixing is not element-wise", "common random numbers", "L → sL scales the", "loss increase by s"
_DIAG = "the Hessian diagonal is not preserved by mixing"
_NL_SET = "the set ‖δ/|w|‖ ≤ ρ is not mapped to itself by a nonlinear φ"
# Non-conformal block maps w -> Aw: gᵀH⁺g is invariant iff g ∈ range(H) (or H invertible). For
# Gauss–Newton-exact Linear/Conv blocks H = BᵀB, g = Bᵀs, so it is, and the measure's factor route
# computes ‖P_range(B) s‖² (range(BA⁻¹) = range(B)) instead of cutting H's spectrum at a relative
# τ, which is covariant only under conformal A (genuine eigenvalues near τ cross it).
_NEWTON_RANGE = ("T11: g = Bᵀs ∈ range(H_bb = BᵀB), so gᵀH⁺g = ‖P_range(B) s‖² and range(BA⁻¹) = range(B) "
                 "(factor route; the pseudo-inverse route with a relative cutoff is not covariant here)")
# (prediction, reason) per measure and symmetry; symmetries act on the last hidden layer.
PREDICTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "top_eig": {"layer": (MV, "T3: blocks scale by c^∓2"), "neuron": (MV, "T1: H -> A⁻ᵀHA⁻¹, A non-orthogonal"),
                "perm": (I, "T1: orthogonal T keeps the spectrum"), "bn": (MV, "T1: block scales by c⁻²"),
                "orthogonal": (I, "T1: orthogonal T keeps the spectrum"), "gl": (MV, "T1, A non-orthogonal"),
                "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ"), "loss": (MV, "T12: H -> sH")},
    "trace": {"layer": (MV, "T3"), "neuron": (MV, "T1"), "perm": (I, "T1: orthogonal T"), "bn": (MV, "T1"),
              "orthogonal": (I, "T1: orthogonal T"), "gl": (MV, "T1"), "nonlinear": (MV, "T6"), "loss": (MV, "T12")},
    "sam": {"layer": (MV, "fixed ℓ2 radius while T3 rescales the blocks by c and c⁻ᵏ"),
            "neuron": (MV, "fixed ℓ2 radius: the ball does not follow w → Aw"),
            "perm": (I, "ball and ascent from 0 are orthogonally equivariant"),
            "bn": (MV, "fixed ℓ2 radius: the ball does not follow w → cw"),
            "orthogonal": (I, "ball and ascent from 0 are orthogonally equivariant"),
            "gl": (MV, "fixed ℓ2 radius: A non-orthogonal does not map the ball to itself"),
            "nonlinear": (MV, "T6: a fixed ℓ2 ball in φ is not a fixed ℓ2 ball in θ"),
            "loss": (MV, f"{_LS} worst-case {_INC}")},
    "adaptive_worst": {"layer": (I, _ADAPT), "neuron": (I, _ADAPT), "perm": (I, "ascent from 0 is permutation-equivariant"),
                       "bn": (I, _ADAPT), "orthogonal": (MV, _MIX), "gl": (MV, _MIX), "nonlinear": (MV, _NL_SET),
                       "loss": (MV, f"{_LS} worst-case {_INC}")},
    "adaptive_avg": {"layer": (I, f"{_CRN}: {_ADAPT}"), "neuron": (I, f"{_CRN}: {_ADAPT}"),
                     "perm": (MV, f"{_CRN} are tied to coordinate indices: invariant only in distribution"),
                     "bn": (I, f"{_CRN}: {_ADAPT}"), "orthogonal": (MV, _MIX), "gl": (MV, _MIX), "nonlinear": (MV, _NL_SET),
                     "loss": (MV, f"{_LS} average {_INC}")},
    "norm_flat": {"layer": (I, f"{_EW}, H_ii → H_ii/a_i²"), "neuron": (I, _EW), "perm": (I, "re-indexing of Σ_i"),
                  "bn": (I, _EW), "orthogonal": (MV, _DIAG), "gl": (MV, _DIAG),
                  "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ, and |φ_i| is not proportional to |θ_i|"),
                  "loss": (MV, "2Σ_i |w_i|√H_ii scales by √s")},
    "rel_flat": {"layer": (I, "uniform column scaling of the last layer"), "neuron": (MV, "non-uniform column scaling"),
                 "perm": (I, "column permutation"), "bn": (I, "last layer untouched"),
                 "orthogonal": (I, "orthogonal column mixing"), "gl": (MV, "non-orthogonal column mixing"),
                 "nonlinear": (MV, "T6: H' = JᵀHJ + Σg∇²φ is not a congruence of H"), "loss": (MV, "κ scales by s")},
    "fisher_rao": {"layer": (I, "T1: θᵀ∇ℓ_n under linear symmetries"), "neuron": (I, "T1"), "perm": (I, "T1"), "bn": (I, "T1"),
                   "orthogonal": (I, "T1"), "gl": (I, "T1"), "nonlinear": (MV, "T6: φᵀ(h'⊙∇ℓ) ≠ θᵀ∇ℓ"), "loss": (MV, "T12: s²")},
    "laplace_logdet": {"layer": (MV, "T3/T8: det(c⁻²H+δI)"), "neuron": (MV, "T1"), "perm": (I, "T1: orthogonal per block"),
                       "bn": (MV, "T8"), "orthogonal": (I, "T1: orthogonal per block"), "gl": (MV, "T1"),
                       "nonlinear": (MV, "T6"), "loss": (MV, "T8/T12")},
    "lambda": {s: (I, "depends on the function only") for s in SYMMETRIES[:-1]}
    | {"loss": (I, "log|s d_n| = log s + log|d_n|: slope unchanged")},
    "D": {"layer": (I, "T3"), "neuron": (MV, "T5: non-uniform scaling is not conformal"), "perm": (I, "T5: orthogonal"),
          "bn": (DG, "T10: scale-invariant block, wᵀg = 0, D ≡ 0"), "orthogonal": (I, "T4: CO(n)"),
          "gl": (MV, "T4: A ∉ CO(n)"), "nonlinear": (MV, "T6"), "loss": (MV, "T12: D/s")},
    "Dplus": {"layer": (I, "T3/T7"), "neuron": (MV, "T7"), "perm": (I, "T7"), "bn": (I, "T7: conformal cI"),
              "orthogonal": (I, "T7"), "gl": (MV, "T7"), "nonlinear": (MV, "T6"), "loss": (MV, "T12: sD⁺")},
    "D*Dplus": {"layer": (I, "T3/T7"), "neuron": (MV, "T5/T7"), "perm": (I, "T7"), "bn": (DG, "T10: D ≡ 0"),
                "orthogonal": (I, "T4/T7"), "gl": (MV, "T4/T7"), "nonlinear": (MV, "T6"), "loss": (I, "T12: D·D⁺ invariant")},
    "rho": {"layer": (I, "T11"), "neuron": (I, "T11: block-diagonal linear"), "perm": (I, "T11"),
            "bn": (DG, "T10/T11: wᵀg = 0, ρ undefined"), "orthogonal": (I, "T11"), "gl": (I, "T11: block-diagonal linear"),
            "nonlinear": (MV, "T6"), "loss": (MV, "T12: ρ/s")},
    "newton": {"layer": (I, "T11"), "neuron": (I, _NEWTON_RANGE), "perm": (I, "T11"),
               "bn": (DG, "T10/T11: scale-invariant block, Hw = −g so gᵀH⁺g = wᵀHw = −wᵀg = 0"),
               "orthogonal": (I, "T11"), "gl": (I, _NEWTON_RANGE), "nonlinear": (MV, "T6"), "loss": (MV, "T12: s·gᵀH⁺g")},
}


def judge(predicted: str, deviation: float | None, degenerate: bool, *, tol_invariant: float = 1e-9,
          tol_moves: float = 1e-3) -> bool:
    """Agreement of one cell with its prediction: "invariant" iff ``deviation ≤ tol_invariant``,
    "moves" iff ``deviation ≥ tol_moves``, "degenerate" iff the measure flags the blocks (T10).

    >>> judge("invariant", 1e-12, False), judge("moves", 1e-6, False), judge("degenerate", None, True)
    (True, False, True)
    """
    if predicted == DG:
        return degenerate
    if deviation is None:
        return False
    return deviation <= tol_invariant if predicted == I else deviation >= tol_moves


#: the least fitted order ``p`` of ``deviation ∝ eps^p`` that counts as "→ 0 as eps → 0" (expected 1)
MIN_ORDER = 0.75
#: the run's deviation may exceed the eps law's out-of-sample prediction by at most this factor
SLACK = 10.0
EXPECTED_ORDER = 1.0


@dataclass
class EpsLimit:
    """One cell judged as eps → 0: the deviation at each eps (decreasing; the last is the run's own),
    the function gap at each, the orders fitted on the larger eps, the run's deviation predicted from
    them and whether the cell agrees with "invariant as eps → 0"."""

    eps: list[float]
    deviations: list[float | None]
    gaps: list[float]
    order: float | None
    gap_order: float | None
    predicted: float | None
    measured: float | None
    tolerance: float
    agrees: bool
    expected_order: float = EXPECTED_ORDER

    def to_dict(self) -> dict:
        return asdict(self)


def _power_law(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[float | None, float | None]:
    """``(p, log₁₀ C)`` of the least-squares fit ``log₁₀ y = log₁₀ C + p·log₁₀ x`` over ``y > 0``."""
    p = loglog_slope(xs, ys)
    pts = [(math.log10(x), math.log10(y)) for x, y in zip(xs, ys) if y is not None and y > 0.0]
    if p is None:
        return None, None
    return p, sum(v for _, v in pts) / len(pts) - p * sum(u for u, _ in pts) / len(pts)


def eps_limit(eps: Sequence[float], deviations: Sequence[float | None], gaps: Sequence[float], *,
              tolerance: float) -> EpsLimit:
    """Judge "invariant as eps → 0" from deviations at decreasing ``eps`` (the last is the run's eps).

    Fit ``deviation = C·eps^p`` on all but the last point; predict ``C·eps_run^p``; agree iff
    ``p ≥ MIN_ORDER`` and the run's deviation ``≤ max(SLACK·C·eps_run^p, tolerance)``. Then the
    deviation → 0 as eps → 0 (``C·0^p = 0``), and the one measured at the run is the eps effect.

    >>> ok = eps_limit([1e-6, 1e-8, 1e-10, 1e-12], [3e-3, 3e-5, 3e-7, 3e-9], [1e-5, 1e-7, 1e-9, 1e-11], tolerance=1e-9)
    >>> round(ok.order, 2), f"{ok.predicted:.1e}", ok.agrees
    (1.0, '3.0e-09', True)
    >>> eps_limit([1e-6, 1e-8, 1e-10, 1e-12], [0.08, 0.08, 0.08, 0.08], [0.0] * 4, tolerance=1e-9).agrees
    False
    """
    if len(eps) != len(deviations) or len(eps) < 3:
        raise InvalidInputError(f"eps_limit needs at least three eps values with one deviation each, got "
                                f"{len(eps)} eps and {len(deviations)} deviations: pass e.g. eps_run·(1e4, 1e3, 1e2, 1)")
    p, logc = _power_law(eps[:-1], deviations[:-1])
    gap_order = loglog_slope(eps, gaps)
    predicted = None if p is None or logc is None else 10.0 ** (logc + p * math.log10(eps[-1]))
    measured = deviations[-1]
    agrees = (p is not None and predicted is not None and measured is not None and p >= MIN_ORDER
              and measured <= max(SLACK * predicted, tolerance))
    return EpsLimit(list(eps), list(deviations), list(gaps), p, gap_order, predicted, measured, tolerance, agrees)
