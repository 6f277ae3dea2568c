"""The LaTeX report is typeset as mathematics: it compiles (pdflatex twice) with no overfull box
over 1 pt, and its text holds none of the typesetting bugs a reader saw in it.

The report holds all twelve theorems' steps and the small collection's sections
(:func:`_report_data.all_theorems_data`), so every statement, step, display and table is
typeset. Each pattern below is one bug class; ``test_each_pattern_catches_its_bug`` shows on a
tiny string with the bug that the same scan finds it (the negative controls).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from _report_data import all_theorems_data

PDFLATEX = shutil.which("pdflatex")


def prose(tex: str) -> str:
    """The source without its verbatim blocks (raw Coq text, printed as it is on purpose)."""
    return re.sub(r"\\begin\{verbatim\}.*?\\end\{verbatim\}", "", tex, flags=re.S)


def _displays(tex: str) -> list[str]:
    return re.findall(r"\\\[(.*?)\\\]|\\begin\{equation\*\}(.*?)\\end\{equation\*\}", tex, flags=re.S)


def _trivial(display: str) -> bool:
    """A display that only does arithmetic on numbers (``\\frac{4}{1} = 4``): no letter left once
    the fraction and sizing commands are dropped."""
    body = re.sub(r"\\(frac|dfrac|tfrac|left|right|cdot|quad|,)", "", display)
    return "=" in body and not re.search(r"[A-Za-z\\]", body)


def _inline_math(tex: str) -> list[str]:
    """The inline formulas; pieces of one formula set side by side (``$( \\forall j :$ $L )$``) as one."""
    return re.sub(r"\$(\s*)\$", r"\1", re.sub(r"\\\$", "", tex)).split("$")[1::2]


def _unbalanced(math: str) -> bool:
    """Round parentheses that do not pair up inside one inline formula (``T(T``), half-open
    intervals such as ``(0, 1]`` and ``\\left(``/``\\right)`` aside."""
    m = re.sub(r"\\(left|right|big|Big|bigl|bigr)\s*[()]", "", math)
    m = re.sub(r"[(\[][^()\[\]]*[)\]]", "", m)  # any closed pair, intervals included
    while True:
        shorter = re.sub(r"\([^()]*\)", "", m)
        if shorter == m:
            break
        m = shorter
    return "(" in m or ")" in m


#: (name, finder) of each typesetting bug: a finder returns the offending snippets of the source
PATTERNS = [
    ("exponent split at its parenthesis, as c^{(}2-2k)", lambda t: re.findall(r".{0,30}\^\{\(\}.{0,30}", t)),
    ("command option -- set as an en dash", lambda t: re.findall(r".{0,30}(?<![-\w])--[a-z][\w-]*.{0,10}", t)),
    ("Python word None/True/False", lambda t: re.findall(r".{0,40}(?<![\w\\-])(?:None|True|False)(?![\w-]).{0,20}", t)),
    ("SymPy repr Matrix(/Symbol(/sqrt(", lambda t: re.findall(r".{0,30}(?<![\\\w])(?:Matrix|Symbol|sqrt)\(.{0,30}", t)),
    ("Python power **", lambda t: re.findall(r".{0,30}\*\*.{0,30}", t)),
    ("multi-letter symbol as a product (m rtol)", lambda t: re.findall(r".{0,30}\\frac\{m rtol\}.{0,10}|.{0,20}- m rtol.{0,10}", t)),
    ("nested fraction of a SymPy product (1/((1/c²)λ))", lambda t: re.findall(r".{0,20}\\frac\{1\}\{\\frac\{1\}.{0,30}", t)),
    ("trivial display such as 4/1 = 4", lambda t: [d for pair in _displays(t) for d in pair if d and _trivial(d)]),
    ("parentheses split between math and text, as $T(T$ invertible",
     lambda t: [m for m in _inline_math(t) if _unbalanced(m)]),
]


def scan(tex: str) -> dict[str, list[str]]:
    """``{pattern name: offending snippets}`` of the source's prose, only the patterns that hit."""
    text = prose(tex)
    return {name: hits for name, find in PATTERNS if (hits := find(text))}


def overfull(log: str) -> list[float]:
    """Widths in pt of the overfull horizontal boxes of a TeX log.

    >>> overfull("Overfull \\\\hbox (3.5pt too wide) in paragraph\\nOverfull \\\\vbox (2pt too high)")
    [3.5]
    """
    return [float(x) for x in re.findall(r"^Overfull \\hbox \(([0-9.]+)pt too wide", log, re.M)]


#: a tiny source with each bug, in PATTERNS' order: the scan must find every one
BUGGY = {
    "exponent split at its parenthesis, as c^{(}2-2k)": r"$K^{\top}K=c^{(}2-2k)\cdot I$",
    "command option -- set as an en dash": r"\texttt{ccurv check --formal} compiles them",
    "Python word None/True/False": r"so witness(K) returns None (checked)",
    "SymPy repr Matrix(/Symbol(/sqrt(": r"the value Matrix([[1, 0]]) is kept",
    "Python power **": r"RQ'/RQ = c**(-2)",
    "multi-letter symbol as a product (m rtol)": "\\[\n- \\frac{m rtol}{c^{2}} + x = y\n\\]",
    "nested fraction of a SymPy product (1/((1/c²)λ))": "\\[\n\\frac{1}{\\frac{1}{c^{2}} \\lambda_{i}} = y\n\\]",
    "trivial display such as 4/1 = 4": "\\[\n\\frac{4}{1} = 4\n\\]",
    "parentheses split between math and text, as $T(T$ invertible":
        r"For a linear symmetry $T(T$ invertible, $L(T\theta )=L(\theta )$ for all $\theta ):\nabla L$",
}

#: clean spellings of the same facts: the scan must find nothing in them
CLEAN = (r"$K^{\top}K=c^{2-2k}\cdot I$; \texttt{ccurv check -{}-formal}; Moore--Penrose; witness(K) has no "
         r"witness; \[ \frac{1}{\lambda_{i}/c^{2}} = \frac{c^{2}}{\lambda_{i}} \] $T$ ($T$ invertible, "
         r"$L(T\theta)=L(\theta)$ for all $\theta$): a factor in $(0, 1]$; $\left( x \right)$")


def test_each_pattern_catches_its_bug():
    assert [n for n, _ in PATTERNS] == list(BUGGY)
    for name, text in BUGGY.items():
        assert name in scan(text), (name, text)
    assert scan(CLEAN) == {}
    assert scan("\\begin{verbatim}\nreturns None -- raw\n\\end{verbatim}") == {}  # raw listings are exempt


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The report's LaTeX for all twelve theorems, and the log of its second pdflatex run."""
    from coupled_curvature.reporting.build import write_report

    out = Path(write_report(str(tmp_path_factory.mktemp("typeset") / "rep"), ["tex"], *all_theorems_data()))
    tex = (out / "report.tex").read_text(encoding="utf-8")
    if PDFLATEX is None:
        return tex, None
    for run in (1, 2):  # the second run typesets the table of contents the first one recorded
        done = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "report.tex"], cwd=out,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (run, done.stdout[-3000:])
    return tex, (out / "report.log").read_text(encoding="latin-1")


def test_the_report_has_none_of_the_typesetting_bugs(built):
    tex, _ = built
    hits = scan(tex)
    assert hits == {}, "\n".join(f"{n}: {len(h)}, e.g. {h[:3]}" for n, h in hits.items())


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed, so the report cannot be compiled")
def test_the_report_compiles_without_overfull_boxes(built):
    _, log = built
    assert "! " not in log.replace("! LaTeX Font Warning", ""), log[-3000:]
    wide = [w for w in overfull(log) if w > 1.0]
    assert wide == [], wide
