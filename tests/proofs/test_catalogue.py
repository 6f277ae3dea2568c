"""Catalogue verdicts: trust labels, and negative controls that must come out "failed"."""

import copy

import pytest
import sympy as sp

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.proofs import derivation, entry, parse_only
from coupled_curvature.proofs.catalogue import build_entry, evaluate, make_entry, trust_label
from coupled_curvature.proofs.crosschecks import NumericCheck
from coupled_curvature.symbolic.derivation import Derivation, Step
from coupled_curvature.symbolic.methods import StepMethod

c, g = sp.symbols("c g", positive=True)


def test_trust_labels():
    methods = [StepMethod.of(m) for m in ("exact", "groebner", "certificate")] + [StepMethod.rewrite("orthogonality")]
    assert [trust_label(m) for m in methods] == ["exact", "exact", "certificate", "rewrite"]
    for untyped in ("simplify", "rewrite:orthogonality"):
        with pytest.raises(InvalidInputError):
            trust_label(untyped)


def test_parse_only():
    assert parse_only("t6,T4") == ["T4", "T6"]
    assert len(parse_only(None)) == 14
    for bad in ("T15", "", "T4,X"):
        with pytest.raises(InvalidInputError, match="valid ids"):
            parse_only(bad)


def _demo(rhs, outcome=True, method="exact"):
    d = Derivation("T0", "‖g'‖² = c⁻²‖g‖²", ["c > 0"])
    d.add(Step("gradient norm law", c**-2 * g**2 * c**0, rhs, method, outcome))
    return d.finish()


def test_correct_step_is_proved():
    assert evaluate(make_entry("T0", "demo", _demo(g**2 / c**2))).status == "proved"


def test_wrong_exponent_recorded_as_ok_is_caught():
    # the step claims success, but the exponent is wrong: the catalogue re-verifies and fails it
    st = evaluate(make_entry("T0", "demo", _demo(g**2 / c**3, outcome=True)))
    assert st.status == "failed"
    assert "gradient norm law" in st.reasons[0] and "re-verified" in st.reasons[0]


def test_corrupted_real_theorem_fails():
    d = copy.deepcopy(derivation("T12"))
    k = next(i for i, s in enumerate(d.steps) if s.method.kind == "exact" and isinstance(s.rhs, sp.Basic)
             and s.rhs.has(sp.Pow))
    s = d.steps[k]
    base, exp = next((p.base, p.exp) for p in s.rhs.atoms(sp.Pow) if p.exp.is_number)
    d.steps[k] = Step(s.description, s.lhs, s.rhs.subs(base**exp, base ** (exp + 1)), s.method, True)
    st = evaluate(entry_from(d))
    assert st.status == "failed" and any(s.description in r for r in st.reasons)
    assert evaluate(entry_from(derivation("T12"))).status == "proved"  # the cache was not touched


def entry_from(d):
    return build_entry("T12", d)


def test_failed_recorded_outcome_fails():
    assert evaluate(make_entry("T0", "demo", _demo(c, outcome=False, method="groebner"))).status == "failed"


def test_numeric_step_is_not_proof():
    d = _demo(g**2 / c**2)
    d.steps[0] = Step("measured on a net", 1.0, 1.0, "exact", True)
    e = make_entry("T0", "demo", d)
    e.steps[0].label = "numeric"
    st = evaluate(e)
    assert st.status == "failed" and "evidence, not proof" in st.reasons[0]


def test_empty_derivation_fails():
    assert evaluate(make_entry("T0", "demo", Derivation("T0", "nothing"))).status == "failed"


def test_tampered_witness_is_rejected():
    d = copy.deepcopy(derivation("T4"))
    d.witnesses[0].factor = d.witnesses[0].factor + 1
    st = evaluate(entry_from_t4(d))
    assert st.status == "failed" and any("check_witness" in r for r in st.reasons)


def entry_from_t4(d):
    return build_entry("T4", d)


def test_numeric_disagreement_fails_and_evidence_only():
    bad = NumericCheck("T12", "p", "fig", 1.0, False, [{"net": "n", "quantity": "q", "measured": 1.0,
                                                          "bound": "≤ 1e-10", "agrees": False}])
    st = evaluate(make_entry("T0", "demo", _demo(g**2 / c**2), numeric=bad))
    assert st.status == "failed" and "numeric disagrees" in st.reasons[0]
    good = NumericCheck("T12", "p", "fig", 0.0, True, [])
    assert evaluate(make_entry("T0", "demo", None, numeric=good)).status == "evidence"
    assert evaluate(make_entry("T0", "demo", None)).status == "failed"


def test_entries_name_their_coq_theorems_and_scope():
    from coupled_curvature.proofs import entry, formal

    e4, e9 = entry("T4", symbolic=False), entry("T9", symbolic=False)
    assert list(e4.formal) == formal.formal_theorems()["T4"] and "every n" in e4.formal_scope
    # T9: the Euler identities and the network closed forms in P and Q (the latter label derivation steps)
    assert list(e9.formal) == formal.formal_theorems()["T9"] and "closed forms" in e9.formal_scope
