"""Unevaluated claim forms: they are evaluated before the exact test, so a false claim stays false
however it is displayed (negative controls), and they print as the computation, not its value."""
from __future__ import annotations

import copy

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.matrices.expressions.matexpr import MatrixElement

from coupled_curvature.symbolic.derivation import Derivation, Step, exact_equal, is_zero_exact
from coupled_curvature.symbolic.evaluation import At, at, evaluate
from coupled_curvature.symbolic.unevaluated import Form, PseudoInverse, TexSymbol, frac, matmul, prod, quadratic_scalar

x, y, c = sp.symbols("x y c")
n = sp.Symbol("n", integer=True, positive=True)
A, H = sp.MatrixSymbol("A", n, n), sp.MatrixSymbol("H", n, n)
w, g = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("g", n, 1)
cp = sp.Symbol("c", positive=True)


# (true claim, false claim sharing its left side): each form is checked both ways
PAIRS = {
    "quotient": (frac(2 * x, x), 2, 1),
    "nested quotient": (frac(frac(x, y), frac(x, y)), 1, 2),
    "product": (prod(c, c**-2, c), 1, c),
    "Form (bilinear pull-out)": (Form(matmul(sp.Transpose(matmul(cp, w)), matmul(cp**-2, H), matmul(cp, w))),
                                 Form(w.T * H * w), cp**2 * Form(w.T * H * w)),
    "Form of explicit matrices": (Form(matmul(sp.Matrix([[1, 2]]), sp.Matrix([3, 4]))), 11, 12),
    "matmul of matrix symbols": (matmul(A.I, A, w), w, matmul(A, w)),
    "Derivative": (sp.Derivative(x**3, x), 3 * x**2, 3 * x),
    "Subs of a Derivative": (sp.Subs(sp.Derivative(x**3 * y, x), x, 2), 12 * y, 8 * y),
    "At (substitution)": (at(x**2 + y, {x: c * x}), c**2 * x**2 + y, x**2 + y),
    "matrix of At": (at(sp.Matrix([x, x * y]), {x: 2 * x}), sp.Matrix([2 * x, 2 * x * y]), sp.Matrix([x, x * y])),
    "inverse entry": (MatrixElement(sp.Inverse(sp.ImmutableMatrix(sp.diag(x, y))), 1, 1), 1 / y, y),
    "transposed inverse": (sp.Transpose(sp.Inverse(sp.ImmutableMatrix([[1, 1], [0, 1]]))), sp.Matrix([[1, 0], [-1, 1]]),
                           sp.Matrix([[1, -1], [0, 1]])),
    "pseudo-inverse": (PseudoInverse(sp.Matrix([[2, 0], [0, 0]])), sp.diag(sp.Rational(1, 2), 0),
                       sp.diag(sp.Rational(1, 2), sp.Rational(1, 2))),
    "trace of an inverse": (sp.Trace(sp.Inverse(sp.ImmutableMatrix(sp.diag(x, y)))), 1 / x + 1 / y, 1 / (x + y)),
    "UnevaluatedExpr": (sp.UnevaluatedExpr(x / y) * y, x, x / y),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_true_claim_passes_and_false_claim_fails(name):
    lhs, good, bad = PAIRS[name]
    assert exact_equal(lhs, good), name
    assert not exact_equal(lhs, bad), name
    d = Derivation("neg", name)
    d.exact("true", lhs, good)
    d.exact("false", lhs, bad)
    assert [s.outcome for s in d.steps] == [True, False]
    assert not d.ok


def test_unevaluated_side_prints_the_computation_not_its_value():
    for name, (lhs, good, _bad) in PAIRS.items():
        assert sp.sstr(lhs) != sp.sstr(sp.sympify(good)), name
    step = Derivation("demo", "demo").exact("D'/D for A = cQ", frac(frac(x, c**2 * y), frac(x, y)), 1 / c**2)
    assert "(x/(c**2*y))/(x/y)" in str(step)
    assert r"\frac{\frac{x}{c^{2} y}}{\frac{x}{y}}" in step.latex()
    f = PAIRS["Form (bilinear pull-out)"][0]
    assert sp.sstr(f) == "[(c*w).T*(c**(-2)*H)*(c*w)]" and r"\left[" in sp.latex(f)


def test_sums_and_integrals_are_never_evaluated():
    """Their closed forms come from SymPy heuristics, not exact methods: such claims stay unproved."""
    k = sp.Symbol("k", integer=True)
    s = sp.Sum(k, (k, 1, n))
    assert not exact_equal(s, n * (n + 1) / 2)
    assert exact_equal(s, s)  # the same object is trivially equal
    assert not exact_equal(prod(sp.Derivative(x**2, x), sp.Integral(x, (x, 0, 1))), x)


def test_wrapping_does_not_turn_a_false_claim_true_under_the_catalogue():
    """A recorded-ok step with an unevaluated false left side is caught on re-verification."""
    from coupled_curvature.proofs.catalogue import evaluate as verdict
    from coupled_curvature.proofs.catalogue import make_entry

    d = Derivation("T0", "demo", ["c > 0"])
    d.add(Step("c-law with a wrong exponent", frac(Form(matmul(sp.Transpose(matmul(1 / cp, g)), matmul(1 / cp, g))),
                                                  Form(g.T * g)), cp**-3, "exact", True))
    assert verdict(make_entry("T0", "demo", d.finish())).status == "failed"


def test_no_variable_can_hide_inside_a_symbol_name():
    """A scalar inside a quadratic-form word, or a substituted variable inside a named symbol, would
    escape substitution: the first is refused, the second leaves the substitution opaque (unproved)."""
    t = sp.Symbol("t")
    with pytest.raises(ValueError, match="not a product of matrix symbols"):
        quadratic_scalar(w.T * (t * sp.Identity(n) + H) * w)
    assert quadratic_scalar(w.T * (t * H) * w) == t * quadratic_scalar(w.T * H * w)  # pulled out: fine
    q = TexSymbol("q_t", t * x, real=True)  # a name that stands for t·x
    assert not exact_equal(at(q, {t: 2}), q) and not exact_equal(At(q, (t,), (2,)), q)
    assert exact_equal(at(t * q, {t: 2}), at(t * q, {t: 2}))  # only the trivial identity


def test_at_validates_and_survives_deepcopy():
    with pytest.raises(ValueError):
        At(x, (x, x), (1, 2))
    with pytest.raises(ValueError):
        At(x, (x + 1,), (1,))
    with pytest.raises(ValueError):
        Form(sp.MatrixSymbol("w", 2, 1))
    s = at(x**2, {x: 2 * y})
    assert copy.deepcopy(s) == s and evaluate(copy.deepcopy(s)) == 4 * y**2


def test_is_zero_exact_evaluates_forms():
    assert is_zero_exact(frac(x, x) - 1)
    assert not is_zero_exact(frac(2 * x, x) - 1)
    assert is_zero_exact(sp.Matrix([sp.Derivative(x**2, x) - 2 * x, 0]))


small = st.integers(min_value=-5, max_value=5)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(st.lists(small, min_size=3, max_size=3), st.lists(small, min_size=3, max_size=3), small)
def test_quotient_of_random_polynomials(p, q, shift):
    num = sum(ci * x**i for i, ci in enumerate(p))
    den = sum(ci * x**i for i, ci in enumerate(q)) + x**3  # monic cubic: never zero
    assert exact_equal(frac(num, den), sp.cancel(num / den))
    assert exact_equal(frac(num, den), num / den + shift) == (shift == 0)
