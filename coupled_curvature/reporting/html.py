"""Self-contained HTML rendering: presentation MathML built at report time, inline CSS, no scripts."""

from __future__ import annotations

import html as _html
import re

from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.content import NUMERIC_HEAD, ReportData, as_math, fmt_num, formal_listing, summary_rows
from coupled_curvature.reporting.mathml import to_mathml
from coupled_curvature.reporting.steps import step_view
from coupled_curvature.reporting.umath import text_html
from coupled_curvature.reporting.precision import CAPTION, POWER, precision_table, precision_text

__all__ = ["render_html"]

_CSS = """
* { box-sizing: border-box; }
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45;
       overflow-wrap: break-word; }
.scroll { max-width: 100%; overflow-x: auto; margin: 0.6rem 0 1.2rem; }
table { border-collapse: collapse; font-size: 0.92rem; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; vertical-align: middle; text-align: left; overflow-wrap: break-word; hyphens: auto; }
th { background: #f2f2f2; }
.proved { color: #126b12; font-weight: bold; } .failed { color: #b00020; font-weight: bold; }
.evidence { color: #8a5a00; font-weight: bold; }
.label { font-family: monospace; padding: 0 0.3rem; border-radius: 3px; background: #eef; }
.label-numeric { background: #fde9c8; } .label-rewrite { background: #e6f4e6; } .label-certificate { background: #e8e0f8; }
.label-formal { background: #d8eefa; }
math { font-size: 1.05em; } math[display="block"] { margin: 0.3rem 0 0.3rem 1.2rem; max-width: 100%; }
ol.steps > li { margin: 0.45rem 0; } .method { color: #555; font-size: 0.9em; }
details { margin: 0.15rem 0 0 1.2rem; font-size: 0.9em; color: #444; } summary { cursor: pointer; }
figure { margin: 1rem 0; } figure svg { width: 100%; max-width: 46rem; height: auto; border: 1px solid #ddd; }
section { border-top: 2px solid #ddd; margin-top: 1.5rem; }
nav.toc ul { columns: 2 16rem; } nav.toc li { break-inside: avoid; }
"""


def _e(s: object) -> str:
    return _html.escape(str(s))


def _table(rows: list[list[str]], raw: bool = False) -> str:
    head = "".join(f"<th>{c if raw else _e(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _svg(svgs: dict[str, str] | None, name: str, caption: str) -> str:
    """A figure with its SVG inlined (the file alone is complete); the caption as text."""
    body = (svgs or {}).get(name)
    if body is None:
        return f"<figure><figcaption>{caption}</figcaption></figure>"
    body = re.sub(r"^.*?(?=<svg)", "", body, flags=re.S)
    # inline SVG in HTML needs no namespace declarations (the parser knows svg and xlink:href); no metadata
    body = re.sub(r"<metadata>.*?</metadata>\s*", "", body, flags=re.S)
    body = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", body)
    body = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 role="img"', body, count=1)
    body = body.replace("<svg", f"<svg aria-label='{_e(re.sub('<[^>]+>', '', caption))}' data-figure='{name}'", 1)
    return f"<figure id='fig-{name}'>{body}<figcaption>{caption}</figcaption></figure>"


def _formal(e) -> str:
    """What Coq proves of the entry's theorem (its scope) and its pinned Coq theorems with line counts."""
    listing = formal_listing(e)
    if not listing:
        return ""
    names = ", ".join(f"<code>{_e(n)}</code>" + ("" if k is None else f" ({k} lines)") for n, k in listing)
    return (f"<p><b>Formal (Coq), for every n, depth and width:</b> {_e(e.formal_scope or '')}. Coq theorems: "
            f"{names} (pinned statements; <code>ccurv check --formal</code> compiles and checks them).</p>")


def _steps(steps) -> list[str]:
    out = ["<h3>Steps</h3>", "<ol class='steps'>"]
    for st in steps:
        v = step_view(st.description, st.lhs, st.rhs)
        mark = "<span class='proved'>✓</span>" if st.passed else "<span class='failed'>✗</span>"
        item = (f"<li>{mark} <span class='label label-{st.label}'>{st.label}</span> {text_html(v.statement)}"
                f" <span class='method'>(checked by {_e(st.method)}, {_e(st.verification)})</span>")
        if v.mathml:
            item += f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><mrow>{v.mathml}</mrow></math>'
        if v.instance:
            item += f"<details><summary>instance details</summary>{text_html(v.instance)}</details>"
        out.append(item + "</li>")
    return out + ["</ol>"]


def render_html(data: ReportData, svgs: dict[str, str] | None = None) -> str:
    """The report as one self-contained HTML page (MathML, inline CSS and SVG figures, no scripts).

    ``svgs`` maps a figure name to its SVG text (inlined; without it the figure shows its caption only).
    """
    chk = data.check
    toc = ["<li><a href='#summary'>Summary</a></li>", "<li><a href='#figures'>Figures</a></li>"]
    toc += [f"<li><a href='#{t}'>{t} — {text_html(e.title)}</a></li>" for t, e in chk.entries.items()]
    if data.precision is not None:
        toc.append("<li><a href='#precision'>Arbitrary precision</a></li>")
    if data.cutoff is not None:
        toc.append("<li><a href='#cutoff'>Cutoff sensitivity</a></li>")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>coupled-curvature: proof catalogue</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>coupled-curvature: proof catalogue and numeric cross-checks</h1>",
           f"<p>Generated: {_e(data.generated)}</p>",
           f"<p>Seed {data.seed}. Trust labels: <span class='label'>exact</span> exact symbolic identity or Gröbner "
           "reduction; <span class='label label-certificate'>certificate</span> re-checked by the independent "
           "Fraction checker; <span class='label label-rewrite'>rewrite</span> a named rule, declared as a "
           "hypothesis; <span class='label label-numeric'>numeric</span> floating-point evidence, never proof. "
           "A step checked on an explicit instance shows its general statement; the instance is described under "
           "“instance details”.</p>",
           "<nav class='toc'><h2>Contents</h2><ul>" + "".join(toc) + "</ul></nav>",
           "<h2 id='summary'>Summary</h2>"]
    rows = summary_rows(chk)
    rows = [rows[0]] + [[f"<a href='#{r[0]}'>{r[0]}</a>", text_html(r[1]), f"<span class='{r[2]}'>{r[2]}</span>",
                         *map(_e, r[3:])] for r in rows[1:]]
    out.append(_table(rows, raw=True))
    out.append("<h2 id='figures'>Figures</h2>")
    for f in data.figures:
        out.append(_svg(svgs, f.name, text_html(f.caption)))
    for t, e in chk.entries.items():
        s = chk.statuses[t]
        out += [f"<section id='{t}'><h2>{t} — {text_html(e.title)}</h2>",
                f"<p>Status: <span class='{s.status}'>{s.status}</span></p>",
                f"<p><b>Statement.</b> {text_html(e.statement)}</p>"]
        if e.hypotheses:
            out.append("<p><b>Hypotheses.</b></p><ul>" + "".join(f"<li>{text_html(h)}</li>" for h in e.hypotheses) + "</ul>")
        if e.rules:
            out.append("<p>Rewrite rules cited (declared hypotheses): " + ", ".join(f"<code>{_e(r)}</code>" for r in e.rules) + "</p>")
        out.append(_formal(e))
        if s.reasons:
            out.append("<p><b>Reasons for failure.</b></p><ul>" + "".join(f"<li>{text_html(r)}</li>" for r in s.reasons) + "</ul>")
        if e.steps:
            out += _steps(e.steps)
        if e.witnesses:
            out.append("<h3>Witnesses</h3>")
            for w in e.witnesses:
                verdict = "no checker" if w.checker is None else f"{w.checker}: {'accepted' if w.accepted else 'REJECTED'}"
                out.append(f"<p><b>{text_html(w.kind)}</b> ({_e(verdict)}){' — ' + text_html(w.note) if w.note else ''}</p>")
                rows = [["field", "value"]] + [[_e(k), to_mathml(as_math(v))] for k, v in w.data.items()]
                out.append(_table(rows, raw=True))
        if e.numeric is not None:
            n = e.numeric
            out += ["<h3>Numeric cross-check (evidence)</h3>",
                    f"<p>Prediction: {text_html(n.prediction)}. {text_html(n.figure_name)} = {fmt_num(n.figure)}; "
                    f"agrees: {'yes' if n.agrees else 'NO'}.</p>",
                    _table([list(NUMERIC_HEAD)] + [[_e(r["net"]), text_html(r["quantity"]), fmt_num(r["measured"]),
                                                    text_html(r["bound"]), "yes" if r["agrees"] else "NO"]
                                                   for r in n.rows], raw=True)]
        out.append("</section>")
    if data.precision is not None:
        out += _precision(data.precision, svgs)
    if data.cutoff is not None:
        out += _cutoff(data.cutoff, svgs)
    out.append("</body></html>")
    return "\n".join(x for x in out if x) + "\n"


def _precision(p, svgs: dict[str, str] | None = None) -> list[str]:
    def sup(text: str) -> str:  # escaped text, 10^-dps as a superscript
        return POWER.sub(lambda m: f"10<sup>−{m.group(1).replace('-', '−')}</sup>", _e(text))

    out = ["<section id='precision'><h2>Arbitrary precision</h2>"]
    out += [f"<p>{sup(t)}</p>" for t in precision_text(p)]
    rows = precision_table(p)
    rows = [[sup(c) for c in rows[0]]] + [
        [_e(c) for c in r[:-1]] + [f"<span class='{'proved' if r[-1] == 'yes' else 'failed'}'>{r[-1]}</span>"]
        for r in rows[1:]]
    out.append(_table(rows, raw=True))
    out.append(_svg(svgs, "precision", sup(CAPTION)))
    out.append("</section>")
    return out


#: the cutoff-sensitivity curve, cutoff_section.FORMULA_TEXT as presentation MathML
_FORMULA = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><mrow>'
    "<msubsup><mi>D</mi><mi>b</mi><mo>+</mo></msubsup><mo>(</mo><mi>τ</mi><mo>)</mo><mo>=</mo>"
    "<mfrac><mrow><msup><mi>w</mi><mo>⊤</mo></msup><msubsup><mi>H</mi><mi>τ</mi><mo>+</mo></msubsup><mi>w</mi></mrow>"
    "<mrow><msup><mi>w</mi><mo>⊤</mo></msup><mi>w</mi></mrow></mfrac>"
    "<msup><mrow><mo>‖</mo><mi>g</mi><mo>‖</mo></mrow><mn>2</mn></msup><mo>,</mo><mspace width='1em'/>"
    "<mi>τ</mi><mo>=</mo><mtext>pinv_rtol</mtext><mo>·</mo><mi>max</mi><mo>⁡</mo>"
    "<mrow><mo fence='true' form='prefix' stretchy='false'>|</mo><mi>λ</mi>"
    "<mo fence='true' form='postfix' stretchy='false'>|</mo></mrow>"
    "</mrow></math>"
)


def _cutoff(c, svgs: dict[str, str] | None = None) -> list[str]:
    first, *rest = cs.cutoff_text(c)
    before, _, after = first.partition(cs.FORMULA_TEXT)
    out = ["<section id='cutoff'><h2>Cutoff sensitivity</h2>",
           f"<p>{_e(before.rstrip())}</p>", _FORMULA, f"<p>{_e(after.lstrip(', '))}</p>"]
    out += [f"<p>{_e(t)}</p>" for t in rest]
    out.append(_svg(svgs, "cutoff", text_html(cs.CAPTION)))
    rows = cs.cutoff_table(c)
    rows = [[_e(x) for x in rows[0]]] + [
        [_e(x) for x in r[:4]] + [f"<span class='{'proved' if r[4] == 'yes' else 'evidence'}'>{r[4]}</span>", _e(r[5])]
        for r in rows[1:]]
    out.append(_table(rows, raw=True))
    out.append("</section>")
    return out
