"""The report's Coq reader on T9's network pins: a family indexed by samples applied to a point reads
F_i(x) (not F_(i x)), one applied to its index alone stays x_s, and n.+1 keeps its grouping under a
product or a difference ((h+1)·(i+1), a − (b+1)). Expectations written from Coq's precedence, with
controls that nothing else gains parentheses."""

import pytest

from coupled_curvature.proofs.formal import statement_pins
from coupled_curvature.reporting.coq_math import coq_math

FAMILY = "forall (F : 'I_N -> 'cV_n -> 'cV_m) (x : 'I_N -> 'cV_n) (w : 'cV_n) (i : 'I_N), "


def _text(s: str) -> str:
    return " ".join(p.text for p in coq_math(s))


@pytest.mark.parametrize("coq,maths", [
    (FAMILY + "F i w = x i", "Fᵢ(w) = xᵢ"),
    (FAMILY + "F i (t *: w) = t ^+ p *: F i w", "Fᵢ(tw) = t^(p)Fᵢ(w)"),
    ("h.+1 * i.+1 = n", "(h+1) · (i+1) = n"),
    ("a - b.+1 = a.+1 * 2", "a − (b+1) = (a+1) · 2"),
    ("a + b.+1 = c * d", "a + b+1 = c · d"),            # controls: '+' and plain products are left alone
    ("c ^+ 2 * x = y", "c² · x = y"),
])
def test_families_and_successors(coq, maths):
    assert _text(coq).endswith(maths), _text(coq)


def test_network_pins_read_with_applied_families():
    pins = dict(statement_pins()["T9"])
    s = _text(pins["CoupledCurvature.T09_network_loss.T9_net_closed_forms"])
    assert "ellₛ(eval(σ, plug(C, Layer(unflat(v), 0, N)), xₛ))" in s and "(h+1) · (i+1)" in s
    ray = _text(pins["CoupledCurvature.T09_closed_forms.T9_ray_closed_forms"])
    assert "ellᵢ(Fᵢ(v))" in ray and "F_(" not in ray and "ell_(" not in ray
