"""Names and bounds the command line offers, in a module that imports nothing heavy (no torch).

The parser lists and checks them without paying for torch; the modules that compute import
them from here, so each is written once.

>>> sorted(WIDTH_MEASURES)[:2]
['D_mean', 'D_median']
"""

from __future__ import annotations

__all__ = ["WIDTH_MEASURES", "WIDTH_GAPS", "MIN_DPS", "MAX_DPS"]

#: digits of the mpmath routes: 15 is float64's; above 1000 Python's int-to-string limits break them
MIN_DPS, MAX_DPS = 15, 1000

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
