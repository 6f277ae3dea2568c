"""T6's formal part in the report: the headline theorems in words, each marked by what it is (formal, with
global or local hypotheses as formal_evidence.GLOBAL_PINS decides), and the global pin n1_affine_iff marked
where its statement is shown; a theorem without headlines and global pins gets neither (control)."""

from types import SimpleNamespace as NS

from coupled_curvature.formal_claims import FORMAL_HEADLINES, FORMAL_SCOPE, formal_names
from coupled_curvature.proofs.formal import GLOBAL_PINS, statement_pins
from coupled_curvature.proofs.formal_hypotheses import pin_kind
from coupled_curvature.reporting.markdown import render_markdown
from coupled_curvature.reporting.outline import Outline, Section
from coupled_curvature.reporting.sections import _formal_section


def _md(theorem: str) -> str:
    entry = NS(theorem=theorem, formal=formal_names(theorem), formal_scope=FORMAL_SCOPE.get(theorem))
    return render_markdown(Outline("r", "now", (), (Section(theorem, tuple(_formal_section(entry)), theorem),)))


def test_headlines_are_pinned_under_their_theorem() -> None:
    pins = statement_pins()
    for tid, heads in FORMAL_HEADLINES.items():
        names = {n.removeprefix("CoupledCurvature.") for n, _ in pins[tid]}
        assert heads and all(n in names and len(w) > 40 for n, w in heads), tid


def test_t6_shows_the_global_theorem_and_the_map_theorem_marked_by_what_they_are() -> None:
    md = _md("T6")
    heads = md.split("The headline theorems, in words:")[1]
    glob = next(line for line in heads.splitlines() if "`T06_n1_classification.n1_affine_iff`" in line)
    assert "(`formal`, global hypotheses):" in glob and "φ is affine on R" in glob
    ray = next(line for line in heads.splitlines() if "`T06_map_affine.map_ray_affine_conformal`" in line)
    assert "(`formal`, local hypotheses):" in ray and "φ is affine conformal there" in ray
    # where its statement is shown, the global pin says what it is, with the declared reason
    shown = md.split("`T06_n1_classification.n1_affine_iff`:")[1]
    assert shown.lstrip().startswith("`formal`, global hypotheses: " + GLOBAL_PINS["T06_n1_classification.n1_affine_iff"])
    assert "no check is labelled formal by it" in shown
    inst = md.split("`T06_n1_classification.n1_affine_iff_instance`:")[1]
    assert inst.lstrip().startswith("`formal`, global statement, no hypotheses: the instance of n1_affine_iff")
    assert md.count("no check is labelled formal by it") == sum(n.startswith("T06") for n in GLOBAL_PINS)
    assert "- φ is derivable at every point x of R, with derivative φ′(x) there (global" in shown


def test_kinds_follow_the_declarations_not_the_words() -> None:
    name = "T06_n1_classification.n1_affine_iff"
    stmt = dict(statement_pins()["T6"])["CoupledCurvature." + name]
    assert pin_kind(name, stmt) == "global hypotheses"
    assert pin_kind("X.undeclared", stmt) == "local hypotheses"   # control: the kind comes from GLOBAL_PINS
    # control: a theorem with neither headlines nor global pins shows neither
    md = _md("T12")
    assert "headline theorems" not in md and "global hypotheses" not in md and "`T12_loss_scaling.T12_D`:" in md


def test_the_formal_texts_have_latex_forms() -> None:
    """Every text the formal part shows (scopes, headlines, global reasons, hypotheses in words) has a LaTeX form:
    no character becomes '?' in the PDF; a character without one (″) is caught (control)."""
    from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words
    from coupled_curvature.reporting.latex import tex_text
    from coupled_curvature.reporting.umath import text_latex

    def bad(t: str, maths: bool) -> bool:  # as the report renders it: Text(t, maths)
        return "?" in (text_latex(t, tex_text) if maths else tex_text(t))

    maths = [*FORMAL_SCOPE.values(), *(w for hs in FORMAL_HEADLINES.values() for _, w in hs)]
    plain = [*GLOBAL_PINS.values()]
    plain += [w for ps in statement_pins().values() for _, s in ps for _, w in hypotheses_in_words(s) if w]
    assert [t for t in maths if bad(t, True)] == [] and [t for t in plain if bad(t, False)] == []
    assert bad("φ″ = 0", True) and bad("y ↦ f(y)", False) and bad("β", False)
