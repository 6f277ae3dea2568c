"""T6 -- No nonlinear extension.

A C² reparameterization of a block (n ≥ 2) that leaves D unchanged for every loss is conformal linear; for n = 1 exactly the affine maps.

Numeric cross-check: none.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T6"
TITLE = "No nonlinear extension"
CROSSCHECK = "none"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T6 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="A C² reparameterization of a block (n ≥ 2) that leaves D unchanged for every loss is conformal linear; for n = 1 exactly the affine maps.")
