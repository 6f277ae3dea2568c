"""T9 -- Euler identities.

Bias-free MLP with degree-k activation: wᵀg = pP and wᵀHw = p(p−1)P + p²Q with p = k^{m−l}; for k = 1, D_l = (Q/P²)cos²∠(w_l, g_l).

Numeric cross-check: wᵀg against P and wᵀHw against Q, layer by layer, on bias-free nets.
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.proofs.catalogue import Entry, make_entry

THEOREM = "T9"
TITLE = "Euler identities"
CROSSCHECK = "wᵀg against P and wᵀHw against Q, layer by layer, on bias-free nets"


def build(derivation: Any, numeric: Any = None) -> Entry:
    """The catalogue entry of T9 from its derivation (``None``: numeric only) and cross-check."""
    steps, wits = [], []
    return make_entry(THEOREM, TITLE, derivation, numeric, steps, wits, statement="Bias-free MLP with degree-k activation: wᵀg = pP and wᵀHw = p(p−1)P + p²Q with p = k^{m−l}; for k = 1, D_l = (Q/P²)cos²∠(w_l, g_l).")
