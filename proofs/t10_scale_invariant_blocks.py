"""T10 -- Scale-invariant blocks.

If L(sw) = L(w) for s > 0 then wᵀg = 0, Hw = −g, wᵀHw = 0 and D = 0: invariant and uninformative.

Numeric cross-check: none.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T10"
TITLE = "Scale-invariant blocks"
CROSSCHECK = "none"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T10 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="If L(sw) = L(w) for s > 0 then wᵀg = 0, Hw = −g, wᵀHw = 0 and D = 0: invariant and uninformative.")
