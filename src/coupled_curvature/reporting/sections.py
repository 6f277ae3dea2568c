"""The one section builder: report data -> :class:`.outline.Outline` (md, html and tex render it).

Each section is one function of :data:`SECTIONS` taking the report data and returning its
sections (none when it has nothing to show); a new section is a new function in that list.

>>> from coupled_curvature.reporting.outline import Table
>>> _table([["a", "b"], ["1", "2"]], ("l", "r")).rows[0][1]
(Text(text='2', maths=False),)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy as sp

from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.coq_math import Piece, coq_math
from coupled_curvature.reporting.content import NUMERIC_HEAD, ReportData, as_math, fmt_num, formal_listing, summary_rows
from coupled_curvature.reporting.mathml import to_mathml
from coupled_curvature.reporting.outline import (Block, Bullets, Code, Details, Display, Figure, Inline, Link,
                                                 Listing, Mark, Math, Outline, Paragraph, References, Section, Statement,
                                                 Strong, Table, Text)
from coupled_curvature.reporting.precision import CAPTION, POWER, precision_table, precision_text
from coupled_curvature.reporting.proof_text import proof

__all__ = ["build_outline", "SECTIONS", "APPENDIX", "TITLE"]

TITLE = "coupled-curvature: proof catalogue and numeric cross-checks"
_NS = 'xmlns="http://www.w3.org/1998/Math/MathML" display="inline"'


def _t(s: str, maths: bool = True) -> tuple[Inline, ...]:
    return (Text(str(s), maths),)


def _table(rows: list[list[str]], widths: tuple[float | str, ...], maths: bool = False,
           short: dict[str, str] | None = None, small: bool = False) -> Table:
    """A table of plain-text cells (``maths``: the cells hold Unicode mathematics)."""
    head = tuple(_t(c, False) for c in rows[0])
    body = tuple(tuple(_t(c, maths) for c in r) for r in rows[1:])
    sh = None if short is None else tuple(short.get(c, c) for c in rows[0])
    return Table(head, body, widths, sh, small)


def _verdict(text: str, good: bool, bad: str = "failed") -> tuple[Inline, ...]:
    return (Mark(text, "proved" if good else bad),)


def _powers(text: str) -> tuple[Inline, ...]:
    """Plain text with its powers ``10^-dps`` as formulas."""
    out: list[Inline] = []
    at = 0
    for m in POWER.finditer(text):
        exp = m.group(1).replace("−", "-")
        out += [Text(text[at:m.start()], False),
                Math(m.group(0), "10^{-" + exp.replace("dps", r"\mathrm{dps}") + "}",
                     '<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline"><msup><mn>10</mn>'
                     f"<mrow><mo>−</mo><mi>{exp.replace('-', '−')}</mi></mrow></msup></math>")]
        at = m.end()
    return tuple(out + [Text(text[at:], False)])


def _intro(data: ReportData) -> tuple[Block, ...]:
    labels: list[Inline] = [Text(f"Seed {data.seed}. Each theorem is followed by its proof; each step of a proof "
                                 "carries a label naming the evidence of the checks it rests on, linked to those "
                                 "checks in the appendix. Labels: ", False)]
    for name, what in (("formal", "a checked step whose claim a pinned Coq theorem also states in general "
                                  "(named in the appendix)"),
                       ("exact", "exact symbolic identity or Gröbner reduction"),
                       ("certificate", "re-checked by the independent Fraction checker"),
                       ("rewrite", "a named rule, declared as a hypothesis"),
                       ("numeric", "floating-point evidence, never proof")):
        labels += [Mark(name, "label"), Text(f" {what}; " if name != "numeric" else f" {what}.", False)]
    return (Paragraph(tuple(labels)),)


def summary(data: ReportData) -> list[Section]:
    rows = summary_rows(data.check)
    short = {"theorem": "id", "certificate": "cert.", "rewrite": "rewr.", "numeric": "num.", "formal": "form.",
             "numeric figure": "numeric cross-check"}
    head = tuple(_t(c, False) for c in rows[0])
    body = tuple(((Link(r[0], r[0]),), _t(r[1]), (Mark(r[2], r[2]),), *(_t(c, False) for c in r[3:]))
                 for r in rows[1:])
    table = Table(head, body, (0.05, 0.19, 0.08, "r", "r", "r", "r", "r", 0.33), tuple(short.get(c, c) for c in rows[0]),
                  small=True)
    return [Section("Summary", (table,), "summary")]


def _placed(data: ReportData) -> tuple[dict[str, list[Figure]], list[Figure]]:
    """Each figure in the section of the first theorem its caption cites (when that theorem is in the
    report), and the figures that cite none of them."""
    from coupled_curvature.theorems import cited

    at: dict[str, list[Figure]] = {}
    rest: list[Figure] = []
    for f in data.figures:
        home = next((t for t in cited(f.caption) if t in data.check.entries), None)
        (at.setdefault(home, []) if home else rest).append(Figure(f.name, _t(f.caption)))
    return at, rest


def figures(data: ReportData) -> list[Section]:
    """The figures no theorem cites (the others stand in their theorem's section); none: no section."""
    rest = _placed(data)[1]
    return [Section("Figures", tuple(rest), "figures")] if rest else []


def definitions(data: ReportData) -> list[Section]:
    """The package's definitions next to the Coq development's (read from ``proofs/coq``)."""
    from coupled_curvature.reporting.definitions import definition_rows

    rows = []
    for r in definition_rows():
        coq: list[Inline] = []
        for i, (lhs, rhs, _) in enumerate(r.coq or ()):
            coq += ([Text("; ", False)] if i else []) + [Code(lhs), Text(" := ", False), *_maths(rhs)]
        rows.append((_t(r.quantity), _t(r.package), tuple(coq) or _t("(Coq sources not found)", False)))
    intro = Paragraph(_t("Each quantity as the package defines it (symbolic and numeric code alike) and as the "
                         "Coq development in proofs/coq defines it (Defs.v; the "
                         "forward pass in T02_homogeneous_rescaling.v), translated to mathematics. In Coq the "
                         "vectors are columns of a matrix type over a real closed field R, uᵀv is the (0, 0) "
                         "entry of a 1×1 product, and Coq's division by 0 gives 0 where the package reports the "
                         "quantity as undefined (no value).", False))
    table = Table((_t("quantity", False), _t("package", False), _t("Coq", False)), tuple(rows), (0.15, 0.37, 0.44))
    return [Section("Definitions: package and Coq", (intro, table), "definitions")]


def _witness_cell(v: Any) -> tuple[Inline, ...]:
    m = as_math(v)
    if isinstance(m, str):
        return (Math(m, None, to_mathml(m)),)
    return (Math(sp.sstr(m), sp.latex(m), to_mathml(m)),)


def _maths(pieces: list[Piece]) -> tuple[Inline, ...]:
    """A translated Coq formula as inline pieces a line may break between."""
    out: list[Inline] = []
    for i, p in enumerate(pieces):
        out += ([Text(" ", False)] if i else []) + [Math(p.text, p.tex, f"<math {_NS}>{p.mathml}</math>", True)]
    return tuple(out)


def _formal_section(e: Any) -> list[Block]:
    """What Coq proves of the theorem, then each pinned Coq theorem: its statement as mathematics,
    the raw Coq text in a collapsible block."""
    from coupled_curvature.formal_claims import FORMAL_HEADLINES
    from coupled_curvature.proofs.formal import GLOBAL_PINS, statement_pins
    from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words, pin_kind

    listing = formal_listing(e)
    if not listing:
        return []
    parts: list[Inline] = [Strong(_t("Formal (Coq), for every n, depth and width:", False)),
                           Text(f" {e.formal_scope or ''}. Coq theorems: ")]
    for i, (n, k) in enumerate(listing):
        parts += [Text(", " if i else "", False), Code(n), Text("" if k is None else f" ({k} lines)", False)]
    parts += [Text(" (pinned statements; ", False), Code("ccurv check --formal"),
              Text(" compiles and checks them). The checks labelled formal name the theorem that states them.", False)]
    pinned = {n: st for ps in statement_pins().values() for n, st in ps}
    blocks: list[Block] = [Paragraph(tuple(parts))]
    heads = [(n, w) for n, w in FORMAL_HEADLINES.get(e.theorem, ()) if f"CoupledCurvature.{n}" in pinned]
    if heads:  # each marked by what it is: formal, with global or local hypotheses
        blocks += [Paragraph(_t("The headline theorems, in words:", False)), Bullets(tuple(
            (Code(n), Text(" (", False), Mark("formal", "label"),
             Text(f", {pin_kind(n, pinned['CoupledCurvature.' + n])}): ", False), Text(w)) for n, w in heads))]
    for name in e.formal:
        short = name.removeprefix("CoupledCurvature.")
        blocks += [Paragraph((Code(short), Text(":", False)))]
        if short in GLOBAL_PINS:
            blocks.append(Paragraph((Mark("formal", "label"), Text(f", {pin_kind(short, pinned[name])}: "
                                                                 f"{GLOBAL_PINS[short]}; no check is labelled "
                                                                 "formal by it.", False))))
        blocks.append(Paragraph(_maths(coq_math(pinned[name]))))
        said = hypotheses_in_words(pinned[name])
        if said:
            blocks += [Paragraph(_t("Its hypotheses, in words:", False)),
                       Bullets(tuple((Text(w, False),) if w else (Text("as stated in Coq: ", False), Code(p))
                                     for p, w in said))]
        else:
            blocks.append(Paragraph(_t("It has no hypotheses.", False)))
        blocks.append(Details("Coq statement (as coqc prints it)", (Listing(pinned[name], "coq", short),)))
    return [Section("Formal proofs in Coq", tuple(blocks), level=2)]


def _theorem(t: str, e: Any, s: Any, figs: list[Figure]) -> Section:
    b: list[Block] = [Paragraph((Strong((Text("Status: ", False), Mark(s.status, s.status))),)),
                      Statement(t, e.title, (Text(e.statement),))]
    if e.hypotheses:
        b += [Paragraph((Strong(_t("Hypotheses.", False)),)), Bullets(tuple(_t(h) for h in e.hypotheses))]
    if e.steps:
        b.append(proof(t, e.steps))
    if e.rules:
        parts: list[Inline] = [Text("Rewrite rules cited (declared hypotheses): ", False)]
        for i, r in enumerate(e.rules):
            parts += [Text(", " if i else "", False), Code(r)]
        b.append(Paragraph(tuple(parts)))
    b += _formal_section(e)
    if s.reasons:
        b += [Paragraph((Strong(_t("Reasons for failure.", False)),)), Bullets(tuple(_t(r) for r in s.reasons))]
    if e.witnesses:
        wb: list[Block] = []
        for w in e.witnesses:
            verdict = "no checker" if w.checker is None else f"{w.checker}: {'accepted' if w.accepted else 'REJECTED'}"
            wb.append(Paragraph((Strong(_t(w.kind)), Text(f" ({verdict})", False),
                                 *((Text(" — " + w.note),) if w.note else ()))))
            wb.append(Table((_t("field", False), _t("value", False)),
                            tuple((_t(k, False), _witness_cell(v)) for k, v in w.data.items()), (0.2, 0.78)))
        b.append(Section("Witnesses", tuple(wb), level=2))
    if e.numeric is not None:
        n = e.numeric
        rows = tuple((_t(r["net"], False), _t(r["quantity"]), _t(fmt_num(r["measured"]), False), _t(r["bound"]),
                      _t("yes" if r["agrees"] else "NO", False)) for r in n.rows)
        b.append(Section("Numeric cross-check (evidence)", (
            Paragraph(_t(f"Prediction: {n.prediction}. {n.figure_name} = {fmt_num(n.figure)}; agrees: "
                         f"{'yes' if n.agrees else 'NO'}.")),
            Table(tuple(_t(c, False) for c in NUMERIC_HEAD), rows, (0.22, 0.36, "r", 0.2, "l"), small=True),
            *figs), level=2))
    else:
        b += figs
    return Section(f"{t} — {e.title}", tuple(b), t)


def theorems(data: ReportData) -> list[Section]:
    chk = data.check
    at = _placed(data)[0]
    return [_theorem(t, e, chk.statuses[t], at.get(t, [])) for t, e in chk.entries.items()]


def precision(data: ReportData) -> list[Section]:
    p = data.precision
    if p is None:
        return []
    rows = precision_table(p)
    head = tuple(_powers(c) for c in rows[0])
    body = tuple(tuple(_t(c, False) for c in r[:-1]) + (_verdict(r[-1], r[-1] == "yes"),) for r in rows[1:])
    blocks: list[Block] = [Paragraph(_powers(t)) for t in precision_text(p)]
    blocks += [Table(head, body, ("r",) * 6 + ("l",), small=True), Figure("precision", _powers(CAPTION))]
    return [Section("Arbitrary precision", tuple(blocks), "precision")]


def cutoff(data: ReportData) -> list[Section]:
    c = data.cutoff
    if c is None:
        return []
    first, *rest = cs.cutoff_text(c)
    before, _, after = first.partition(cs.FORMULA_TEXT)
    rows = cs.cutoff_table(c)
    body = tuple(tuple(_t(x, False) for x in r[:4]) + (_verdict(r[4], r[4] == "yes", "evidence"), _t(r[5], False))
                 for r in rows[1:])
    blocks: list[Block] = [Paragraph(_t(before.rstrip(), False)),
                           Display(cs.FORMULA_TEXT, cs.FORMULA_TEX, cs.FORMULA_MATHML),
                           Paragraph(_t(after.lstrip(", "), False))]
    blocks += [Paragraph(_t(t, False)) for t in rest]
    blocks += [Figure("cutoff", _t(cs.CAPTION)),
               Table(tuple(_t(x, False) for x in rows[0]), body, ("l", "l", "r", "r", "l", "r"), small=True)]
    return [Section("Cutoff sensitivity", tuple(blocks), "cutoff")]


def training_side(data: ReportData) -> list[Section]:
    """λ's analytic identities and the radius sweep of a net and its rescaled twin (:mod:`.rate_section`)."""
    from coupled_curvature.reporting.rate_section import rate_sections, sharpness_sections

    return rate_sections(data.rate) + sharpness_sections(data.sharpness)


def references(data: ReportData) -> list[Section]:
    """The published results the proofs cite (:mod:`.references`), once each; none cited: no section."""
    from coupled_curvature.reporting.proof_text import PROOFS
    from coupled_curvature.reporting.references import bibliography

    keys = [k for t, e in data.check.entries.items() if e.steps for said in PROOFS.get(t, ()) for k in said.cite]
    refs = bibliography(keys)
    return [Section("References", (References(tuple((r.key, r.label, r.text) for r in refs)),), "references")] \
        if refs else []


#: the report's sections, in order
SECTIONS: tuple[Callable[[ReportData], list[Section]], ...] = (summary, figures, definitions, theorems, precision,
                                                                cutoff, training_side, references)


def checks(data: ReportData) -> list[Section]:
    """Every checked step of every proof, per theorem (:mod:`.checks_appendix`)."""
    from coupled_curvature.reporting.checks_appendix import checks_appendix

    return checks_appendix(data.check.entries)


#: the report's appendices, in order (after the sections; LaTeX letters them after the Coq listings)
APPENDIX: tuple[Callable[[ReportData], list[Section]], ...] = (checks,)


def build_outline(data: ReportData) -> Outline:
    """The whole report as an :class:`.outline.Outline` (every renderer's one input)."""
    return Outline(TITLE, data.generated, _intro(data), tuple(s for f in SECTIONS for s in f(data)),
                   tuple(s for f in APPENDIX for s in f(data)))
