"""Data classes, exact-equality machinery, witness generator and the independent checker."""
from __future__ import annotations

import copy
from fractions import Fraction

import pytest
import sympy as sp

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic import (
    Derivation, Step, Witness, certificate, check_certificate, check_pinv_witness, check_witness, coupled_D,
    transform, witness,
)
from coupled_curvature.symbolic.derivation import exact_equal
from coupled_curvature.symbolic.pseudoinverse import shear_pinv_witness


def test_exact_equal_accepts_identity_and_rejects_non_identity():
    x, y = sp.symbols("x y")
    assert exact_equal((x + y) ** 3, x**3 + 3 * x**2 * y + 3 * x * y**2 + y**3)
    assert not exact_equal((x + y) ** 2, x**2 + y**2)
    assert exact_equal(sp.Matrix([x / (x + 1), 1]), sp.Matrix([1 - 1 / (x + 1), 1]))
    assert not exact_equal(sp.Matrix([x, 1]), sp.Matrix([x, 2]))
    assert not exact_equal(sp.Matrix([x, 1]), sp.Matrix([x, 1, 0]))


def test_step_rejects_unknown_method():
    with pytest.raises(ValueError):
        Step("bad", 1, 1, "numeric", True)


def test_derivation_ok_requires_steps_and_all_passing():
    d = Derivation("TX", "demo")
    assert not d.ok  # no steps
    x = sp.Symbol("x")
    d.exact("true", (x - 1) * (x + 1), x**2 - 1)
    assert d.ok
    d.exact("false", (x - 1) * (x + 1), x**2 + 1)
    assert not d.ok
    text = str(d.finish())
    assert "FAIL" in text and "NOT PROVED" in text
    assert "align*" in d.latex() and "x^{2}" in d.latex()


def test_negative_control_D_invariant_under_diag_1_2_is_rejected():
    """The false claim 'D is invariant under diag(1, 2)' fails in the same machinery."""
    A = sp.diag(1, 2)
    w, g = sp.Matrix(sp.symbols("w1 w2")), sp.Matrix(sp.symbols("g1 g2"))
    h11, h12, h22 = sp.symbols("h11 h12 h22")
    H = sp.Matrix([[h11, h12], [h12, h22]])
    d = Derivation("neg", "D invariant under diag(1,2)")
    d.exact("D' = D", coupled_D(*transform(A, w, g, H)), coupled_D(w, g, H))
    assert not d.ok and d.steps[0].outcome is False
    # while the true claim (wᵀHw invariant) passes in the same machinery
    w2, _, H2 = transform(A, w, g, H)
    d2 = Derivation("pos", "wᵀHw invariant")
    d2.exact("wᵀHw", (w2.T * H2 * w2)[0], (w.T * H * w)[0])
    assert d2.ok


def test_negative_control_wrong_exponent_in_c_law_is_rejected():
    c = sp.Symbol("c", positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    g = sp.MatrixSymbol("g", n, 1)
    d = Derivation("neg", "‖g'‖² = c⁻³‖g‖²")
    d.exact("wrong exponent", (g / c).T * (g / c), c**-3 * g.T * g)
    assert not d.ok
    d2 = Derivation("pos", "‖g'‖² = c⁻²‖g‖²")
    d2.exact("right exponent", (g / c).T * (g / c), c**-2 * g.T * g)
    assert d2.ok


def _D_fraction(w, g, H):
    wHw = sum(w[i] * H[i][j] * w[j] for i in range(len(w)) for j in range(len(w)))
    return wHw / sum(x * x for x in w) / sum(x * x for x in g)


def test_witness_examples_have_the_spec_factors():
    W = witness(sp.diag(1, 2))  # diagonal non-scalar: factor M_jj/M_ii = 4
    assert isinstance(W, Witness) and W.factor == 4
    W = witness(sp.Matrix([[1, 1], [0, 1]]))  # shear: M = [[1,1],[1,2]], 1/(M11 (M⁻¹)11) = 1/2
    assert W.factor == sp.Rational(1, 2)
    # hand computation with Fractions for the shear: w' = (1, 0), g' = (1, -1), H' = diag(1, 0)
    assert _D_fraction([1, 0], [1, -1], [[1, 0], [0, 0]]) / _D_fraction([1, 0], [1, 0], [[1, 0], [0, 0]]) == Fraction(1, 2)
    assert witness(sp.Matrix([[3, -4], [4, 3]]) / 5 * 7) is None


@pytest.mark.parametrize(
    "bad",
    [sp.Matrix([[1, 2, 3], [4, 5, 6]]), sp.Matrix([[1.5, 0], [0, 1]]), sp.Matrix([[1, 1], [1, 1]]), sp.Matrix([[2]]),
     sp.Matrix([[sp.sqrt(2), 0], [0, 1]]), "not a matrix"],
)
def test_witness_rejects_bad_input(bad):
    with pytest.raises(InvalidInputError):
        witness(bad)


def test_checker_rejects_tampered_witness():
    data = witness(sp.Matrix([[2, 1, 0], [0, 1, 0], [0, 0, 3]])).to_data()
    assert check_witness(data)
    t = copy.deepcopy(data)
    t["factor"] = str(Fraction(data["factor"]) + Fraction(1, 7))
    assert not check_witness(t)
    t = copy.deepcopy(data)
    t["factor"] = "1"
    assert not check_witness(t)
    t = copy.deepcopy(data)
    t["H"][0][1] = "5"  # non-symmetric H
    assert not check_witness(t)
    t = copy.deepcopy(data)
    t["A"] = [["1", "0", "0"], ["0", "1", "0"], ["0", "0", "1"]]  # identity: factor would be 1
    assert not check_witness(t)
    assert not check_witness({"A": [[1, 0], [0, 0]], "w": [1, 0], "g": [1, 0], "H": [[1, 0], [0, 0]], "factor": "2"})


def test_checker_is_independent_of_the_rest_of_symbolic():
    import ast
    import pathlib

    import coupled_curvature.symbolic.checker as chk

    tree = ast.parse(pathlib.Path(chk.__file__).read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert mods == {"fractions"}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_certificate_accepted_and_tampering_rejected(n):
    cert = certificate(n)
    assert check_certificate(cert)
    t = copy.deepcopy(cert)
    t["targets"][0]["combination"][1][1][0][0] = "1"  # M00/2 -> M00: combination no longer equals target
    assert not check_certificate(t)
    t = copy.deepcopy(cert)
    t["targets"].pop()  # a required conclusion is missing
    assert not check_certificate(t)
    t = copy.deepcopy(cert)
    t["targets"][0]["target"][0][0] = "2"  # claims 2*M01 but the name says M01
    assert not check_certificate(t)
    t = copy.deepcopy(cert)
    t["targets"][-1]["combination"][0][0][0] = 1  # cites a hypothesis that does not exist
    assert not check_certificate(t)
    t = copy.deepcopy(cert)
    t["n"] = n + 1
    assert not check_certificate(t)


def test_pinv_witness_checked_and_tampering_rejected():
    W = shear_pinv_witness()
    assert check_pinv_witness(W) and (W["before"], W["after"]) == ("1", "1/4")
    t = dict(W, after="1")
    assert not check_pinv_witness(t)
    t = dict(W, Hp2=[["1", "0"], ["0", "0"]])  # not the pseudo-inverse
    assert not check_pinv_witness(t)
    # conformal map: the value does not change, so it is no witness
    assert not check_pinv_witness(shear_pinv_witness(A=[[0, 2], [-2, 0]]) | {"after": "1/4"})


def test_step_method_is_typed_and_carries_its_rule():
    from coupled_curvature.symbolic.methods import MethodKind, StepMethod

    m = StepMethod.rewrite("penrose")
    assert (m.kind, m.rule, str(m)) == (MethodKind.REWRITE, "penrose", "rewrite:penrose")
    assert Step("ok", 1, 1, "groebner", True).method == StepMethod(MethodKind.GROEBNER)
    for bad in (lambda: StepMethod(MethodKind.EXACT, "penrose"), lambda: StepMethod(MethodKind.REWRITE),
                lambda: StepMethod.of("rewrite:penrose"), lambda: StepMethod("exact")):
        with pytest.raises(ValueError):
            bad()
