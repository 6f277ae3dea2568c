"""Hypotheses in words: the premise splitter on hand-worked statements, words for every premise of every
pinned theorem, and nothing invented for a shape the table does not know."""

from __future__ import annotations

import pytest

from coupled_curvature.proofs.formal import statement_pins
from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words, in_words, premises

PINNED = {n: st for ps in statement_pins().values() for n, st in ps}


def test_premises_of_hand_worked_statements():
    # an iff after one premise: '->' inside '<->' is not a premise boundary
    ps, concl = premises("forall (n : nat) (A : 'M_n), A \\in unitmx -> (forall w : 'cV_n, P w) <-> conformal A")
    assert ps == ["A \\in unitmx"] and concl == "(forall w : 'cV_n, P w) <-> conformal A"
    # binders after an arrow, a parenthesised premise with its own arrow, and a let
    ps, concl = premises("forall k : nat, (forall c z : R, 0 < c -> s (c * z) = c * s z) -> forall (x : R), "
                         "let y := x in 0 < x -> x != 0 -> f y = y")
    assert ps == ["forall c z : R, 0 < c -> s (c * z) = c * s z", "0 < x", "x != 0"] and concl == "f y = y"
    assert premises("forall R : rcfType, exists A : 'M_2, A \\in unitmx") == ([], "exists A : 'M_2, A \\in unitmx")


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_premise_of_every_pinned_theorem_has_words(name):
    for premise, words in hypotheses_in_words(PINNED[name]):
        assert words, f"{name}: no words for the premise {premise!r}; add its shape to formal_hypotheses._WORDS"


def test_the_words_name_what_the_premise_says():
    assert in_words("0 < c") == "c > 0"
    assert in_words("Q^T *m Q = 1%:M") == "Q is orthogonal: QᵀQ = I"
    assert in_words("T01_analytic.differentiable_near L w").endswith("neighbourhood of w (local)")
    hess = dict(hypotheses_in_words(PINNED["CoupledCurvature.T01_analytic.hess_comp_linear"]))
    assert any("at Mθ" in w for w in hess.values()) and len(hess) == 2


def test_permutation_block_premises_have_words():
    words = dict(hypotheses_in_words(PINNED["CoupledCurvature.T03_network_perm.T3_permuted_block"]))
    assert len(words) == 3 and all(words.values())
    assert "Q is orthogonal: QᵀQ = I" in words.values()
    assert any("permutes the coordinates" in w for w in words.values())
    assert any(w.startswith("F'(Qv) = F(v)") for w in words.values())


@pytest.mark.parametrize("premise", ["A *m A = A", "forall y : R, differentiable L y", "Q^T *m P = 1%:M",
                                     "0 < c + d", "forall i : 'I_n.+1, exists j : 'I_n.+1, Q^T *m e i = e i"])
def test_unknown_shapes_get_no_words(premise):
    assert in_words(premise) is None
