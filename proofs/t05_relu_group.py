"""T5 -- ReLU symmetries inside the group.

On tensor blocks, neuron-wise scaling is conformal iff layer-uniform; permutations are orthogonal; the 'layer' partition breaks invariance of the next layer.

Numeric cross-check: D change under non-uniform neuron scaling (must be large) and the 'layer' partition control.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T5"
TITLE = "ReLU symmetries inside the group"
CROSSCHECK = "D change under non-uniform neuron scaling (must be large) and the 'layer' partition control"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T5 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="On tensor blocks, neuron-wise scaling is conformal iff layer-uniform; permutations are orthogonal; the 'layer' partition breaks invariance of the next layer.")
