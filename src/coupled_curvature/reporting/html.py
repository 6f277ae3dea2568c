"""Self-contained HTML rendering of a report outline: presentation MathML built at report time,
inline CSS and SVG, no scripts.

>>> from coupled_curvature.reporting.outline import Code, Text
>>> inline_html((Text("a < b", False), Code("x")))
'a &lt; b<code>x</code>'
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable
from typing import Any

from coupled_curvature.reporting.outline import (Block, Bullets, Code, Details, Display, Figure, Inline, Link, Listing,
                                                 Mark, Math, Outline, Paragraph, Proof, ProofStep, References, Section,
                                                 Statement,
                                                 Steps, Strong, Table, Text, render_block, render_inline)
from coupled_curvature.reporting.umath import text_html

__all__ = ["render_html", "inline_html", "PAGE_CSS", "figure_html"]

_CSS = """
* { box-sizing: border-box; }
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45;
       overflow-wrap: break-word; }
.scroll { max-width: 100%; overflow-x: auto; margin: 0.6rem 0 1.2rem; }
table { border-collapse: collapse; font-size: 0.92rem; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; vertical-align: middle; text-align: left; overflow-wrap: break-word; hyphens: auto; }
td code { overflow-wrap: anywhere; }
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
pre { max-width: 100%; overflow-x: auto; background: #f7f7f7; padding: 0.4rem; font-size: 0.85em; }
.proof { margin: 0.5rem 0 1rem; } ol.proof-steps { padding-left: 1.4rem; }
ol.proof-steps > li { margin: 0.5rem 0; padding-right: 14rem; position: relative; }
a.evidence { position: absolute; right: 0; top: 0; text-decoration: none; }
a.evidence:hover { text-decoration: underline; } tr:target { background: #fff6d5; }
.side { display: flex; flex-wrap: wrap; gap: 0.5rem 2rem; } .side > div { flex: 1 1 20rem; min-width: 0; }
"""


#: the stylesheet of every generated page (the report, the experiment pages)
PAGE_CSS = _CSS


def _e(s: object) -> str:
    return _html.escape(str(s))


_MATH = '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><mrow>{}</mrow></math>'


def inline_html(parts: tuple[Inline, ...]) -> str:
    """Inline runs as HTML (Unicode mathematics as MathML)."""
    return render_inline(parts, _INLINE)


def _mark(p: Mark) -> str:
    cls = f"label label-{p.text}" if p.kind == "label" else p.kind
    return f"<span class='{cls}'>{_e(p.text)}</span>"


_INLINE = {
    Text: lambda p: text_html(p.text) if p.maths else _e(p.text),
    Code: lambda p: f"<code>{_e(p.text)}</code>",
    Strong: lambda p: f"<b>{inline_html(p.parts)}</b>",
    Mark: _mark,
    Math: lambda p: p.mathml if p.mathml is not None else text_html(p.text),
    Link: lambda p: f"<a href='#{_e(p.target)}'>{_e(p.text)}</a>",
}


def _table(t: Table) -> str:
    head = "".join(f"<th>{inline_html(c)}</th>" for c in t.head)
    ids = t.row_ids or ("",) * len(t.rows)
    body = "".join((f"<tr id='{_e(i)}'>" if i else "<tr>") + "".join(f"<td>{inline_html(c)}</td>" for c in r) + "</tr>"
                   for i, r in zip(ids, t.rows))
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


def figure_html(svg: str, name: str, caption: str) -> str:
    """One SVG figure inlined with its caption (``caption`` is HTML).

    >>> print(figure_html('<?xml version="1.0"?><svg width="1" height="1"></svg>', "f", "plot"))
    <figure id='fig-f'><svg aria-label='plot' data-figure='f' role="img"></svg><figcaption>plot</figcaption></figure>
    """
    return _svg({name: svg}, name, caption)


def _steps(s: Steps) -> list[str]:
    out = ["<ol class='steps'>"]
    for st in s.items:
        mark = "<span class='proved'>✓</span>" if st.passed else "<span class='failed'>✗</span>"
        coq = "" if not st.formal else "; Coq: " + ", ".join(f"<code>{_e(n)}</code>" for n in st.formal)
        item = (f"<li>{mark} <span class='label label-{st.label}'>{st.label}</span> {text_html(st.statement)}"
                f" <span class='method'>(checked by {_e(st.method)}, {_e(st.verification)}{coq})</span>")
        if st.mathml:
            item += _MATH.format(st.mathml)
        if st.instance:
            item += f"<details><summary>instance details</summary>{text_html(st.instance)}</details>"
        out.append(item + "</li>")
    return out + ["</ol>"]


def _evidence(st: ProofStep) -> str:
    said = "/".join(st.evidence)
    cls = f"label label-{st.evidence[0]}" if st.passed and st.evidence else "label failed"
    return (f"<a class='evidence {cls}' href='#{_e(st.target)}' title='the checks this step rests on'>"
            f"{'' if st.passed else 'FAIL: '}{_e(said)}</a>")


def _cites(st: ProofStep) -> str:
    return "".join(f" <a class='cite' href='#ref-{_e(k)}'>[{_e(lab)}]</a>" for k, lab in st.cites)


def _proof(p: Proof) -> list[str]:
    """A proof: each step a sentence and its displayed formula, its evidence label beside it."""
    items = "".join(f"<li>{_evidence(st)}{text_html(st.reason.rstrip('.,;:'))}{_cites(st)}"
                    f"{st.reason[len(st.reason.rstrip('.,;:')):]}"
                    + (_MATH.format(st.formula.mathml) if st.formula else "") + "</li>" for st in p.steps)
    return [f"<div class='proof'><p><i>Proof.</i></p><ol class='proof-steps'>{items}</ol>"
            f"<p>{inline_html(p.closing)} ∎</p></div>"]


def _block(b: Block, svgs: dict[str, str] | None) -> list[str]:
    return render_block(b, _FORMS, svgs, "HTML")


def _section(b: Section, svgs: dict[str, str] | None) -> list[str]:
    title = text_html(b.title)
    h3 = f"<h3 id='{_e(b.id)}'>{title}</h3>" if b.id else f"<h3>{title}</h3>"
    out = [f"<section id='{b.id}'><h2>{title}</h2>" if b.level == 1 else h3]
    for x in b.blocks:
        out += _block(x, svgs)
    return out + (["</section>"] if b.level == 1 else [])


#: each block's HTML, given the figures' SVG text (:func:`~coupled_curvature.reporting.outline.render_block`)
_FORMS: dict[type, Callable[[Any, dict[str, str] | None], list[str]]] = {
    Section: _section,
    Paragraph: lambda b, _: [f"<p>{inline_html(b.parts)}</p>"],
    Statement: lambda b, _: [f"<p><b>Statement.</b> {inline_html(b.parts)}</p>"],
    Bullets: lambda b, _: ["<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in b.items) + "</ul>"],
    Table: lambda b, _: [_table(b)],
    Figure: lambda b, svgs: [_svg(svgs, b.name, inline_html(b.caption))],
    Display: lambda b, _: [_MATH.format(b.mathml)],
    Steps: lambda b, _: _steps(b),
    Proof: lambda b, _: _proof(b),
    References: lambda b, _: ["<ul class='refs'>" + "".join(f"<li id='ref-{_e(k)}'>[{_e(lab)}] {_e(txt)}</li>"
                                                            for k, lab, txt in b.items) + "</ul>"],
    Details: lambda b, svgs: [f"<details><summary>{_e(b.summary)}</summary>"
                              + "".join(x for blk in b.blocks for x in _block(blk, svgs)) + "</details>"],
    Listing: lambda b, _: [f"<pre><code class='language-{_e(b.language)}'>{_e(b.text)}</code></pre>"],
}


def render_html(outline: Outline, svgs: dict[str, str] | None = None) -> str:
    """The report outline as one self-contained HTML page (MathML, inline CSS and SVG figures, no
    scripts). ``svgs`` maps a figure name to its SVG text (without it a figure shows its caption)."""
    toc = "".join(f"<li><a href='#{s.id}'>{text_html(s.title)}</a></li>"
                  for s in (*outline.sections, *outline.appendix) if s.id)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(outline.title)}</title>", f"<style>{_CSS}</style></head><body>",
           f"<h1>{_e(outline.title)}</h1>", f"<p>Generated: {_e(outline.generated)}</p>"]
    for b in outline.intro:
        out += _block(b, svgs)
    out.append(f"<nav class='toc'><h2>Contents</h2><ul>{toc}</ul></nav>")
    for b in (*outline.sections, *outline.appendix):
        out += _block(b, svgs)
    out.append("</body></html>")
    return "\n".join(x for x in out if x) + "\n"
