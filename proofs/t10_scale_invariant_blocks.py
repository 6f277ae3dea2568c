"""T10 -- Scale-invariant blocks: its catalogue entry.

Title, statement and cross-check are read from :mod:`coupled_curvature.theorems`.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry
from coupled_curvature.theorems import get

_THEOREM = get("T10")
THEOREM = _THEOREM.id
TITLE = _THEOREM.title


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T10 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits)
