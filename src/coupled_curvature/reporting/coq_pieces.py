"""Pieces of a formula in three notations at once (Unicode, LaTeX, MathML) and their builders.

:class:`Piece` is what :func:`coupled_curvature.reporting.coq_math.coq_math` returns; the builders
here (an identifier, an operator, words, a number, super- and subscripts, parentheses, a call)
make one piece each, and :func:`join` puts pieces side by side.

>>> p = join(superscript(identifier("w"), Piece("T", "T", "<mi>T</mi>")), identifier("H"), identifier("w"))
>>> p.text, p.tex
('wᵀHw', '{w}^{T} H w')
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

__all__ = ["Piece", "join", "identifier", "operator", "words", "number", "superscript", "subscript", "INV_T",
           "parenthesized", "call"]


@dataclass(frozen=True)
class Piece:
    """One piece of a formula: Unicode ``text``, LaTeX ``tex``, MathML ``mathml`` (inner of ``<math>``)."""

    text: str
    tex: str
    mathml: str


def join(*ps: Piece) -> Piece:
    return Piece("".join(p.text for p in ps), " ".join(p.tex for p in ps if p.tex).replace("  ", " "),
                 "<mrow>" + "".join(p.mathml for p in ps) + "</mrow>")


_GREEK = {"sigma": ("σ", r"\sigma"), "lam": ("λ", r"\lambda"), "phi": ("φ", r"\varphi"), "th": ("θ", r"\theta"),
          "dphi": ("φ′", r"\varphi'"), "d2phi": ("φ″", r"\varphi''"), "mi": ("μᵢ", r"\mu_i"), "mj": ("μⱼ", r"\mu_j")}
_OPS = {"∀": r"\forall", "∃": r"\exists", "⇒": r"\Rightarrow", "⇔": r"\Leftrightarrow", "∧": r"\wedge",
        "∨": r"\vee", "¬": r"\neg", "≠": r"\neq", "≤": r"\le", "∈": r"\in", "∉": r"\notin", "∘": r"\circ",
        "·": r"\cdot", "−": "-", "×": r"\times", "→": r"\to", "<": "<", "=": "=", "+": "+", "/": "/", ",": ",",
        ":": ":", ":=": ":=", "↦": r"\mapsto", "(": "(", ")": ")", "‖": r"\|", "∇": r"\nabla", "∂": r"\partial", "⁺": "^{+}"}
_SUP = str.maketrans("0123456789+-−Tkn()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻ᵀᵏⁿ⁽⁾")
_SUB = str.maketrans("0123456789ijkqrs", "₀₁₂₃₄₅₆₇₈₉ᵢⱼₖqᵣₛ")


def identifier(name: str) -> Piece:
    name = name.rsplit(".", 1)[-1]
    if name in _GREEK:
        u, t = _GREEK[name]
        return Piece(u, t, f"<mi>{u}</mi>")
    tex = name.replace("'", "'") if len(name) == 1 or re.fullmatch(r"[A-Za-z]\d*'?", name) else \
        r"\mathrm{" + name.replace("_", r"\_") + "}"
    if re.fullmatch(r"[A-Za-z]\d+'?", name):  # A1 -> A_1
        tex = f"{name[0]}_{{{name[1:].rstrip(chr(39))}}}" + ("'" if name.endswith("'") else "")
    return Piece(name, tex, f"<mi>{html.escape(name)}</mi>")


def operator(sym: str, space: bool = True) -> Piece:
    u = f" {sym} " if space else sym
    return Piece(u, _OPS.get(sym, sym), f"<mo>{html.escape(sym)}</mo>")


def words(s: str) -> Piece:
    """Words inside a formula; MathML drops an mtext's outer spaces, so they become mspace."""
    sp = "<mspace width='0.3em'/>"
    ml = (sp if s.startswith(" ") else "") + f"<mtext>{html.escape(s.strip())}</mtext>" + (sp if s.endswith(" ") else "")
    return Piece(s, r"\text{" + s.replace("_", r"\_") + "}", ml)


def number(s: str) -> Piece:
    return Piece(s, s.replace("−", "-"), f"<mn>{s}</mn>")


def superscript(base: Piece, exp: Piece) -> Piece:
    small = exp.text.translate(_SUP)
    sup = "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻ᵀᵏⁿ⁽⁾"
    # an exponent that holds a power itself (k^(n+1)) stays in "^(…)": raised twice it would read as kn+1
    flat = all(c in sup for c in small) and not any(c in sup for c in exp.text)
    u = base.text + (small if flat else f"^({exp.text})")
    # a parenthesized base stays ungrouped, "( … )^{2}": TeX may then break a long base across lines
    tex = f"{base.tex}^{{{exp.tex}}}" if _one_group(base.tex) else f"{{{base.tex}}}^{{{exp.tex}}}"
    return Piece(u, tex, f"<msup>{base.mathml}{exp.mathml}</msup>")


def _one_group(tex: str) -> bool:
    """Whether ``tex`` is one parenthesized group: it opens with "(" and that parenthesis closes at its end."""
    t = tex.strip()
    if not (t.startswith("(") and t.endswith(")")):
        return False
    depth = 0
    for i, c in enumerate(t):
        depth += (c == "(") - (c == ")")
        if depth == 0 and i < len(t) - 1:
            return False
    return depth == 0


def subscript(base: Piece, idx: Piece) -> Piece:
    small = idx.text.translate(_SUB)
    ok = all(c in "₀₁₂₃₄₅₆₇₈₉ᵢⱼₖᵣₛ" for c in small)
    u = base.text + (small if ok else f"_({idx.text})" if len(idx.text) > 1 else f"_{idx.text}")
    return Piece(u, f"{{{base.tex}}}_{{{idx.tex}}}", f"<msub>{base.mathml}{idx.mathml}</msub>")


INV_T = Piece("−T", r"-\top", "<mrow><mo>−</mo><mi>T</mi></mrow>")


def parenthesized(p: Piece) -> Piece:
    return join(operator("(", False), p, operator(")", False))


def call(name: str, args: list[Piece], tex_name: str | None = None) -> Piece:
    ident = identifier(name)
    head = Piece(ident.text if tex_name is None else name, tex_name or ident.tex,
                 f"<mi>{html.escape(ident.text if tex_name is None else name)}</mi>")
    inner: list[Piece] = []
    for i, a in enumerate(args):
        inner += ([operator(",", False), Piece(" ", "", "")] if i else []) + [a]
    return join(head, parenthesized(join(*inner)))
