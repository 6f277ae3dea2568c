"""A compilable LaTeX source (``pdflatex``/``lualatex``; T1 fonts, lmodern, amsmath, graphicx, longtable, booktabs).

Statements and step descriptions are Unicode mathematics (:mod:`.umath`): their math runs are
typeset as inline math, the rest escaped as text; a step's identity is shown as a display
formula only when it is short (:mod:`.steps`), never an explicit instance written entry by entry.
"""

from __future__ import annotations

import re

import sympy as sp

from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.content import NUMERIC_HEAD, ReportData, as_math, fmt_num, summary_rows
from coupled_curvature.reporting.precision import CAPTION, POWER, precision_table, precision_text
from coupled_curvature.reporting.steps import step_view
from coupled_curvature.reporting.umath import text_latex

__all__ = ["render_latex", "tex_text"]

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


def _math(v) -> str:
    m = as_math(v)
    return "$" + sp.latex(m) + "$" if not isinstance(m, str) else tex_text(m)


def _text_specials(text: str) -> str:
    text = re.sub(r"(?<!\\)([_#%&])", r"\\\1", text)
    return re.sub(r"(?<!\\)\^", r"\\^{}", text)


def _ascii_math(tex: str) -> str:
    # text-mode specials inside \text{...} must be escaped (some labels arrive escaped already)
    tex = "".join(_UNICODE.get(ch, "?").strip("$") if ord(ch) >= 128 else ch for ch in tex)
    return re.sub(r"\\text\{([^{}]*)\}", lambda m: r"\text{" + _text_specials(m.group(1)) + "}", tex)


def _longtable(rows: list[list[str]], spec: str) -> list[str]:
    head = " & ".join(rf"\textbf{{{c}}}" for c in rows[0]) + r" \\ \midrule"
    return [rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}", r"\toprule", head, r"\endhead"] + \
        [" & ".join(r) + r" \\" for r in rows[1:]] + [r"\bottomrule", r"\end{longtable}"]


def _p(width: float) -> str:
    """A ragged-right paragraph column of ``width`` times the line width."""
    return rf">{{\raggedright\arraybackslash}}p{{{width}\linewidth}}"


def _mixed(text: str) -> str:
    """Unicode mathematics in running text: math runs as ``$…$``, the rest escaped."""
    return text_latex(text, tex_text)


def _breakable(name: str) -> str:
    """A method name such as ``rewrite:sigma_homogeneity`` that may break after ``:`` and ``_``."""
    return tex_text(name).replace(":", r":\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")


def _steps(steps) -> list[str]:
    L = [r"\subsection*{Steps}", r"\begin{enumerate}"]
    for st in steps:
        v = step_view(st.description, st.lhs, st.rhs)
        mark = r"$\checkmark$" if st.passed else r"\textbf{FAIL}"
        L.append(rf"\item {mark} \texttt{{[{st.label}]}} {_mixed(v.statement)} "
                 rf"{{\small (checked by {_breakable(st.method)}, {tex_text(st.verification)})}}")
        if v.latex:
            L += [r"\[", v.latex, r"\]"]
        if v.instance:
            L.append(rf"\par{{\footnotesize Instance: {_mixed(v.instance)}.}}")
    return L + [r"\end{enumerate}"]


def render_latex(data: ReportData) -> str:
    chk = data.check
    L = [r"\documentclass[10pt]{article}", r"\usepackage[T1]{fontenc}", r"\usepackage{lmodern}",
         r"\usepackage{textcomp}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{amsmath,amssymb}",
         r"\usepackage{graphicx}", r"\usepackage{longtable}", r"\usepackage{booktabs}", r"\usepackage{array}",
         r"\allowdisplaybreaks", r"\setlength{\emergencystretch}{3em}", r"\setlength{\tabcolsep}{3pt}",
         r"\title{coupled-curvature: proof catalogue and numeric cross-checks}", r"\date{}", r"\begin{document}",
         r"\maketitle", f"% Generated: {data.generated}",
         tex_text(f"Seed {data.seed}. Trust labels: exact (exact symbolic identity or Gröbner reduction), certificate "
                  "(re-checked by the independent Fraction checker), rewrite (a named rule, declared as a hypothesis), "
                  "numeric (floating-point evidence, never proof)."),
         r"\section*{Summary}"]
    rows = summary_rows(chk)
    short = {"theorem": "id", "certificate": "cert.", "rewrite": "rewr.", "numeric": "num.", "numeric figure": "numeric cross-check"}
    rows = [[tex_text(short.get(c, c)) for c in rows[0]]] + [[tex_text(r[0]), _mixed(r[1]), *map(tex_text, r[2:])]
                                                             for r in rows[1:]]
    L += [r"\begingroup\small"] + _longtable(rows, _p(0.05) + _p(0.2) + _p(0.08) + "rrrr" + _p(0.37)) + [r"\endgroup"]
    for f in data.figures:
        L += [r"\begin{figure}[h]\centering", rf"\includegraphics[width=0.75\linewidth]{{{f.name}.png}}",
              rf"\caption{{{tex_text(f.caption)}}}", r"\end{figure}"]
    for t, e in chk.entries.items():
        s = chk.statuses[t]
        L += [rf"\section*{{{t} --- {_mixed(e.title)}}}", rf"\textbf{{Status: {s.status}}}\par",
              rf"\textbf{{Statement.}} {_mixed(e.statement)}\par"]
        if e.hypotheses:
            L += [r"\textbf{Hypotheses.}", r"\begin{itemize}"] + [rf"\item {_mixed(h)}" for h in e.hypotheses] + [r"\end{itemize}"]
        if e.rules:
            L.append(r"Rewrite rules cited (declared hypotheses): " + tex_text(", ".join(e.rules)) + r"\par")
        if s.reasons:
            L += [r"\textbf{Reasons for failure.}", r"\begin{itemize}"] + [rf"\item {_mixed(r)}" for r in s.reasons] + [r"\end{itemize}"]
        if e.steps:
            L += _steps(e.steps)
        if e.witnesses:
            L.append(r"\subsection*{Witnesses}")
            for w in e.witnesses:
                verdict = "no checker" if w.checker is None else f"{w.checker}: {'accepted' if w.accepted else 'REJECTED'}"
                L.append(rf"\textbf{{{_mixed(w.kind)}}} ({tex_text(verdict)}) {_mixed(w.note)}\par")
                L += _longtable([["field", "value"]] + [[tex_text(k), _math(v)] for k, v in w.data.items()],
                                _p(0.2) + _p(0.78))
        if e.numeric is not None:
            n = e.numeric
            L += [r"\subsection*{Numeric cross-check (evidence)}",
                  _mixed(f"Prediction: {n.prediction}. {n.figure_name} = {fmt_num(n.figure)}; agrees: "
                         f"{'yes' if n.agrees else 'NO'}.") + r"\par"]
            rows = [list(NUMERIC_HEAD)] + [[tex_text(r["net"]), _mixed(r["quantity"]), fmt_num(r["measured"]),
                                            _mixed(r["bound"]), "yes" if r["agrees"] else "NO"] for r in n.rows]
            L += [r"\begingroup\small"] + _longtable(rows, _p(0.22) + _p(0.36) + "r" + _p(0.2) + "l") + [r"\endgroup"]
    if data.precision is not None:
        L += _precision(data.precision)
    if data.cutoff is not None:
        L += _cutoff(data.cutoff)
    L.append(r"\end{document}")
    return "\n".join(L) + "\n"


def _precision(p) -> list[str]:
    def tex(text: str) -> str:  # escaped text, 10^-dps in math mode
        out, at = [], 0
        for m in POWER.finditer(text):
            exp = m.group(1).replace("dps", r"\mathrm{dps}").replace("−", "-")
            out += [tex_text(text[at:m.start()]), f"$10^{{-{exp}}}$"]
            at = m.end()
        return "".join(out + [tex_text(text[at:])])

    L = [r"\section*{Arbitrary precision}"] + [tex(t) + r"\par" for t in precision_text(p)]
    L += [r"\begingroup\small"] + _longtable([[tex(c) for c in r] for r in precision_table(p)], "rrrrrrl")
    L.append(r"\endgroup")
    return L + [r"\begin{figure}[h]\centering", r"\includegraphics[width=0.75\linewidth]{precision.png}",
                rf"\caption{{{tex(CAPTION)}}}", r"\end{figure}"]


def _cutoff(c) -> list[str]:
    first, *rest = cs.cutoff_text(c)
    before, _, after = first.partition(cs.FORMULA_TEXT)
    L = [r"\section*{Cutoff sensitivity}", tex_text(before.rstrip()), r"\begin{equation*}", cs.FORMULA_TEX,
         r"\end{equation*}", tex_text(after.lstrip(", ")) + r"\par"]
    L += [tex_text(t) + r"\par" for t in rest]
    L += [r"\begin{figure}[h]\centering", r"\includegraphics[width=0.75\linewidth]{cutoff.png}",
          rf"\caption{{{tex_text(cs.CAPTION)}}}", r"\end{figure}"]
    L += [r"\begingroup\small"] + _longtable([[tex_text(x) for x in r] for r in cs.cutoff_table(c)], "llrrlr")
    return L + [r"\endgroup"]
