"""T7 -- Pseudo-inverse variant.

D⁺ is invariant under CO(n), also with a relative cutoff; invariance forces CO(n); for singular H even wᵀH⁺w changes under a shear.

Numeric cross-check: D⁺ change under the T3 chains.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T7"
TITLE = "Pseudo-inverse variant"
CROSSCHECK = "D⁺ change under the T3 chains"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T7 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="D⁺ is invariant under CO(n), also with a relative cutoff; invariance forces CO(n); for singular H even wᵀH⁺w changes under a shear.")
