"""Every rendered page (md, html, tex) reads as mathematics: no SymPy internal reaches it.

The report is built for all twelve theorems (symbolic steps only, the small collection's figures
and sections) and each page is scanned for internal names (``matrixslice``, generated function
names such as ``l2_1``, spelled-out ``sigma``), Python/SymPy spellings (``**``, ``Symbol(``,
``Matrix(``, ``True``/``False`` as values) and abbreviation placeholders. A planted internal
shows that the scan can fail.
"""

import re
from pathlib import Path

import pytest

from coupled_curvature.commands import report as build
from _report_data import all_theorems_data

#: (name, pattern) of what must never reach a page
INTERNALS = [
    ("matrixslice", r"matrixslice|MatrixSlice"),
    ("generated derivative name", r"\b[sS]?[lL]\d+_\d+\b"),
    ("dell/d2ell/ell_1", r"\bd2?ell\b|\bell_\d"),
    ("spelled-out sigma", r"(?<![\\\w])sigma(?![\w\\])"),  # not \sigma, not the rule sigma_homogeneity
    ("= True", r"=\s*True"),
    ("power **", r"\*\*"),
    ("Symbol(", r"Symbol\("),
    ("Matrix(", r"Matrix\("),
    ("True/False as a value", r"(?<![\w-])(True|False)(?![\w-])"),
    ("placeholder", r"⟨large expression|large expression, &gt;|large \d+x\d+ matrix"),
    ("generated identifier", r"[a-z]+\d+_\d+"),
]


def without_coq_source(text: str) -> str:
    """The page without its raw Coq listings (Coq source text on purpose, e.g. ``sigma``)."""
    text = re.sub(r"<pre><code class='language-coq'>.*?</code></pre>", "", text, flags=re.S)
    text = re.sub(r"```coq\n.*?\n```", "", text, flags=re.S)
    return re.sub(r"\\begin\{verbatim\}.*?\\end\{verbatim\}", "", text, flags=re.S)


def scan(text: str) -> list[str]:
    """``name: context`` for every internal found in ``text``."""
    hits = []
    for name, pat in INTERNALS:
        for m in re.finditer(pat, text):
            hits.append(f"{name}: …{text[max(0, m.start() - 40):m.end() + 40]}…")
    return hits


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("readable") / "report"
    mp = pytest.MonkeyPatch()
    mp.setattr(build, "collect", lambda *a, **k: all_theorems_data())
    try:
        build.build_report(str(out))
    finally:
        mp.undo()
    return {f: Path(out, f"report.{f}").read_text(encoding="utf-8") for f in ("md", "html", "tex")}


@pytest.mark.parametrize("fmt", ["md", "html", "tex"])
def test_no_sympy_internals_on_any_page(pages, fmt):
    text = pages[fmt]
    assert all(f"T{i} " in text or f"T{i}</" in text or f"T{i} ---" in text for i in range(1, 13))
    hits = scan(without_coq_source(text))
    assert hits == [], f"{len(hits)} internals in report.{fmt}:\n" + "\n".join(hits[:20])


def test_only_the_coq_listings_are_left_out_of_the_scan(pages):
    """The raw Coq is on every page (and would trip the scan); outside it the scan still sees all."""
    for fmt in ("md", "html", "tex"):
        text = pages[fmt]
        assert "sigma" in text and scan(text)  # the raw Coq of T2 spells sigma
        kept = without_coq_source(text)
        assert len(kept) > 0.5 * len(text) and "Definitions: package and Coq" in kept


def test_scan_catches_a_planted_internal(pages):
    for planted in ("<mi>l2_1</mi>", "c**(-2)", "<mtext>True</mtext>", "matrixslice(H, 0)", "sigma(z)",
                    "⟨large expression, > 250 nodes⟩", "Matrix([[1, 0]])"):
        assert scan(pages["html"] + planted), planted


def test_steps_read_as_mathematics(pages):
    md, html, tex = pages["md"], pages["html"], pages["tex"]
    # symbols, not names: σ and ℓ in the statements and steps, c⁻² as a power
    assert "σ(cz) = cᵏσ(z)" in md and "<mi>σ</mi>" in html and r"\sigma" in tex
    assert "c⁻²" in md and "instance details" not in html and "Instance:" not in tex
    # every step keeps its trust label and the method that checked it: one row of the appendix of checks each
    n_steps = sum(len(e.steps) for e in all_theorems_data()[0].check.entries.values())
    assert html.count("<tr id='check-") == n_steps == md.count('| <a id="check-') == tex.count(r"\hypertarget{check-")
    # every character of the mathematics has a LaTeX form (no "?" stand-ins), the tex source is ASCII
    assert not re.search(r"\$[^$\n]*\?[^$\n]*\$", tex) and all(ord(ch) < 128 for ch in tex.replace("Gröbner", ""))
    # theorem statements from the registry, as MathML in HTML and LaTeX in tex
    assert "<b>Statement.</b> For a linear symmetry <math" in html
    assert r"$T^{-\top}\nabla L(\theta)$" in tex.replace(" ", "") or r"T^{-\top}\nabla" in tex
