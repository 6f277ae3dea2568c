"""T2 -- Homogeneous rescaling is a symmetry.

Layer-wise and neuron-wise positive rescaling and permutations preserve the output of an MLP with a degree-k positively homogeneous activation.

Numeric cross-check: relative function gap after rescaling chains, permutations and neuron-wise scalings.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T2"
TITLE = "Homogeneous rescaling is a symmetry"
CROSSCHECK = "relative function gap after rescaling chains, permutations and neuron-wise scalings"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T2 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="Layer-wise and neuron-wise positive rescaling and permutations preserve the output of an MLP with a degree-k positively homogeneous activation.")
