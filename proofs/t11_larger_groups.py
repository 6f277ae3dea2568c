"""T11 -- Larger groups: the radial ratio.

ρ = wᵀHw/(wᵀg)² is invariant under every block-diagonal linear symmetry; for bias-free degree-1 nets ρ_l = Q/P²; the Newton decrement is invariant.

Numeric cross-check: ρ change under non-uniform neuron scaling (must stay invariant).
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T11"
TITLE = "Larger groups: the radial ratio"
CROSSCHECK = "ρ change under non-uniform neuron scaling (must stay invariant)"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T11 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="ρ = wᵀHw/(wᵀg)² is invariant under every block-diagonal linear symmetry; for bias-free degree-1 nets ρ_l = Q/P²; the Newton decrement is invariant.")
