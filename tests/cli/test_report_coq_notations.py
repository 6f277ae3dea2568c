"""The report's Coq reader on mathcomp-analysis' notations, as the analytic pins print them since the printing
context (formal.PREAMBLE) imports the analysis libraries: 'cV[R]_(n.+1), \\forall y \\near x, \\near x,
'D_v f x, differentiable f x, realType."""

from __future__ import annotations

import pytest

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.reporting.coq_math import coq_math


def _text(coq: str) -> str:
    return " ".join(p.text for p in coq_math(coq))


@pytest.mark.parametrize("coq,maths", [
    ("forall (R : realType) (L : 'cV[R]_(n.+1) -> R^o) (w : 'cV[R]_(n.+1)), differentiable L w -> L w = 0",
     "∀ R: real numbers, L : R⁽ⁿ⁺¹⁾ → R, w ∈ R⁽ⁿ⁺¹⁾: L differentiable at w ⇒ L(w) = 0"),
    ("(\\forall y \\near x, f y = g y) -> 'D_v f x = 'D_v g x",
     "∀y near x: f(y) = g(y) ⇒ derive(f, x, v) = derive(g, x, v)"),
    ("(\\near x0, d2phi x0 = 0) -> 'D_(c *: v) f x = c * 'D_v f x",
     "near x0: φ″(x0) = 0 ⇒ derive(f, x, cv) = c · derive(f, x, v)"),
    ("forall w : 'cV[R]_2, w = w", "∀ w ∈ R²: w = w"),
])
def test_analysis_notation_reads_as_mathematics(coq, maths):
    assert _text(coq) == maths


@pytest.mark.parametrize("raw", ["\\forall y, f y = 0", "\\near , f x = 0", "'D_ f x"])
def test_broken_analysis_notation_is_refused(raw):
    """Negative controls: a quantifier without its point, or a derivative without its arguments, is an error."""
    with pytest.raises(InvalidInputError):
        coq_math(raw)


def test_the_trace_reads_as_a_function():
    """`\\tr M` (T14's tr_gram_eq0) is the trace applied to M; without the rule the parser stopped on it."""
    from coupled_curvature.reporting.coq_math import coq_math

    text = " ".join(p.text for p in coq_math(r"forall (R : rcfType) (M : 'M_(2, 3)), \tr (M^T *m M) = 0 -> M = 0"))
    assert "tr(MᵀM) = 0 ⇒ M = 0" in text
