"""A report outline as compilable LaTeX source (``pdflatex``/``lualatex``; T1 fonts, lmodern, amsmath, graphicx, longtable, booktabs).

Statements and step descriptions are Unicode mathematics (:mod:`.umath`): their math runs are
typeset as inline math, the rest escaped as text; a step's identity is shown as a display
formula only when it is short (:mod:`.steps`), never an explicit instance written entry by entry.
"""

from __future__ import annotations

import re

from coupled_curvature.reporting.outline import (Block, Bullets, Code, Details, Display, Figure, Inline, Link, Listing,
                                                 Mark, Math, Outline, Paragraph, Section, Steps, Strong, Table, Text,
                                                 render_inline)
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
    """A method name such as ``rewrite:sigma_homogeneity`` that may break after ``:`` and ``_``."""
    return tex_text(name).replace(":", r":\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")




def inline_tex(parts: tuple[Inline, ...]) -> str:
    """Inline runs as LaTeX (Unicode mathematics as ``$…$``, the rest escaped)."""
    return render_inline(parts, _INLINE)


_INLINE = {
    Text: lambda p: _mixed(p.text) if p.maths else tex_text(p.text),
    Code: lambda p: r"\texttt{" + _breakable(p.text) + "}",
    Strong: lambda p: r"\textbf{" + inline_tex(p.parts) + "}",
    Mark: lambda p: rf"\texttt{{[{tex_text(p.text)}]}}" if p.kind == "label" else tex_text(p.text),
    Math: lambda p: f"${p.tex}$" if p.tex is not None else tex_text(p.text),
    Link: lambda p: tex_text(p.text),
}


def _column(w: float | str) -> str:
    return w if isinstance(w, str) else _p(w)


def _longtable(t: Table) -> list[str]:
    names = t.short_head or None
    head = " & ".join(rf"\textbf{{{tex_text(n) if names else inline_tex(c)}}}"
                      for n, c in zip(names or [""] * len(t.head), t.head)) + r" \\ \midrule"
    spec = "".join(_column(w) for w in t.widths)
    L = [rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}", r"\toprule", head, r"\endhead"]
    L += [" & ".join(inline_tex(c) for c in r) + r" \\" for r in t.rows] + [r"\bottomrule", r"\end{longtable}"]
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


def _block(b: Block) -> list[str]:
    if isinstance(b, Section):
        head = (r"\section*{" if b.level == 1 else r"\subsection*{") + _mixed(b.title).replace(" — ", " --- ") + "}"
        return [head, *(ln for x in b.blocks for ln in _block(x))]
    if isinstance(b, Paragraph):
        if all(isinstance(p, Math) or (isinstance(p, Text) and not p.text.strip()) for p in b.parts):
            # a formula in pieces: break between them, ragged right
            return [r"{\raggedright " + inline_tex(b.parts) + r"\par}"]
        return [inline_tex(b.parts) + r"\par"]
    if isinstance(b, Bullets):
        return [r"\begin{itemize}"] + [rf"\item {inline_tex(i)}" for i in b.items] + [r"\end{itemize}"]
    if isinstance(b, Table):
        return _longtable(b)
    if isinstance(b, Figure):
        return [r"\begin{figure}[h]\centering", rf"\includegraphics[width=0.75\linewidth]{{{b.name}.png}}",
                rf"\caption{{{inline_tex(b.caption)}}}", r"\end{figure}"]
    if isinstance(b, Display):
        return [r"\begin{equation*}", b.tex, r"\end{equation*}"]
    if isinstance(b, Steps):
        return _steps(b)
    if isinstance(b, Details):
        L = [r"\begingroup\footnotesize", rf"\textit{{{tex_text(b.summary)}}}\par"]
        for x in b.blocks:
            L += _block(x)
        return L + [r"\endgroup"]
    if isinstance(b, Listing):
        return [r"\begingroup\footnotesize", r"\begin{verbatim}", b.text, r"\end{verbatim}", r"\endgroup"]
    raise TypeError(f"no LaTeX form for {type(b).__name__}")


def render_latex(outline: Outline) -> str:
    """The report outline as one LaTeX document (``pdflatex``/``lualatex``)."""
    L = [r"\documentclass[10pt]{article}", r"\usepackage[T1]{fontenc}", r"\usepackage{lmodern}",
         r"\usepackage{textcomp}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{amsmath,amssymb}",
         r"\usepackage{graphicx}", r"\usepackage{longtable}", r"\usepackage{booktabs}", r"\usepackage{array}",
         r"\allowdisplaybreaks", r"\setlength{\emergencystretch}{3em}", r"\setlength{\tabcolsep}{3pt}",
         rf"\title{{{tex_text(outline.title)}}}", r"\date{}", r"\begin{document}",
         r"\maketitle", f"% Generated: {outline.generated}"]
    for b in (*outline.intro, *outline.sections):
        L += _block(b)
    L.append(r"\end{document}")
    return "\n".join(L) + "\n"
