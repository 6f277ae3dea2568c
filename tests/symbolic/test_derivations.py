"""Every derivation T1–T12 is built and every step passes; witnesses inside are re-checked."""
from __future__ import annotations

import pytest

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.symbolic import THEOREMS, Witness, check_witness, derive

_ALLOWED = ("exact", "groebner", "certificate")


@pytest.fixture(scope="module")
def derivations():
    return {}


@pytest.mark.parametrize("tid", list(THEOREMS))
def test_derivation_is_ok(tid, derivations):
    d = derive(tid)
    derivations[tid] = d
    assert d.theorem == tid
    assert d.steps, "a derivation must have steps"
    failed = [str(s) for s in d.steps if not s.outcome]
    assert not failed, "\n".join(failed)
    assert d.ok
    assert all(s.method in _ALLOWED or s.method.startswith("rewrite:") for s in d.steps)
    assert d.elapsed > 0
    text = str(d)
    assert tid in text and "PROVED" in text
    assert d.latex().startswith("\\paragraph")
    for W in d.witnesses:
        if isinstance(W, Witness):
            assert check_witness(W.to_data())


def test_unknown_theorem_id_lists_valid_ids():
    with pytest.raises(InvalidInputError, match="T1, T2"):
        derive("T13")
