"""Self-contained HTML rendering: presentation MathML built at report time, inline CSS, no scripts."""

from __future__ import annotations

import html as _html

from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.content import NUMERIC_HEAD, ReportData, as_math, fmt_num, summary_rows
from coupled_curvature.reporting.mathml import identity_mathml, to_mathml
from coupled_curvature.reporting.precision import CAPTION, POWER, precision_table, precision_text

__all__ = ["render_html"]

_CSS = """
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6rem 0 1.2rem; font-size: 0.92rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; vertical-align: middle; text-align: left; }
th { background: #f2f2f2; }
.proved { color: #126b12; font-weight: bold; } .failed { color: #b00020; font-weight: bold; }
.evidence { color: #8a5a00; font-weight: bold; }
.label { font-family: monospace; padding: 0 0.3rem; border-radius: 3px; background: #eef; }
.label-numeric { background: #fde9c8; } .label-rewrite { background: #e6f4e6; } .label-certificate { background: #e8e0f8; }
math { font-size: 1.05em; } td.math { overflow-x: auto; max-width: 40rem; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
section { border-top: 2px solid #ddd; margin-top: 1.5rem; }
"""


def _e(s: object) -> str:
    return _html.escape(str(s))


def _table(rows: list[list[str]], raw: bool = False) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(data: ReportData) -> str:
    chk = data.check
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>coupled-curvature: proof catalogue</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>coupled-curvature: proof catalogue and numeric cross-checks</h1>",
           f"<p>Generated: {_e(data.generated)}</p>",
           f"<p>Seed {data.seed}. Trust labels: <span class='label'>exact</span> exact symbolic identity or Gröbner "
           "reduction; <span class='label label-certificate'>certificate</span> re-checked by the independent "
           "Fraction checker; <span class='label label-rewrite'>rewrite</span> a named rule, declared as a "
           "hypothesis; <span class='label label-numeric'>numeric</span> floating-point evidence, never proof.</p>",
           "<h2>Summary</h2>"]
    rows = summary_rows(chk)
    rows = [rows[0]] + [[f"<a href='#{r[0]}'>{r[0]}</a>", _e(r[1]), f"<span class='{r[2]}'>{r[2]}</span>",
                         *map(_e, r[3:])] for r in rows[1:]]
    out.append(_table(rows, raw=True))
    for f in data.figures:
        out.append(f"<figure><img src='{f.name}.svg' alt='{_e(f.caption)}'><figcaption>{_e(f.caption)}</figcaption></figure>")
    for t, e in chk.entries.items():
        s = chk.statuses[t]
        out += [f"<section id='{t}'><h2>{t} — {_e(e.title)}</h2>",
                f"<p>Status: <span class='{s.status}'>{s.status}</span></p>",
                f"<p><b>Statement.</b> {_e(e.statement)}</p>"]
        if e.hypotheses:
            out.append("<p><b>Hypotheses.</b></p><ul>" + "".join(f"<li>{_e(h)}</li>" for h in e.hypotheses) + "</ul>")
        if e.rules:
            out.append("<p>Rewrite rules cited (declared hypotheses): " + ", ".join(f"<code>{_e(r)}</code>" for r in e.rules) + "</p>")
        if s.reasons:
            out.append("<p><b>Reasons for failure.</b></p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in s.reasons) + "</ul>")
        if e.steps:
            rows = [["#", "", "step", "identity", "trust", "method"]]
            for i, st in enumerate(e.steps, 1):
                rows.append([str(i), "✓" if st.passed else "✗", _e(st.description),
                             identity_mathml(st.lhs, st.rhs),
                             f"<span class='label label-{st.label}'>{st.label}</span>",
                             _e(f"{st.method}, {st.verification}")])
            out += ["<h3>Steps</h3>", _table(rows, raw=True).replace("<td><math", "<td class='math'><math")]
        if e.witnesses:
            out.append("<h3>Witnesses</h3>")
            for w in e.witnesses:
                verdict = "no checker" if w.checker is None else f"{w.checker}: {'accepted' if w.accepted else 'REJECTED'}"
                out.append(f"<p><b>{_e(w.kind)}</b> ({_e(verdict)}){' — ' + _e(w.note) if w.note else ''}</p>")
                rows = [["field", "value"]] + [[_e(k), to_mathml(as_math(v))] for k, v in w.data.items()]
                out.append(_table(rows, raw=True))
        if e.numeric is not None:
            n = e.numeric
            out += ["<h3>Numeric cross-check (evidence)</h3>",
                    f"<p>Prediction: {_e(n.prediction)}. {_e(n.figure_name)} = {fmt_num(n.figure)}; agrees: "
                    f"{'yes' if n.agrees else 'NO'}.</p>",
                    _table([list(NUMERIC_HEAD)] + [[r["net"], r["quantity"], fmt_num(r["measured"]), r["bound"],
                                                    "yes" if r["agrees"] else "NO"] for r in n.rows])]
        out.append("</section>")
    if data.precision is not None:
        out += _precision(data.precision)
    if data.cutoff is not None:
        out += _cutoff(data.cutoff)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _precision(p) -> list[str]:
    def sup(text: str) -> str:  # escaped text, 10^-dps as a superscript
        return POWER.sub(lambda m: f"10<sup>−{m.group(1).replace('-', '−')}</sup>", _e(text))

    out = ["<section id='precision'><h2>Arbitrary precision</h2>"]
    out += [f"<p>{sup(t)}</p>" for t in precision_text(p)]
    rows = precision_table(p)
    rows = [[sup(c) for c in rows[0]]] + [
        [_e(c) for c in r[:-1]] + [f"<span class='{'proved' if r[-1] == 'yes' else 'failed'}'>{r[-1]}</span>"]
        for r in rows[1:]]
    out.append(_table(rows, raw=True))
    out.append(f"<figure><img src='precision.svg' alt='{_e(CAPTION)}'><figcaption>{sup(CAPTION)}</figcaption></figure>")
    out.append("</section>")
    return out


#: the cutoff-sensitivity curve, cutoff_section.FORMULA_TEXT as presentation MathML
_FORMULA = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><mrow>'
    "<msubsup><mi>D</mi><mi>b</mi><mo>+</mo></msubsup><mo>(</mo><mi>τ</mi><mo>)</mo><mo>=</mo>"
    "<mfrac><mrow><msup><mi>w</mi><mo>⊤</mo></msup><msubsup><mi>H</mi><mi>τ</mi><mo>+</mo></msubsup><mi>w</mi></mrow>"
    "<mrow><msup><mi>w</mi><mo>⊤</mo></msup><mi>w</mi></mrow></mfrac>"
    "<msup><mrow><mo>‖</mo><mi>g</mi><mo>‖</mo></mrow><mn>2</mn></msup><mo>,</mo><mspace width='1em'/>"
    "<mi>τ</mi><mo>=</mo><mtext>pinv_rtol</mtext><mo>·</mo><mo>max</mo><mo>|</mo><mi>λ</mi><mo>|</mo>"
    "</mrow></math>"
)


def _cutoff(c) -> list[str]:
    first, *rest = cs.cutoff_text(c)
    before, _, after = first.partition(cs.FORMULA_TEXT)
    out = ["<section id='cutoff'><h2>Cutoff sensitivity</h2>",
           f"<p>{_e(before.rstrip())}</p>", _FORMULA, f"<p>{_e(after.lstrip(', '))}</p>"]
    out += [f"<p>{_e(t)}</p>" for t in rest]
    out.append(f"<figure><img src='cutoff.svg' alt='{_e(cs.CAPTION)}'><figcaption>{_e(cs.CAPTION)}</figcaption></figure>")
    rows = cs.cutoff_table(c)
    rows = [[_e(x) for x in rows[0]]] + [
        [_e(x) for x in r[:4]] + [f"<span class='{'proved' if r[4] == 'yes' else 'evidence'}'>{r[4]}</span>", _e(r[5])]
        for r in rows[1:]]
    out.append(_table(rows, raw=True))
    out.append("</section>")
    return out
