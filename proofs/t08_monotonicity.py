"""T8 -- Monotonicity and the Laplace connection.

Under H -> tH: D -> tD and D⁺ -> D⁺/t; D⁺ moves with the Laplace posterior-variance terms, D against them; no bound is claimed.

Numeric cross-check: none (T12 measures the H -> sH case through loss scaling).
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T8"
TITLE = "Monotonicity and the Laplace connection"
CROSSCHECK = "none (T12 measures the H -> sH case through loss scaling)"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T8 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="Under H -> tH: D -> tD and D⁺ -> D⁺/t; D⁺ moves with the Laplace posterior-variance terms, D against them; no bound is claimed.")
