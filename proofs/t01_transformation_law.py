"""T1 -- Transformation law.

For a linear symmetry T: ∇L(Tθ) = T⁻ᵀ∇L(θ), ∇²L(Tθ) = T⁻ᵀ∇²L(θ)T⁻¹; block-diagonal T acts per block, so wᵀHw and wᵀg are invariant.

Numeric cross-check: none (a symbolic identity; T3, T11 measure its consequences).
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T1"
TITLE = "Transformation law"
CROSSCHECK = "none (a symbolic identity; T3, T11 measure its consequences)"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T1 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="For a linear symmetry T: ∇L(Tθ) = T⁻ᵀ∇L(θ), ∇²L(Tθ) = T⁻ᵀ∇²L(θ)T⁻¹; block-diagonal T acts per block, so wᵀHw and wᵀg are invariant.")
