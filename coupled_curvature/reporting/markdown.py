"""Markdown rendering of a report: statements in Unicode mathematics, short step identities in
``$$ … $$`` blocks (LaTeX), an instance check as a one-line note (never entry by entry)."""

from __future__ import annotations

import sympy as sp

from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.content import NUMERIC_HEAD, ReportData, as_math, fmt_num, formal_listing, summary_rows
from coupled_curvature.reporting.precision import CAPTION, precision_table, precision_text
from coupled_curvature.reporting.steps import step_view
from coupled_curvature.reporting.umath import normalise

__all__ = ["render_markdown"]


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _table(rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_cell(c) for c in rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows[1:]]
    return out


def _tex(v) -> str:
    m = as_math(v)
    return sp.latex(m) if not isinstance(m, str) else "\\text{" + m.replace("\\", "/").replace("{", "(").replace("}", ")") + "}"


def render_markdown(data: ReportData) -> str:
    chk = data.check
    L = ["# coupled-curvature: proof catalogue and numeric cross-checks", "",
         f"Generated: {data.generated}", "",
         f"Seed {data.seed}. Trust labels: __exact__ (exact symbolic identity or Gröbner reduction), "
         "__certificate__ (re-checked by the independent Fraction checker), __rewrite__ (a named rule, declared "
         "as a hypothesis), __numeric__ (floating-point evidence, never proof).", "", "## Summary", ""]
    L += _table(summary_rows(chk)) + [""]
    for f in data.figures:
        L += [f"![{f.caption}]({f.name}.svg)", "", f"*{f.caption}*", ""]
    for t, e in chk.entries.items():
        s = chk.statuses[t]
        L += [f"## {t} — {e.title}", "", f"__Status: {s.status}__", "", f"__Statement.__ {normalise(e.statement)}", ""]
        if e.hypotheses:
            L += ["__Hypotheses.__", ""] + [f"- {normalise(h)}" for h in e.hypotheses] + [""]
        if e.rules:
            L += ["Rewrite rules cited (declared hypotheses): " + ", ".join(f"`{r}`" for r in e.rules), ""]
        listing = formal_listing(e)
        if listing:
            names = ", ".join(f"`{n}`" + ("" if k is None else f" ({k} lines)") for n, k in listing)
            L += [f"__Formal (Coq), for every n, depth and width.__ {e.formal_scope or ''}. Coq theorems: {names} "
                  "(pinned statements; `ccurv check --formal` compiles and checks them).", ""]
        if s.reasons:
            L += ["__Reasons for failure.__", ""] + [f"- {r}" for r in s.reasons] + [""]
        if e.steps:
            L += ["### Steps", ""]
            for i, st in enumerate(e.steps, 1):
                mark = "✓" if st.passed else "✗"
                v = step_view(st.description, st.lhs, st.rhs)
                L += [f"{i}. {mark} `{st.label}` {v.statement} (checked by {st.method}, {st.verification})", ""]
                if v.latex:
                    L += ["   $$", "   " + v.latex, "   $$", ""]
                if v.instance:
                    L += [f"   *Instance:* {v.instance}.", ""]
        if e.witnesses:
            L += ["### Witnesses", ""]
            for w in e.witnesses:
                verdict = "no checker" if w.checker is None else f"{w.checker}: {'accepted' if w.accepted else 'REJECTED'}"
                L += [f"- __{w.kind}__ ({verdict}){' — ' + w.note if w.note else ''}", ""]
                L += ["  | field | value |", "  |---|---|"]
                for k, v in w.data.items():
                    L += [f"  | {_cell(k)} | ${_cell(_tex(v))}$ |"]
                L += [""]
        if e.numeric is not None:
            n = e.numeric
            L += ["### Numeric cross-check (evidence)", "", f"Prediction: {n.prediction}. "
                  f"{n.figure_name} = {fmt_num(n.figure)}; agrees: {'yes' if n.agrees else 'NO'}.", ""]
            L += _table([list(NUMERIC_HEAD)] + [[r["net"], r["quantity"], fmt_num(r["measured"]), r["bound"],
                                                  "yes" if r["agrees"] else "NO"] for r in n.rows]) + [""]
    if data.precision is not None:
        L += _precision(data.precision)
    if data.cutoff is not None:
        L += _cutoff(data.cutoff)
    return "\n".join(L)


def _precision(p) -> list[str]:
    caption = CAPTION
    L = ["## Arbitrary precision", ""]
    for para in precision_text(p):
        L += [para, ""]
    L += _table(precision_table(p)) + [""]
    return L + [f"![{caption}](precision.svg)", "", f"*{caption}*", ""]


def _cutoff(c) -> list[str]:
    first, *rest = cs.cutoff_text(c)
    before, _, after = first.partition(cs.FORMULA_TEXT)
    L = ["## Cutoff sensitivity", "", before.rstrip(), "", "$$", cs.FORMULA_TEX, "$$", "", after.lstrip(", "), ""]
    for para in rest:
        L += [para, ""]
    L += [f"![{cs.CAPTION}](cutoff.svg)", "", f"*{cs.CAPTION}*", ""]
    return L + _table(cs.cutoff_table(c)) + [""]
