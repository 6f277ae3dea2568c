"""The Coq layer in the report: pinned statements as mathematics (md Unicode, html MathML, tex
LaTeX) with the raw Coq kept, the definitions side by side, formal steps naming their theorems.

The translator's expectations below are written from MathComp's notation (``*m`` a matrix
product, ``^T`` a transpose, ``%:M`` a scalar matrix, ``invmx`` an inverse, ``\\in unitmx``
invertible) and the definitions of ``proofs/coq/Defs.v``, not taken from its output.
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.proofs.formal import statement_pins
from coupled_curvature.commands import report as build
from coupled_curvature.reporting.coq_math import coq_math, parse
from _report_data import small_collect

PINS = [(n, s) for ps in statement_pins().values() for n, s in ps]
COQ_TOKENS = ("*m", "*:", "^T", "%:M", "/\\", "->", "<->", "forall", "exists", "\\in", "unitmx", "invmx",
              "^+", "^-", "'M_", "'cV_", "'I_", "rcfType", "normedtype", "Phantom")


def _text(s: str) -> str:
    return " ".join(p.text for p in coq_math(s))


@pytest.mark.parametrize("name,statement", PINS, ids=[n.rsplit(".", 1)[-1] for n, _ in PINS])
def test_every_pinned_statement_reads_as_mathematics(name, statement):
    pieces = coq_math(statement)
    text = " ".join(p.text for p in pieces)
    assert not [t for t in COQ_TOKENS if t in text], text
    assert all(p.tex.isascii() for p in pieces)
    for p in pieces:  # each piece is well-formed MathML
        ET.fromstring(f'<math xmlns="http://www.w3.org/1998/Math/MathML">{p.mathml}</math>')
        assert p.tex.count("{") == p.tex.count("}")


@pytest.mark.parametrize("coq,maths", [
    ("forall (n : nat) (w : 'cV_n), dot w w = sqnorm w", "∀ n ∈ ℕ, w ∈ Rⁿ: wᵀw = ‖w‖²"),
    ("forall A : 'M_n, A \\in unitmx -> conformal A", "∀ A ∈ R^(n×n): A ∈ GL ⇒ A ∈ CO"),
    ("(invmx A)^T *m g = act_g A g", "A⁻ᵀg = A⁻ᵀg"),
    ("act_H A H = (invmx A)^T *m H *m invmx A", "A⁻ᵀHA⁻¹ = A⁻ᵀHA⁻¹"),
    ("A^T *m A = (c ^+ 2)%:M", "AᵀA = (c²)I"),
    ("x ^- 2 * y = 2^-1", "x⁻² · y = 2⁻¹"),
    ("0 < f < 1 /\\ a != b", "0 < f < 1 ∧ a ≠ b"),
    ("[/\\ a = b, c = d & e = f]", "a = b ∧ c = d ∧ e = f"),
    ("~ (exists t : R, M *m v = t *: v)", "¬(∃ t ∈ R: Mv = tv)"),
    ("coupledD w g (t *: H) = t * coupledD w g H", "D(w, g, tH) = t · D(w, g, H)"),
    ("T07_pseudo_inverse.coupledDplus w g H = RQ (pinv H) w * sqnorm g", "D⁺(w, g, H) = RQ(H⁺, w) · ‖g‖²"),
    ("quad (act_H A H) (act_w A w) = quad H w", "(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw"),
    ("derive (fun y : T => k * f y) x v = k * derive f x v", "derive((y ↦ k · f(y)), x, v) = k · derive(f, x, v)"),
    ("prop_near1 x (inPhantom (forall y : T, f y = g y))", "∀y near x: f(y) = g(y)"),
    ("T01_analytic.differentiable_near L w -> grad L w = g", "L differentiable near w ⇒ ∇L(w) = g"),
    ("\\sum_(s < m) ell s", "Σ_(s<m)ell(s)"),
    ("\\row_k k.+1%:R = \\col_j 2", "row(k ↦ k+1) = column(j ↦ 2)"),
    ("\\col_i ((-1) ^+ i *+ 2) = x", "column(i ↦ ((−1)^(i) · 2)) = x"),
    ("c ^+ (k ^ n.+1) = x", "c^(kⁿ⁺¹) = x"),
])
def test_translation_of_the_notation(coq, maths):
    assert _text(coq) == maths


def test_scopes_stay_visible():
    """A quantifier inside a conjunction keeps its parentheses; a sum binds one product."""
    text = _text("forall (K : 'I_n -> 'M_n) (g : 'cV_n), [/\\ forall k : 'I_n, K k = 0, "
                 "exists l : R, l = 0 & J = J + \\sum_k g k 0 *: K k]")
    assert "(∀ k ∈ {0,…,n − 1}: Kₖ = 0) ∧ (∃ l ∈ R: l = 0) ∧ J = J + ΣₖgₖKₖ" in text


def test_precedence_of_the_connectives():
    # Coq: <-> (95) binds tighter than -> (99), /\ (80) tighter than both; * tighter than +
    assert parse("a -> b <-> c") == ("bin", "->", ("id", "a"), ("bin", "<->", ("id", "b"), ("id", "c")))
    assert parse("a + b * c")[1] == "+" and parse("p /\\ q -> r")[1] == "->"


@pytest.mark.parametrize("bad", ["{x | p x}", "a %% b", "forall x, (x", "fun x x"])
def test_unknown_notation_is_refused(bad):
    with pytest.raises(InvalidInputError):
        coq_math(bad)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("coq") / "report"
    mp = pytest.MonkeyPatch()
    mp.setattr(build, "collect", lambda *a, **k: small_collect())
    try:
        build.build_report(str(out), only="T4,T12")
    finally:
        mp.undo()
    return {f: Path(out, f"report.{f}").read_text(encoding="utf-8") for f in ("md", "html", "tex")}


def test_report_shows_each_pinned_statement_three_ways(pages):
    md, html, tex = pages["md"], pages["html"], pages["tex"]
    t12 = dict(statement_pins()["T12"])
    raw = t12["CoupledCurvature.T12_loss_scaling.T12_D"]
    # md: Unicode; the raw Coq in a fenced block inside <details>
    assert "D(w, sg, sH) = D(w, g, H) / s" in md and "```coq\n" + raw + "\n```" in md
    # html: MathML pieces, the raw Coq escaped in a collapsible block
    section = html.split("<section id='T12'>")[1].split("</section>")[0]
    assert "<summary>Coq statement (as coqc prints it)</summary>" in section
    assert "s *: g" in section.replace("&quot;", '"') and "<mo>⇒</mo>" in section
    # tex: LaTeX math, the raw Coq verbatim
    assert r"\Rightarrow" in tex and "\\begin{verbatim}\n" + raw + "\n\\end{verbatim}" in tex
    # every pinned theorem of the two sections is shown, no other
    for tid in ("T4", "T12"):
        for n, _ in statement_pins()[tid]:
            assert f"`{n.removeprefix('CoupledCurvature.')}`:" in md
    assert "T07_pseudo_inverse.T7_iff`:" not in md


def test_definitions_side_by_side(pages):
    md, html, tex = pages["md"], pages["html"], pages["tex"]
    assert "## Definitions: package and Coq" in md and "<section id='definitions'>" in html
    assert "\\section*{Definitions: package and Coq}" in tex
    row = next(line for line in md.splitlines() if line.startswith("| coupled diagnostic D"))
    assert "D = RQ / ‖g‖²" in row and "`coupledD w g H` := RQ(H, w) / ‖g‖²" in row
    act = next(line for line in md.splitlines() if line.startswith("| block action"))
    assert "`act_g A g` := A⁻ᵀg" in act and "`act_H A H` := A⁻ᵀHA⁻¹" in act
    ev = next(line for line in md.splitlines() if line.startswith("| network evaluation"))
    assert "`eval (Layer W b N') x` := eval(N', σ(Wx + b))" in ev


def test_formal_steps_name_their_coq_theorems(pages):
    from coupled_curvature.formal_claims import FORMAL_STEPS

    md = pages["md"]
    t12 = md.split("## T12")[-1]  # T12's table in the appendix of checks
    labelled = [line for line in t12.splitlines() if line.startswith('| <a id="check-T12-') and "`formal`" in line]
    assert len(labelled) == len(FORMAL_STEPS["T12"])
    assert all(line.endswith("` |") and "| `T" in line for line in labelled)
    assert "D -> D/s" not in t12  # the statement is shown in Unicode
    assert any("D → D/s" in line and "`T12_loss_scaling.T12_D`" in line for line in labelled)


def test_a_parenthesized_base_can_break_across_lines():
    """``(x + 1)^2`` leaves its parentheses ungrouped in TeX (a long base may then break); ``(a)(b)`` and a
    bare base stay grouped, so the exponent binds to the whole base."""
    from coupled_curvature.reporting.coq_pieces import identifier, join, operator, parenthesized, superscript

    two = identifier("2")
    long = superscript(parenthesized(join(identifier("x"), operator("+"), identifier("1"))), two)
    assert not long.tex.startswith("{") and long.tex.endswith("^{2}")
    pair = join(parenthesized(identifier("a")), parenthesized(identifier("b")))
    assert superscript(pair, two).tex.startswith("{") and superscript(identifier("x"), two).tex.startswith("{")
