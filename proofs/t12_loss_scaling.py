"""T12 -- Loss scaling.

L -> sL: D -> D/s, D⁺ -> sD⁺, ρ -> ρ/s; D·D⁺ invariant; mean vs sum is s = N.

Numeric cross-check: sum vs mean reduction on trained nets.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T12"
TITLE = "Loss scaling"
CROSSCHECK = "sum vs mean reduction on trained nets"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T12 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="L -> sL: D -> D/s, D⁺ -> sD⁺, ρ -> ρ/s; D·D⁺ invariant; mean vs sum is s = N.")
