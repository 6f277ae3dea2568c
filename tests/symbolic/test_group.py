"""T4 witnesses and certification on hypothesis-generated rational matrices."""
from __future__ import annotations

from fractions import Fraction

import sympy as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coupled_curvature.symbolic import check_witness, coupled_D, is_conformal, transform, witness

rat = st.fractions(min_value=-4, max_value=4, max_denominator=6).map(lambda f: sp.Rational(f.numerator, f.denominator))
pos = st.fractions(min_value=Fraction(1, 5), max_value=5, max_denominator=6).map(
    lambda f: sp.Rational(f.numerator, f.denominator))


@st.composite
def rotation(draw, n):
    """Rational orthogonal Q: Cayley transform of a rational skew matrix, times a signed permutation."""
    S = sp.zeros(n, n)
    for i in range(n):
        for j in range(i + 1, n):
            S[i, j] = draw(rat)
            S[j, i] = -S[i, j]
    Q = (sp.eye(n) - S) * (sp.eye(n) + S).inv()
    perm = draw(st.permutations(range(n)))
    signs = draw(st.lists(st.sampled_from([1, -1]), min_size=n, max_size=n))
    P = sp.Matrix(n, n, lambda i, j: signs[i] if perm[i] == j else 0)
    return P * Q


@st.composite
def conformal(draw):
    n = draw(st.sampled_from([2, 3]))
    return draw(pos) * draw(rotation(n))


@st.composite
def triple(draw, n):
    w = sp.Matrix([draw(rat) for _ in range(n)])
    g = sp.Matrix([draw(rat) for _ in range(n)])
    H = sp.zeros(n, n)
    for i in range(n):
        for j in range(i, n):
            H[i, j] = H[j, i] = draw(rat)
    assume(any(w) and any(g))
    return w, g, H


@settings(derandomize=True, max_examples=40, deadline=None)
@given(conformal(), st.data())
def test_conformal_matrices_are_certified_invariant(A, data):
    n = A.rows
    M = A.T * A
    assert M == M[0, 0] * sp.eye(n)  # exact: AᵀA = c²I
    assert witness(A) is None
    w, g, H = data.draw(triple(n))
    w2, g2, H2 = transform(A, w, g, H)
    assert coupled_D(w2, g2, H2) == coupled_D(w, g, H)  # exact rationals
    assert (w2.T * w2)[0] * (g2.T * g2)[0] == (w.T * w)[0] * (g.T * g)[0]  # T4 (ii)


@st.composite
def nonconformal(draw):
    n = draw(st.sampled_from([2, 3]))
    A = sp.Matrix(n, n, lambda i, j: draw(rat))
    assume(A.det() != 0)
    assume(not is_conformal(A))
    return A


@settings(derandomize=True, max_examples=60, deadline=None)
@given(nonconformal())
def test_nonconformal_matrices_always_get_a_checked_witness(A):
    W = witness(A)
    assert W is not None and W.factor != 1
    data = W.to_data()
    assert check_witness(data)
    # D'/D recomputed here independently of witness(): T1 action on the witness triple
    w2, g2, H2 = transform(A, W.w, W.g, W.H)
    assert coupled_D(w2, g2, H2) / coupled_D(W.w, W.g, W.H) == W.factor
    # tampering is rejected
    data["factor"] = str(Fraction(data["factor"]) * 2)
    assert not check_witness(data)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(st.sampled_from([2, 3]).flatmap(lambda n: st.lists(pos, min_size=n, max_size=n)))
def test_diagonal_positive_scalings_conformal_iff_uniform(diag):
    A = sp.diag(*diag)
    W = witness(A)
    assert (W is None) == (len(set(diag)) == 1)
    if W is not None:
        assert check_witness(W.to_data())
