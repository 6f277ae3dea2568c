"""Every theorem T1–T14 is followed by a proof a reader can follow: displayed steps, each with an
evidence label that links to the row of the appendix where its check is recorded; no raw Coq
outside the appendix.

The report holds all fourteen theorems' steps (:func:`_report_data.all_theorems_data`). The scans
(:func:`proof_of`, :func:`dangling`, :func:`raw_coq_in_body`) are shown to fail on planted bugs.
"""

import re
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from _report_data import all_theorems_data
from coupled_curvature.reporting.outline import Proof
from coupled_curvature.reporting.proof_text import OWN, PROOFS, matched, proof
from coupled_curvature.reporting.umath import normalise

THEOREMS = [f"T{i}" for i in range(1, 15)]


def proof_of(tex: str, theorem: str) -> str | None:
    """The body of the proof environment that follows ``theorem``'s statement (before the next theorem)."""
    start = tex.find(rf"\begin{{catalogue}}{{{theorem}}}")
    if start < 0:
        return None
    nxt = tex.find(r"\begin{catalogue}", start + 1)
    part = tex[start:nxt if nxt > 0 else len(tex)]
    m = re.search(r"\\begin\{proof\}(.*?)\\end\{proof\}", part, re.S)
    return m.group(1) if m else None


def displays(body: str) -> list[str]:
    return re.findall(r"\\begin\{equation\*\}(.*?)\\end\{equation\*\}", body, re.S)


def untagged(body: str) -> list[str]:
    """The displays of a proof without an evidence label on their right."""
    return [d for d in displays(body) if not re.search(r"\\tag\*\{\\evidence\{[^}]+\}\{[^}]+\}\}", d)]


def dangling(tex: str) -> list[str]:
    """Link targets of the LaTeX source with no anchor: ``\\evidence``/``\\hyperlink`` without a
    ``\\hypertarget``, ``\\hyperref[...]``/``\\ref`` without a ``\\label``."""
    targets = set(re.findall(r"\\hypertarget\{([^}]+)\}", tex))
    labels = set(re.findall(r"\\label\{([^}]+)\}", tex))
    links = [x for x in re.findall(r"\\(?:evidence|hyperlink)\{([^}]+)\}", tex) if not x.startswith("#")]
    refs = re.findall(r"\\hyperref\[([^\]]+)\]|\\ref\{([^}]+)\}", tex)
    return ([x for x in links if x not in targets]
            + [a or b for a, b in refs if (a or b) not in labels])


def raw_coq_in_body(tex: str) -> list[str]:
    """Verbatim or lstlisting blocks (raw Coq) before the appendix starts, and library internals."""
    body = tex.split(r"\appendix", 1)[0]
    return (re.findall(r"\\begin\{(?:verbatim|lstlisting)\}.{0,60}", body, re.S)
            + re.findall(r".{0,30}NormedModule\.sort.{0,30}", body))


def html_dangling(html: str) -> list[str]:
    ids = set(re.findall(r"""\bid=['"]([^'"]+)['"]""", html))
    return [h for h in re.findall(r"""href=['"]#([^'"]+)['"]""", html) if h not in ids]


def md_dangling(md: str) -> list[str]:
    ids = set(re.findall(r'<a id="([^"]+)"></a>', md))
    return [h for h in re.findall(r"\]\(#([^)]+)\)", md) if h not in ids]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from coupled_curvature.reporting.build import write_report

    out = Path(write_report(str(tmp_path_factory.mktemp("proofs") / "rep"), ["md", "html", "tex"],
                            *all_theorems_data()))
    return {f: (out / f"report.{f}").read_text(encoding="utf-8") for f in ("md", "html", "tex")}


@pytest.fixture(scope="module")
def outline_proofs():
    from coupled_curvature.reporting.sections import build_outline

    o = build_outline(all_theorems_data()[0])
    return {s.id: next(b for b in s.blocks if isinstance(b, Proof)) for s in o.sections
            if s.id in THEOREMS and any(isinstance(b, Proof) for b in s.blocks)}


def test_the_scans_catch_planted_bugs():
    good = (r"\begin{catalogue}{T1}{Law}x\end{catalogue}\begin{proof}Since $a$,"
            "\n\\begin{equation*}\na=b\n\\tag*{\\evidence{check-T1-1}{exact}}\n\\end{equation*}\n\\end{proof}"
            r"\appendix\hypertarget{check-T1-1}{}\begin{verbatim}Theorem x.\end{verbatim}")
    assert proof_of(good, "T1") and len(displays(proof_of(good, "T1"))) == 1 and untagged(proof_of(good, "T1")) == []
    assert dangling(good) == [] and raw_coq_in_body(good) == []
    # a theorem without a proof, a display without its label, a label without its anchor, raw Coq in the body
    assert proof_of(r"\begin{catalogue}{T1}{Law}x\end{catalogue}\section*{next}", "T1") is None
    assert untagged("\\begin{equation*}\na=b\n\\end{equation*}")
    assert dangling(good.replace(r"\hypertarget{check-T1-1}{}", "")) == ["check-T1-1"]
    assert dangling(r"\hyperref[sec:checks-T9]{the checks}") == ["sec:checks-T9"]
    assert raw_coq_in_body(r"\begin{verbatim}Theorem x.\end{verbatim}\appendix")
    assert raw_coq_in_body(r"$normedtype.NormedModule.sort (R)$\appendix")
    assert html_dangling("<a href='#check-T1-2'>exact</a><tr id='check-T1-1'>") == ["check-T1-2"]
    assert md_dangling('[`exact`](#check-T1-2) <a id="check-T1-1"></a>') == ["check-T1-2"]


@pytest.mark.parametrize("theorem", THEOREMS)
def test_every_theorem_has_a_proof_with_labelled_displayed_steps(pages, outline_proofs, theorem):
    body = proof_of(pages["tex"], theorem)
    assert body is not None, f"{theorem} has no proof environment"
    steps = outline_proofs[theorem].steps
    assert displays(body) and untagged(body) == []
    # one evidence label per step: on the display's right, or at the end of a step without one
    assert body.count(r"\evidence{") == len(steps) >= 2
    assert len(displays(body)) == sum(1 for s in steps if s.formula is not None)
    # the same proof in HTML and Markdown, a label beside each step
    section = pages["html"].split(f"<section id='{theorem}'>")[1].split("</section>")[0]
    proof_html = section.split("<div class='proof'>")[1].split("</div>")[0]
    assert proof_html.count("<a class='evidence") == len(steps) and 'display="block"' in proof_html
    md = pages["md"].split(f"## {theorem} — ")[1].split("\n## ")[0]
    assert md.count("](#check-") == len(steps) and "$$" in md.split("*Proof.*")[1]


def test_every_link_lands_on_an_anchor(pages):
    assert dangling(pages["tex"]) == []
    assert html_dangling(pages["html"]) == []
    assert md_dangling(pages["md"]) == []


def test_no_raw_coq_outside_the_appendix(pages):
    tex = pages["tex"]
    assert raw_coq_in_body(tex) == []
    assert r"\begin{verbatim}" in tex.split(r"\appendix", 1)[1]  # the raw listings are kept, in the appendix
    assert "Instance:" not in tex and "(checked by" not in tex  # the per-step checklist is gone from the body


def test_written_proofs_rest_on_the_derivations():
    """Every written step of T1–T14 picks at least one derivation step, and its formula is a piece of
    one of those steps' own statements (a drifted derivation fails here, not silently in the report)."""
    entries = all_theorems_data()[0].check.entries
    assert set(THEOREMS) <= set(PROOFS)
    for t in THEOREMS:
        statements = [normalise(s.description) for s in entries[t].steps]
        for said in PROOFS[t]:
            idx = matched(said, statements)
            assert idx, (t, said.match)
            assert said.show in (None, OWN) or any(said.show in statements[i] for i in idx), (t, said.show)


def test_evidence_is_the_label_field_and_a_failure_shows():
    step = NS(description="D → D/s", label="numeric", passed=True, lhs=None, rhs=None)
    bad = NS(description="D⁺ → s·D⁺", label="exact", passed=False, lhs=None, rhs=None)
    p = proof("T12", [step, bad])
    by = {s.formula.text: s for s in p.steps if s.formula is not None}
    assert by["D → D/s"].evidence == ("numeric",) and by["D → D/s"].passed
    assert not by["D⁺ → s·D⁺"].passed and by["D⁺ → s·D⁺"].target == "check-T12-2"
    # a written step with nothing to rest on is left out; a formula not in the statement is not shown
    assert all("sum reduction" not in s.reason.lower() for s in p.steps)
    assert proof("T12", [NS(description="instance (singular H): D unchanged", label="exact", passed=True, lhs=None,
                            rhs=None)]).steps[0].formula is None


def test_a_theorem_without_written_steps_gets_its_formal_claims():
    steps = [NS(description="x = x", label="exact", passed=True, lhs=None, rhs=None),
             NS(description="y = y", label="formal", passed=True, lhs=None, rhs=None)]
    p = proof("T99", steps)
    assert [s.target for s in p.steps] == ["check-T99-2"] and p.steps[0].evidence == ("formal",)


def uncited(tex: str) -> list[str]:
    """``\\cite`` keys without a ``\\bibitem``, and ``\\bibitem`` keys nothing cites."""
    cites = {k for ks in re.findall(r"\\cite\{([^}]+)\}", tex) for k in ks.split(",")}
    items = set(re.findall(r"\\bibitem\[[^\]]*\]\{([^}]+)\}", tex))
    return sorted(cites ^ items)


def test_figures_stand_in_the_theorem_that_cites_them(pages):
    tex = pages["tex"]
    assert r"\section*{Figures}" not in tex and "<section id='figures'>" not in pages["html"]
    for name, theorem, after in (("rescaling", "T3", "T4"), ("neuron_scaling", "T5", "T6")):
        section = tex.split(rf"\section*{{{theorem} ---")[1].split(rf"\section*{{{after} ---")[0]
        assert rf"{{{name}.png}}" in section, name
        html = pages["html"].split(f"<section id='{theorem}'>")[1].split("</section>")[0]
        assert f"id='fig-{name}'" in html


def test_cited_results_are_in_the_bibliography(pages):
    tex = pages["tex"]
    assert uncited(tex) == [] and tex.count(r"\bibitem[") >= 4
    assert uncited(r"\cite{penrose1955}") == ["penrose1955"]  # negative control: a citation with no entry
    assert uncited(r"\bibitem[X 2000]{x2000} X.") == ["x2000"]  # and an entry nothing cites
    html, md = pages["html"], pages["md"]
    assert "<li id='ref-penrose1955'>" in html and "href='#ref-penrose1955'" in html
    assert '<a id="ref-penrose1955"></a>' in md and "](#ref-penrose1955)" in md
