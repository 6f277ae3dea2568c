"""Markdown rendering of a report outline: Unicode mathematics in the text, formulas as ``$…$`` and
``$$ … $$`` (LaTeX), an instance check as a one-line note (never entry by entry).

>>> from coupled_curvature.reporting.outline import Outline, Paragraph, Section, Text
>>> print(render_markdown(Outline("T", "now", (), (Section("S", (Paragraph((Text("c**(-2)"),)),)),))))
# T
<BLANKLINE>
Generated: now
<BLANKLINE>
## S
<BLANKLINE>
c⁻²
<BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coupled_curvature.reporting.outline import (Block, Bullets, Code, Details, Display, Figure, Inline, Link, Listing,
                                                 Mark, Math, Outline, Paragraph, Proof, References, Section, Statement,
                                                 Steps, Strong, Table, Text, render_block, render_inline)
from coupled_curvature.reporting.umath import normalise

__all__ = ["render_markdown", "inline_md"]


def _math_text(tex: str) -> str:
    return "\\text{" + tex.replace("\\", "/").replace("{", "(").replace("}", ")") + "}"


def inline_md(parts: tuple[Inline, ...]) -> str:
    """Inline runs as Markdown."""
    return render_inline(parts, _INLINE)


_INLINE = {
    Text: lambda p: normalise(p.text) if p.maths else p.text,
    Code: lambda p: f"`{p.text}`",
    Strong: lambda p: f"__{inline_md(p.parts).strip()}__",
    Mark: lambda p: f"`{p.text}`" if p.kind == "label" else p.text,
    Math: lambda p: p.text if p.plain else f"${p.tex if p.tex is not None else _math_text(p.text)}$",
    Link: lambda p: f"[{p.text}](#{p.target})",
}


def _cell(parts: tuple[Inline, ...]) -> str:
    return inline_md(parts).replace("|", "\\|").replace("\n", " ")


def _table(t: Table) -> list[str]:
    out = ["| " + " | ".join(_cell(c) for c in t.head) + " |", "|" + "---|" * len(t.head)]
    ids = t.row_ids or ("",) * len(t.rows)
    return out + ["| " + (f'<a id="{i}"></a>' if i else "") + " | ".join(_cell(c) for c in r) + " |"
                  for i, r in zip(ids, t.rows)]


def _proof(p: Proof) -> list[str]:
    """A proof: numbered steps, each a sentence with its evidence label (a link to its check) and its
    formula as a display."""
    L = ["*Proof.*", ""]
    for i, st in enumerate(p.steps, 1):
        said = "/".join(st.evidence) if st.passed else "FAIL: " + "/".join(st.evidence)
        cites = "".join(f" [[{lab}]](#ref-{k})" for k, lab in st.cites)
        body = st.reason.rstrip(".,;:")
        L += [f"{i}. {normalise(body)}{cites}{st.reason[len(body):]} [`{said}`](#{st.target})", ""]
        if st.formula is not None:  # indented 4: inside the list item for CommonMark and Python-Markdown alike
            L += ["    $$", "    " + st.formula.tex, "    $$", ""]
    return L + [inline_md(p.closing) + " ∎", ""]


def _steps(s: Steps) -> list[str]:
    L = []
    for i, st in enumerate(s.items, 1):
        mark = "✓" if st.passed else "✗"
        coq = "" if not st.formal else "; Coq: " + ", ".join(f"`{n}`" for n in st.formal)
        L += [f"{i}. {mark} `{st.label}` {st.statement} (checked by {st.method}, {st.verification}{coq})", ""]
        if st.tex:
            L += ["    $$", "    " + st.tex, "    $$", ""]
        if st.instance:
            L += [f"    *Instance:* {st.instance}.", ""]
    return L


def _block(b: Block) -> list[str]:
    return render_block(b, _FORMS, None, "Markdown")


def _section(b: Section, _: None) -> list[str]:
    anchor = [f'<a id="{b.id}"></a>', ""] if b.id else []
    return anchor + ["#" * (b.level + 1) + " " + normalise(b.title), ""] + [ln for x in b.blocks for ln in _block(x)]


def _figure(b: Figure, _: None) -> list[str]:
    cap = inline_md(b.caption)
    return [f"![{cap}]({b.name}.svg)", "", f"*{cap}*", ""]


#: each block's Markdown lines (:func:`~coupled_curvature.reporting.outline.render_block`)
_FORMS: dict[type, Callable[[Any, None], list[str]]] = {
    Section: _section,
    Paragraph: lambda b, _: [inline_md(b.parts), ""],
    Statement: lambda b, _: ["__Statement.__ " + inline_md(b.parts), ""],
    Bullets: lambda b, _: [f"- {inline_md(i)}" for i in b.items] + [""],
    Table: lambda b, _: _table(b) + [""],
    Figure: _figure,
    Display: lambda b, _: ["$$", b.tex, "$$", ""],
    Steps: lambda b, _: _steps(b),
    Proof: lambda b, _: _proof(b),
    References: lambda b, _: [f'- <a id="ref-{k}"></a>[{lab}] {txt}' for k, lab, txt in b.items] + [""],
    Details: lambda b, _: ["<details><summary>" + b.summary + "</summary>", "",
                           *(ln for x in b.blocks for ln in _block(x)), "</details>", ""],
    Listing: lambda b, _: ["```" + b.language, b.text, "```", ""],
}


def render_markdown(outline: Outline) -> str:
    """The report outline as one Markdown page."""
    L = [f"# {outline.title}", "", f"Generated: {outline.generated}", ""]
    for b in (*outline.intro, *outline.sections, *outline.appendix):
        L += _block(b)
    return "\n".join(L)
