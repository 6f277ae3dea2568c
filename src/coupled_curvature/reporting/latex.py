"""A report outline as compilable LaTeX source (``pdflatex``/``lualatex``; T1 fonts, lmodern, amsmath,
amsthm, graphicx, float, longtable, booktabs, hyperref).

The document has a title page, a table of contents (pdflatex twice: :mod:`.pdf`), each theorem's
statement as a theorem numbered by its catalogue id (Theorem T1 …), sections linked from the
contents and from the summary, figures placed where they stand in the outline (``[H]``), and the
raw Coq listings in an appendix (each theorem keeps a one-line reference to its entry there).

Statements and step descriptions are Unicode mathematics (:mod:`.umath`): their math runs are
typeset as inline math, the rest escaped as text; a step's identity is shown as a display
formula only when it is short (:mod:`.steps`), never an explicit instance written entry by entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from coupled_curvature.reporting.outline import (Block, Bullets, Code, Details, Display, Figure, Inline, Link, Listing,
                                                 Mark, Math, Outline, Paragraph, Proof, ProofStep, References, Section,
                                                 Statement,
                                                 Steps, Strong, Table, Text, render_block, render_inline)
from coupled_curvature.reporting.umath import text_latex

__all__ = ["render_latex", "tex_text", "inline_tex"]

_SPECIAL = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "^": r"\^{}",
            "$": r"\$", "{": r"\{", "}": r"\}", "~": r"\~{}", "<": r"$<$", ">": r"$>$", "|": r"$|$"}
_UNICODE = {
    "²": r"$^2$", "³": r"$^3$", "⁴": r"$^4$", "¹": r"$^1$", "⁺": r"$^+$", "⁻": r"$^-$", "ᵀ": r"$^T$",
    "·": r"$\cdot$", "½": r"$\frac12$", "ö": r"\"o", "Δ": r"$\Delta$", "Π": r"$\Pi$", "Σ": r"$\Sigma$",
    "α": r"$\alpha$", "δ": r"$\delta$", "θ": r"$\theta$", "κ": r"$\kappa$", "λ": r"$\lambda$", "π": r"$\pi$",
    "ρ": r"$\rho$", "σ": r"$\sigma$", "τ": r"$\tau$", "φ": r"$\varphi$", "γ": r"$\gamma$", "ε": r"$\varepsilon$",
    "–": "--", "—": "---", "‖": r"$\|$", "…": r"\dots{}", "ℓ": r"$\ell$", "∂": r"$\partial$", "∇": r"$\nabla$",
    "−": "-", "∘": r"$\circ$", "∠": r"$\angle$", "≡": r"$\equiv$", "≤": r"$\le$", "≥": r"$\ge$", "⊗": r"$\otimes$",
    "⟨": r"$\langle$", "⟩": r"$\rangle$", "→": r"$\to$", "⇔": r"$\Leftrightarrow$", "⇒": r"$\Rightarrow$",
    "∈": r"$\in$", "∉": r"$\notin$", "≠": r"$\ne$", "≈": r"$\approx$", "∥": r"$\parallel$", "×": r"$\times$",
    "✓": "ok", "✗": "FAIL", "′": "'", "⋊": r"$\rtimes$", "∀": r"$\forall$", "√": r"$\surd$", "∞": r"$\infty$",
    "±": r"$\pm$", "∓": r"$\mp$", "·": r"$\cdot$", "’": "'", "“": "``", "”": "''",
    "ᵏ": r"$^k$", "ⁿ": r"$^n$", "ℝ": r"$\mathbf{R}$",
}


def tex_text(s: object) -> str:
    """Escape plain text for LaTeX; math-like Unicode becomes inline math, anything else unknown ``?``.

    >>> tex_text("‖g‖² ≤ 1 & D⁺")
    '$\\\\|$g$\\\\|$$^2$ $\\\\le$ 1 \\\\& D$^+$'
    """
    out = []
    for ch in str(s):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append(_UNICODE.get(ch, "?"))
    return "".join(out)


def _text_specials(text: str) -> str:
    text = re.sub(r"(?<!\\)([_#%&])", r"\\\1", text)
    return re.sub(r"(?<!\\)\^", r"\\^{}", text)


def _ascii_math(tex: str) -> str:
    # text-mode specials inside \text{...} must be escaped (some labels arrive escaped already)
    tex = "".join(_UNICODE.get(ch, "?").strip("$") if ord(ch) >= 128 else ch for ch in tex)
    return re.sub(r"\\text\{([^{}]*)\}", lambda m: r"\text{" + _text_specials(m.group(1)) + "}", tex)


def _p(width: float) -> str:
    """A ragged-right paragraph column of ``width`` times the line width."""
    return rf">{{\raggedright\arraybackslash}}p{{{width}\linewidth}}"


def _mixed(text: str) -> str:
    """Unicode mathematics in running text: math runs as ``$…$``, the rest escaped."""
    return text_latex(text, tex_text)


def _breakable(name: str) -> str:
    """A method name such as ``rewrite:sigma_homogeneity`` that may break after ``:`` and ``_``; a
    command's ``--formal`` keeps its two hyphens (``-{}-``: no en dash), so that a copied command works.

    >>> _breakable("ccurv check --formal")
    'ccurv check -{}-{}formal'
    """
    out = tex_text(name).replace("-", "-{}").replace(r"\_", r"\_\allowbreak{}")
    for ch in ":+.":
        out = out.replace(ch, ch + r"\allowbreak{}")
    return out




def inline_tex(parts: tuple[Inline, ...]) -> str:
    """Inline runs as LaTeX (Unicode mathematics as ``$…$``, the rest escaped)."""
    return render_inline(parts, _INLINE)


_INLINE = {
    Text: lambda p: _mixed(p.text) if p.maths else tex_text(p.text),
    Code: lambda p: r"\texttt{" + _breakable(p.text) + "}",
    Strong: lambda p: r"\textbf{" + inline_tex(p.parts) + "}",
    Mark: lambda p: rf"\texttt{{[{tex_text(p.text)}]}}" if p.kind == "label" else tex_text(p.text),
    Math: lambda p: f"${p.tex}$" if p.tex is not None else tex_text(p.text),
    Link: lambda p: rf"\hyperref[{_label(p.target)}]{{{tex_text(p.text)}}}",
}


def _label(target: str) -> str:
    """A LaTeX label for a section id or a listing's name (letters, digits, ``:``, ``.``, ``-`` only).

    >>> _label("T1"), _label("T04_invariance_group.T4_witness")
    ('sec:T1', 'sec:T04-invariance-group.T4-witness')
    """
    return "sec:" + re.sub(r"[^A-Za-z0-9.:-]", "-", target)


def _column(w: float | str) -> str:
    return w if isinstance(w, str) else _p(w)


def _longtable(t: Table) -> list[str]:
    names = t.short_head or None
    head = " & ".join(rf"\textbf{{{tex_text(n) if names else inline_tex(c)}}}"
                      for n, c in zip(names or [""] * len(t.head), t.head)) + r" \\ \midrule"
    spec = "".join(_column(w) for w in t.widths)
    L = [rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}", r"\toprule", head, r"\endhead"]
    ids = t.row_ids or ("",) * len(t.rows)
    L += [(rf"\hypertarget{{{i}}}{{}}" if i else "") + " & ".join(inline_tex(c) for c in r) + r" \\"
          for i, r in zip(ids, t.rows)] + [r"\bottomrule", r"\end{longtable}"]
    return [r"\begingroup\small"] + L + [r"\endgroup"] if t.small else L


def _steps(s: Steps) -> list[str]:
    L = [r"\begin{enumerate}"]
    for st in s.items:
        mark = r"$\checkmark$" if st.passed else r"\textbf{FAIL}"
        coq = "" if not st.formal else "; Coq: " + ", ".join(rf"\texttt{{{_breakable(n)}}}" for n in st.formal)
        L.append(rf"\item {mark} \texttt{{[{st.label}]}} {_mixed(st.statement)} "
                 rf"{{\small (checked by {_breakable(st.method)}, {tex_text(st.verification)}{coq})}}")
        if st.tex:
            L += [r"\[", st.tex, r"\]"]
        if st.instance:
            L.append(rf"\par{{\footnotesize Instance: {_mixed(st.instance)}.}}")
    return L + [r"\end{enumerate}"]


def _evidence(st: ProofStep) -> str:
    r"""A proof step's evidence label, linked to its check (``\evidence{anchor}{label}``)."""
    said = "/".join(st.evidence) if st.passed else "FAIL: " + "/".join(st.evidence)
    return rf"\evidence{{{st.target}}}{{{tex_text(said)}}}"


def _proof(p: Proof) -> list[str]:
    """A proof: each step a sentence, then its formula as a display tagged on the right with the
    step's evidence label (a step without a formula: the label at the end of its line)."""
    L = [r"\begin{proof}"]
    for st in p.steps:
        stop = re.fullmatch(r"(.*?)([.,;:]?)", st.reason, re.S)  # a citation goes before the stop
        assert stop is not None, "the pattern matches every string"
        body, end = stop.groups()
        reason = _mixed(body) + ("~\\cite{" + ",".join(k for k, _ in st.cites) + "}" if st.cites else "") + end
        if st.formula is None:
            L.append(reason + r"\hfill\mbox{" + _evidence(st) + r"}\par")
        else:
            L += [reason, r"\begin{equation*}", st.formula.tex, rf"\tag*{{{_evidence(st)}}}",
                  r"\end{equation*}"]
    return L + [inline_tex(p.closing), r"\end{proof}"]


def _block(b: Block, appendix: list[Listing]) -> list[str]:
    """``b`` as LaTeX lines; a named listing goes to ``appendix`` and leaves a reference to it."""
    return render_block(b, _FORMS, appendix, "LaTeX")


def _section(b: Section, appendix: list[Listing]) -> list[str]:
    title = _mixed(b.title).replace(" — ", " --- ")
    if b.level != 1:
        return [r"\subsection*{" + title + "}", *(ln for x in b.blocks for ln in _block(x, appendix))]
    head = [r"\section*{" + title + "}", r"\addcontentsline{toc}{section}{" + title + "}"]
    head += [rf"\label{{{_label(b.id)}}}"] if b.id else []
    return head + [ln for x in b.blocks for ln in _block(x, appendix)]


def _details(b: Details, appendix: list[Listing]) -> list[str]:
    listings = [x for x in b.blocks if isinstance(x, Listing)]
    if b.blocks and len(listings) == len(b.blocks) and all(x.name for x in listings):
        appendix += listings  # raw listings: in the appendix, a one-line reference here
        return [r"{\small Coq: " + ", ".join(rf"\texttt{{{_breakable(x.name)}}}" for x in listings)
                + r", printed as coqc prints it in Appendix~\ref{sec:coq-listings}.\par}"]
    L = [r"\begingroup\footnotesize", rf"\textit{{{tex_text(b.summary)}}}\par"]
    for x in b.blocks:
        L += _block(x, appendix)
    return L + [r"\endgroup"]


def _paragraph(b: Paragraph, _: list[Listing]) -> list[str]:
    if all(isinstance(p, Math) or (isinstance(p, Text) and not p.text.strip()) for p in b.parts):
        # a formula in pieces: break between them, ragged right
        return [r"{\raggedright " + inline_tex(b.parts) + r"\par}"]
    return [inline_tex(b.parts) + r"\par"]


#: each block's LaTeX lines, given the appendix that named listings go to
#: (:func:`~coupled_curvature.reporting.outline.render_block`)
_FORMS: dict[type, Callable[[Any, list[Listing]], list[str]]] = {
    Section: _section,
    Statement: lambda b, _: [rf"\begin{{catalogue}}{{{tex_text(b.label)}}}{{{_mixed(b.title)}}}", inline_tex(b.parts),
                             r"\end{catalogue}"],
    Details: _details,
    Paragraph: _paragraph,
    Bullets: lambda b, _: [r"\begin{itemize}"] + [rf"\item {inline_tex(i)}" for i in b.items] + [r"\end{itemize}"],
    Table: lambda b, _: _longtable(b),
    Figure: lambda b, _: [r"\begin{figure}[H]\centering", rf"\includegraphics[width=0.75\linewidth]{{{b.name}.png}}",
                          rf"\caption{{{inline_tex(b.caption)}}}", rf"\label{{fig:{b.name}}}", r"\end{figure}"],
    Display: lambda b, _: [r"\begin{equation*}", b.tex, r"\end{equation*}"],
    Steps: lambda b, _: _steps(b),
    Proof: lambda b, _: _proof(b),
    # thebibliography's own heading is left out: the section has one
    References: lambda b, _: ([r"\begingroup\renewcommand{\section}[2]{}",
                               rf"\begin{{thebibliography}}{{{len(b.items)}}}"]
                              + [rf"\bibitem[{tex_text(lab)}]{{{k}}} {tex_text(txt)}" for k, lab, txt in b.items]
                              + [r"\end{thebibliography}", r"\endgroup"]),
    Listing: lambda b, _: [r"\begingroup\footnotesize", r"\begin{verbatim}", b.text, r"\end{verbatim}",
                           r"\endgroup"],
}


#: a theorem of the catalogue, numbered by its id: \begin{catalogue}{T1}{Transformation law}
_THEOREM = [r"\newtheorem*{catalogueinner}{\cataloguename}", r"\newcommand{\cataloguename}{}",
            r"\newenvironment{catalogue}[2]{\renewcommand{\cataloguename}{Theorem #1}\begin{catalogueinner}[#2]}"
            r"{\end{catalogueinner}}"]


def _lettered(b: Section, appendix: list[Listing]) -> list[str]:
    """An appendix section: numbered (A, A.1, …) and labelled, so that links can reach it."""
    title = _mixed(b.title).replace(" — ", " --- ")
    head = [r"\clearpage" if b.level == 1 else "", ("\\section{" if b.level == 1 else "\\subsection{") + title + "}"]
    head += [rf"\label{{{_label(b.id)}}}"] if b.id else []
    body = [ln for x in b.blocks for ln in (_lettered(x, appendix) if isinstance(x, Section) else _block(x, appendix))]
    return [x for x in head if x] + body


#: a proof step's evidence label, linked to its check: \evidence{check-T1-3}{formal}
_EVIDENCE = r"\newcommand{\evidence}[2]{\hyperlink{#1}{\textsf{\footnotesize[#2]}}}"


def _appendix(listings: list[Listing], sections: tuple[Section, ...]) -> list[str]:
    """The appendices: the raw Coq listings (Appendix A), then the outline's appendix sections."""
    if not listings and not sections:
        return []
    L = [r"\clearpage", r"\appendix"]
    if listings:
        L += [r"\section{Coq statements as coqc prints them}", r"\label{sec:coq-listings}",
              "Each pinned Coq theorem cited in the sections above, verbatim; the sections give them as mathematics."]
    for x in listings:
        L += [r"\subsection*{\texttt{" + _breakable(x.name) + "}}", rf"\label{{{_label(x.name)}}}",
              r"\begingroup\footnotesize", r"\begin{verbatim}", x.text, r"\end{verbatim}", r"\endgroup"]
    for b in sections:
        L += _lettered(b, listings)
    return L


def render_latex(outline: Outline) -> str:
    r"""The report outline as one LaTeX document (``pdflatex``/``lualatex``, compiled twice for the
    table of contents and the references).

    >>> o = Outline("demo", "2000-01-01", (), (Section("T1 — Law", (Statement("T1", "Law", (Text("D = RQ"),)),), "T1"),))
    >>> tex = render_latex(o)
    >>> "\\tableofcontents" in tex and "\\begin{catalogue}{T1}{Law}" in tex and "\\label{sec:T1}" in tex
    True
    """
    L = [r"\documentclass[10pt]{article}", r"\usepackage[T1]{fontenc}", r"\usepackage{lmodern}",
         r"\usepackage{textcomp}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{amsmath,amssymb,amsthm}",
         r"\usepackage{graphicx}", r"\usepackage{float}", r"\usepackage{longtable}", r"\usepackage{booktabs}",
         r"\usepackage{array}", r"\usepackage[hidelinks,bookmarksnumbered]{hyperref}", *_THEOREM, _EVIDENCE,
         r"\allowdisplaybreaks", r"\setlength{\emergencystretch}{3em}", r"\setlength{\tabcolsep}{3pt}",
         rf"\title{{{tex_text(outline.title)}}}", rf"\date{{Generated: {tex_text(outline.generated)}}}",
         r"\begin{document}", r"\begin{titlepage}", r"\maketitle", r"\thispagestyle{empty}"]
    appendix: list[Listing] = []
    for b in outline.intro:
        L += _block(b, appendix)
    L += [r"\end{titlepage}", r"\tableofcontents", r"\clearpage"]
    for b in outline.sections:
        L += _block(b, appendix)
    L += _appendix(appendix, outline.appendix) + [r"\end{document}"]
    return "\n".join(L) + "\n"
