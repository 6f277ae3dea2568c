"""Names the command line offers, in a module that imports nothing heavy (no torch).

The parser lists them in its help without paying for torch; the modules that compute the
measures import them from here, so each name is written once.

>>> sorted(WIDTH_MEASURES)[:2]
['D_mean', 'D_median']
"""

from __future__ import annotations

__all__ = ["WIDTH_MEASURES", "WIDTH_GAPS"]

#: measures of the width experiment: name -> what it is
WIDTH_MEASURES: dict[str, str] = {
    "D_mean": "D, mean over tensor blocks",
    "D_median": "D, median over tensor blocks",
    "Dplus_mean": "D⁺, mean over trustworthy tensor blocks",
    "Dplus_median": "D⁺, median over trustworthy tensor blocks",
    "top_eig": "Hessian top eigenvalue (Lanczos)",
    "trace": "Hessian trace (exact)",
    "adaptive_avg": "adaptive sharpness, average case (antithetic common random numbers)",
    "fisher_rao": "Fisher–Rao norm E[(θᵀ∇ℓ)²]",
    "lambda": "input curvature rate λ",
}
#: generalization gaps the width experiment ranks the measures against
WIDTH_GAPS: dict[str, str] = {"gap_loss": "test − train cross-entropy", "gap_err": "test − train error"}
