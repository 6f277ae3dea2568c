"""No user string is ever evaluated: numbers are parsed, code is refused, and nothing runs.

Finding 2 of the first hostile-input battery: ``witness([["__import__('os').system('touch
PWNED') or 1", "0"], ["0", "2"]])`` ran the string, because the validator handed raw entries to
``sympy.Matrix``, which sympifies strings.
"""

from __future__ import annotations

import os
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic import coupled_D, derive, is_conformal, transform, witness
from coupled_curvature.symbolic.exact import exact_matrix, exact_number
from coupled_curvature.symbolic.pseudoinverse import shear_pinv_witness
from coupled_curvature.symbolic.relu_group import kron_action

HOSTILE = [
    "__import__('os').system('touch PWNED') or 1",
    "__import__('pathlib').Path('PWNED').touch() or 2",
    "open('PWNED', 'w').write('x')",
    "exec(\"open('PWNED','w')\")",
    "eval('1+1')",
    "lambda: 1",
    "x + 1",
    "Symbol('x')",
    "1 + 1",
    "2**10000",
    "1e99999999",
    "0x10",
    "1_000",
    "nan",
    "oo",
    "",
]

ENTRY_POINTS = {
    "witness": lambda s: witness([[s, "0"], ["0", "2"]]),
    "is_conformal": lambda s: is_conformal([[s, "0"], ["0", "1"]]),
    "coupled_D": lambda s: coupled_D([s, "1"], ["1", "0"], [["1", "0"], ["0", "1"]]),
    "transform": lambda s: transform([["1", "0"], ["0", s]], ["1", "0"], ["1", "0"], [["1", "0"], ["0", "1"]]),
    "shear_pinv_witness": lambda s: shear_pinv_witness(A=[["1", s], ["0", "1"]]),
    "kron_action": lambda s: kron_action([s, "1"], ["1"]),
}


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_hostile_string_is_refused_and_runs_nothing(entry, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match="plain number|divides by zero") as info:
        ENTRY_POINTS[entry](text)
    assert "Fraction" in str(info.value)  # says how to pass numbers
    assert os.listdir(tmp_path) == []  # nothing executed: no PWNED file


def test_witness_regression_creates_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError):
        witness([["__import__('os').system('touch PWNED') or 1", "0"], ["0", "2"]])
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("A,factor", [
    ([["1", "0"], ["0", "2"]], 4),
    ([[1, 1], [0, 1]], sp.Rational(1, 2)),
    ([[Fraction(1, 2), 0], [0, 1]], 4),  # M = diag(1/4, 1): factor M_22/M_11
    (sp.Matrix([[1, 0], [0, 3]]), 9),
])
def test_numbers_in_every_exact_form_still_work(A, factor):
    """Negative control: plain numbers as ints, strings, Fractions or SymPy pass and give the witness."""
    assert witness(A).factor == factor
    assert witness([["3", "-4"], ["4", "3"]]) is None  # conformal: no witness


@pytest.mark.parametrize("bad", [1.5, float("nan"), True, None, object(), sp.Symbol("x"), sp.sqrt(2), [1, 2], "1/0"])
def test_non_rational_entries_are_refused(bad):
    with pytest.raises(InvalidInputError):
        witness([[bad, 0], [0, 1]])


@pytest.mark.parametrize("shape", [[[1, 2]], [[1], [2]], [[1, 2], [3]], [], "12", 5, [[[1]]]])
def test_bad_shapes_are_refused(shape):
    with pytest.raises(InvalidInputError):
        exact_matrix(shape)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_parsed_exactly_or_refused(text):
    """A string either is a plain number (then the value is Fraction's) or is refused; never evaluated."""
    try:
        value = exact_number(text)
    except InvalidInputError:
        return
    num, _, den = text.partition("/")
    expected = Fraction(num.strip()) / (Fraction(den.strip()) if den else 1)
    assert value == sp.Rational(expected.numerator, expected.denominator)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.fractions(), st.integers(min_value=1, max_value=10**6))
def test_fraction_strings_round_trip(p, d):
    assert exact_number(str(p)) == sp.Rational(p.numerator, p.denominator)
    assert exact_number(f"{p.numerator} / {d}") == sp.Rational(p.numerator, d)


@pytest.mark.parametrize("text", HOSTILE[:6])
def test_theorem_ids_are_names_not_code(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match="valid ids"):
        derive(text)
    assert os.listdir(tmp_path) == []
