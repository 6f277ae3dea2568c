"""T3 -- The c⁻² law.

Under layer-wise rescaling, ‖g‖² and RQ of the rescaled blocks scale by c⁻² (c^{2k} on the next weight), while wᵀHw, wᵀg, D and D⁺ are unchanged.

Numeric cross-check: D and D⁺ changes under random rescaling chains and permutations (the issue-2 check).
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T3"
TITLE = "The c⁻² law"
CROSSCHECK = "D and D⁺ changes under random rescaling chains and permutations (the issue-2 check)"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T3 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="Under layer-wise rescaling, ‖g‖² and RQ of the rescaled blocks scale by c⁻² (c^{2k} on the next weight), while wᵀHw, wᵀg, D and D⁺ are unchanged.")
