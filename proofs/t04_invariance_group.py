"""T4 -- Exact invariance group: its catalogue entry.

Title, statement and cross-check are read from :mod:`coupled_curvature.theorems`.

No numeric cross-check: exact witnesses; T5 shows the consequence on nets.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, certificate_step, make_entry
from coupled_curvature.theorems import get

_THEOREM = get("T4")
THEOREM = _THEOREM.id
TITLE = _THEOREM.title


def _extra():
    """Re-run the independent checker on fresh certificates for n = 2, 3, 4."""
    pairs = [certificate_step(n) for n in (2, 3, 4)]
    return [s for s, _ in pairs], [w for _, w in pairs]


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T4 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = _extra() if derivation is not None else ([], [])
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits)
