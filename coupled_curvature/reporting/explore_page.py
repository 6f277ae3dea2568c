"""The explorer's invariance matrix as text, Markdown, HTML and figures (plain data in, pages out).

``mx`` is the :class:`coupled_curvature.numeric.studies.explorer.Matrix` of one ``ccurv explore`` run:
cells (measure × symmetry) with the maximum relative deviation over the sweep, the prediction
and whether they agree, the swept values for the figures, and the BatchNorm eps evidence.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

__all__ = ["DINH", "render_text", "render_markdown", "render_html", "render_eps", "render_dinh", "figures"]

#: the measures of the Dinh demonstration table (raw sharpness beside the invariant ones)
DINH = ("top_eig", "trace", "sam", "D", "Dplus", "adaptive_avg", "fisher_rao", "lambda")


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def _mark(cell: Any) -> str:
    short = {"invariant": "inv", "moves": "mov", "degenerate": "deg"}[cell.predicted]
    return f"{_fmt(cell.deviation)} {short} {'ok' if cell.agrees else 'NO'}"


def render_text(mx: Any) -> str:
    lines = []
    dis = mx.disagreements
    lines.append(f"=== DISAGREEMENTS ({len(dis)}) ===")
    for c in dis:
        lines.append(f"  {c.measure} × {c.symmetry}: deviation {_fmt(c.deviation)}, predicted {c.predicted} "
                     f"({c.reason}) {c.note}")
    if not dis:
        lines.append("  none")
    lines.append("")
    head = ["measure"] + mx.symmetries
    rows = [head] + [[m] + [_mark(mx.cell(m, s)) for s in mx.symmetries] for m in mx.measures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines.append("Invariance matrix: max relative deviation over the sweep, prediction, agreement")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    lines.append("tolerances of 'invariant' cells (1e-9 unless listed):")
    for c in mx.cells:
        if c.predicted == "invariant" and c.tolerance is not None and c.tolerance != 1e-9:
            lines.append(f"  {c.measure} × {c.symmetry}: ≤ {c.tolerance:.1e} ({c.tolerance_reason})")
    agree = sum(c.agrees for c in mx.cells)
    lines.append(f"agreement: {agree}/{len(mx.cells)} cells ({100.0 * agree / max(len(mx.cells), 1):.1f}%)")
    return "\n".join(lines)


def render_markdown(mx: Any) -> str:
    out = ["| measure | " + " | ".join(mx.symmetries) + " |", "|---" * (len(mx.symmetries) + 1) + "|"]
    for m in mx.measures:
        out.append(f"| {m} | " + " | ".join(_mark(mx.cell(m, s)) for s in mx.symmetries) + " |")
    return "\n".join(out) + "\n"


def render_html(mx: Any) -> str:
    rows = []
    for m in mx.measures:
        tds = []
        for s in mx.symmetries:
            c = mx.cell(m, s)
            color = "#dfd" if c.agrees else "#fbb"
            tds.append(f'<td style="background:{color}" title="{html.escape(c.reason)}">{html.escape(_mark(c))}</td>')
        rows.append(f"<tr><th>{html.escape(m)}</th>{''.join(tds)}</tr>")
    head = "".join(f"<th>{html.escape(s)}</th>" for s in mx.symmetries)
    return ("<!doctype html><meta charset='utf-8'><title>invariance matrix</title>"
            f"<table border=1 cellpadding=4><tr><th>measure</th>{head}</tr>{''.join(rows)}</table>\n")


def render_eps(mx: Any) -> str:
    ev = mx.eps_sweep
    if ev is None:
        return ""
    names = list(ev.deviations)
    lines = ["BatchNorm eps evidence: the bn column's disagreeing cells re-measured with every BatchNorm eps set to "
             "each value (same weights); an eps effect falls ∝ eps (log–log slope 1)",
             "eps".ljust(10) + "fn gap".rjust(10) + "".join(m.rjust(16) for m in names)]
    for i, eps in enumerate(ev.eps):
        lines.append(f"{eps:<10.0e}" + _fmt(ev.gaps[i]).rjust(10)
                     + "".join(_fmt(ev.deviations[m][i]).rjust(16) for m in names))
    lines.append("slope".ljust(10) + _fmt_slope(_slope_of(ev.eps, ev.gaps)).rjust(10)
                 + "".join(_fmt_slope(ev.slopes[m]).rjust(16) for m in names))
    return "\n".join(lines)


def _fmt_slope(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _slope_of(xs: Any, ys: Any) -> float | None:
    from coupled_curvature.numeric.studies.stats import loglog_slope

    return loglog_slope(xs, ys)


def render_dinh(mx: Any) -> str:
    if "layer" not in mx.values:
        return ""
    lines = ["Dinh demonstration: α-scale map W_l -> αW_l, W_{l+1} -> W_{l+1}/α at the trained minimum"]
    vals = mx.values["layer"]
    xs = sorted({x for x, _ in next(iter(vals.values()))})
    lines.append("measure".ljust(14) + "".join(f"α={x:g}".rjust(13) for x in xs) + "   max/min")
    for m in DINH:
        if m not in vals:
            continue
        d = dict(vals[m])
        got = [d.get(x) for x in xs]
        finite = [abs(v) for v in got if v]
        ratio = max(finite) / min(finite) if finite and min(finite) > 0 else float("nan")
        lines.append(m.ljust(14) + "".join(_fmt(v).rjust(13) for v in got) + f"   {ratio:.3g}")
    return "\n".join(lines)


def figures(mx: Any, folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for sym, per in mx.values.items():
        fig, ax = plt.subplots(figsize=(7, 5))
        for m, pts in per.items():
            pts = sorted((x, abs(v)) for x, v in pts if v)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{sym} parameter")
        ax.set_ylabel("|measure| (per-block measures: mean |block value|)")
        ax.set_title(f"measures under the {sym} symmetry")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        name = f"{sym}.png"
        fig.savefig(folder / name, dpi=90)
        plt.close(fig)
        made.append(name)
    return made
