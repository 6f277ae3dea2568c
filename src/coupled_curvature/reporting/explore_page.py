"""The explorer's invariance matrix as text, Markdown, HTML and figures (plain data in, pages out).

``mx`` is the :class:`coupled_curvature.numeric.studies.explorer.Matrix` of one ``ccurv explore`` run:
cells (measure × symmetry) with the maximum relative deviation over the sweep, the prediction
and whether they agree, the swept values for the figures, and the BatchNorm eps evidence.
"""

from __future__ import annotations

import html
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib loads only when a figure is drawn (not for ccurv --help)
    from matplotlib.figure import Figure

__all__ = ["DINH", "render_text", "render_markdown", "render_html", "render_eps", "render_dinh", "figures",
           "figure_set", "explore_figure", "eps_figure"]

#: the measures of the Dinh demonstration table (raw sharpness beside the invariant ones)
DINH = ("top_eig", "trace", "sam", "D", "Dplus", "adaptive_avg", "fisher_rao", "lambda")


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def _short(cell: Any) -> str:
    """``inv``, ``mov``, ``deg``, or ``inv→0`` for a cell judged as BatchNorm eps -> 0."""
    if cell.eps_limit is not None:
        return "inv→0"
    return {"invariant": "inv", "moves": "mov", "degenerate": "deg"}[cell.predicted]


def _mark(cell: Any) -> str:
    return f"{_fmt(cell.deviation)} {_short(cell)} {'ok' if cell.agrees else 'NO'}"


def _criterion(c: Any) -> str:
    """What the cell's deviation is compared with, in a few characters."""
    if c.eps_limit is not None:
        lim = c.eps_limit
        return f"inv as eps→0, order {_fmt_slope(lim.order)}"
    if c.predicted == "degenerate":
        return "deg (T10)"
    sign = "≤" if c.predicted == "invariant" else "≥"
    return f"{_short(c)} {sign} {_fmt(c.tolerance)}"


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


_CSS = """
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
.scroll { max-width: 100%; overflow-x: auto; } table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.4rem; text-align: left; }
th { background: #f2f2f2; } td.ok { background: #e3f4e3; } td.NO { background: #fbd5d5; font-weight: bold; }
td.deg { background: #eee; } .key span { display: inline-block; padding: 0 0.4rem; margin-right: 0.3rem; border: 1px solid #ccc; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
pre { overflow-x: auto; font-size: 0.8rem; background: #f8f8f8; padding: 0.5rem; }
td a { color: inherit; } td small { color: #444; } table.details td { font-size: 0.75rem; max-width: 22rem; }
tr:target th, tr:target td { background: #fff3b0; }
"""

_LEGEND = (("inv", "predicted invariant: the measure must not change beyond its tolerance"),
           ("inv→0", "predicted invariant under the exact symmetry, which BatchNorm with eps > 0 reaches only "
                     "as eps → 0: the change falls as eps^p (p fitted on larger eps, at least 0.75) and the "
                     "run's change is what that law predicts"),
           ("mov", "predicted to move: the symmetry is outside the measure's invariance group"),
           ("deg", "degenerate: the measure is identically 0 or undefined on this symmetry's blocks (T10)"),
           ("ok", "the measured deviation agrees with the prediction"),
           ("NO", "it does not (explained under Notes)"))


def _anchor(c: Any) -> str:
    return "cell-" + "".join(ch if ch.isalnum() else "_" for ch in f"{c.measure}-{c.symmetry}")


def _points(c: Any) -> str:
    return ", ".join(f"x={x:g}: {_fmt(d)}" for x, d in c.points) or "—"


def _cell_html(c: Any) -> str:
    tol = "" if c.tolerance is None else f"; tolerance {c.tolerance:.1e} {c.tolerance_reason}".rstrip()
    tip = (f"{c.measure} × {c.symmetry}: max relative deviation {_fmt(c.deviation)} (per sweep point: "
           f"{_points(c)}); predicted {c.predicted} ({c.reason}){tol}; witness: {c.witness}"
           f"{'; ' + c.note if c.note else ''}")
    cls = "ok" if c.agrees else "NO"
    cls += " deg" if c.predicted == "degenerate" and c.agrees else ""  # a failing deg cell stays red
    return (f'<td class="{cls}" title="{html.escape(tip)}"><a href="#{_anchor(c)}">{_fmt(c.deviation)}</a>'
            f'<br><small>{html.escape(_criterion(c))} {"ok" if c.agrees else "NO"}</small></td>')


def _details_html(mx: Any) -> list[str]:
    """One row per cell (the target of its link): the numbers, the theorem, the tolerance, the witness."""
    out = ["<h2 id='cells'>Cell details</h2><p>Click a cell of the matrix to jump to its row.</p>",
           "<div class='scroll'><table class='details'><tr><th>cell</th><th>prediction (theorem)</th>"
           "<th>tolerance</th><th>deviation per sweep point (x: the symmetry's parameter)</th><th>witness</th>"
           "<th>note</th></tr>"]
    for c in mx.cells:
        tol = "—" if c.tolerance is None else f"{_criterion(c)} ({c.tolerance_reason})"
        if c.eps_limit is not None:
            tol = f"{_criterion(c)}; tolerance at the run's eps {c.eps_limit.tolerance:.1e}"
        out.append(f"<tr id='{_anchor(c)}' class='{'ok' if c.agrees else 'NO'}'><th>{html.escape(c.measure)} × "
                   f"{html.escape(c.symmetry)}<br>{_fmt(c.deviation)} {'ok' if c.agrees else 'NO'}</th>"
                   f"<td>{html.escape(c.predicted)}: {html.escape(c.reason)}</td><td>{html.escape(tol)}</td>"
                   f"<td>{html.escape(_points(c))}</td><td>{html.escape(c.witness)}</td>"
                   f"<td>{html.escape(c.note)}</td></tr>")
    out.append("</table></div>")
    return out


def _embedded_figures(mx: Any) -> list[str]:
    import base64
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    out = []
    for name, caption, fig in figure_set(mx):
        FigureCanvasAgg(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        out.append(f"<figure><img alt='{html.escape(name)}: {html.escape(caption)}' "
                   f"src='data:image/png;base64,{data}'><figcaption>{html.escape(caption)}</figcaption></figure>")
    return out


def render_html(mx: Any, embed_figures: bool = True) -> str:
    """The explorer as one self-contained page: title, method, legend, matrix (each cell: deviation,
    criterion and agreement; hover: the numbers, the theorem behind the prediction, tolerance, witness
    and note; click: its row in the cell details), notes, the Dinh and BatchNorm-eps tables, figures."""
    rows = []
    for m in mx.measures:
        rows.append(f"<tr><th>{html.escape(m)}</th>{''.join(_cell_html(mx.cell(m, s)) for s in mx.symmetries)}</tr>")
    head = "".join(f"<th>{html.escape(s)}</th>" for s in mx.symmetries)
    agree = sum(c.agrees for c in mx.cells)
    dis = mx.disagreements
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           "<meta name='viewport' content='width=device-width, initial-scale=1'>",
           f"<title>coupled-curvature explorer: invariance matrix</title><style>{_CSS}</style></head><body>",
           "<h1>Invariance matrix: which curvature measures survive which reparameterization</h1>",
           "<p>Each symmetry is applied to the trained nets over a sweep of its parameter; each cell is the "
           "largest relative change of the measure over the sweep, beside the prediction of the theorem named "
           "in its tooltip (hover a cell), and whether the two agree.</p>",
           "<p class='key'>" + " ".join(f"<span>{k}</span>{html.escape(v)};" for k, v in _LEGEND) + "</p>",
           f"<p>Agreement: {agree}/{len(mx.cells)} cells. Each cell shows the deviation, the criterion it is "
           "judged by (tolerance or eps → 0 order) and the verdict; hover for the numbers, click for the "
           "theorem, the witness and the deviation at every sweep point.</p>",
           f"<div class='scroll'><table><tr><th>measure</th>{head}</tr>{''.join(rows)}</table></div>",
           "<h2>Notes</h2><ul>"]
    out += [f"<li><b>{html.escape(c.measure)} × {html.escape(c.symmetry)}</b>: deviation {_fmt(c.deviation)}, "
            f"predicted {html.escape(c.predicted)} ({html.escape(c.reason)}). {html.escape(c.note)}</li>" for c in dis]
    out += [f"<li>{html.escape(n)}</li>" for n in getattr(mx, "notes", [])]
    if not dis and not getattr(mx, "notes", []):
        out.append("<li>every cell agrees with its prediction</li>")
    out.append("</ul>")
    dinh, eps = render_dinh(mx), render_eps(mx)
    if dinh:
        out += ["<h2>Dinh demonstration</h2>", f"<pre>{html.escape(dinh)}</pre>"]
    if eps:
        out += ["<h2>BatchNorm eps evidence</h2>", f"<pre>{html.escape(eps)}</pre>"]
    if embed_figures and mx.values:
        out += ["<h2>Figures</h2>"] + _embedded_figures(mx)
    out += _details_html(mx)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def render_eps(mx: Any) -> str:
    ev = mx.eps_sweep
    if ev is None:
        return ""
    names = list(ev.deviations)
    lines = ["BatchNorm eps evidence: the bn cells predicted invariant that fail at the run's eps, re-measured",
             "with every BatchNorm eps set to each value (same weights; the last row is the run's own eps);",
             "slope: order p of change ∝ eps^p fitted on the re-runs (an eps effect has p ≈ 1)",
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


#: one (colour, marker, line style) per measure: 15 measures cannot share a 10-colour cycle
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf", "#000075", "#800000", "#469990", "#f032e6", "#9a6324")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d", "8", "H")
_LINES = ("-", "--", "-.", ":")
#: exact zeros have no place on a log axis: they are drawn at this floor (the axis label says so)
FLOOR = 1e-17


def _style(i: int) -> dict:
    return {"color": _COLOURS[i % len(_COLOURS)], "marker": _MARKERS[i % len(_MARKERS)],
            "linestyle": _LINES[i % len(_LINES)], "markersize": 4, "linewidth": 1.2}


def _log_if_decades(ax: Any, xs: list[float]) -> None:
    if xs and min(xs) > 0 and max(xs) / min(xs) >= 10:
        ax.set_xscale("log")


def explore_figure(mx: Any, sym: str) -> Figure:
    """One symmetry's panel: per measure, the max relative change over blocks ``|m(T_x) − m| / |m|``
    against the symmetry's parameter ``x`` (the cells' ``points``), on a log y axis with the
    tolerances 1e-9 (invariant below) and 1e-3 (moves above) dashed on top; each measure has its own
    colour, marker and line style, the legend sits right of the axes, the x axis is logarithmic only
    where the parameter spans a decade or more."""
    from matplotlib.figure import Figure

    from coupled_curvature.numeric.core.plots import finish_figure

    fig = Figure(figsize=(9.5, 4.8))
    ax = fig.add_subplot(1, 1, 1)
    xs_all: list[float] = []
    zero = [m for m in mx.measures if mx.cell(m, sym).points and all(d == 0.0 for _, d in mx.cell(m, sym).points)]
    for i, m in enumerate(mx.measures):
        pts = sorted((x, FLOOR if d is None or d < FLOOR else d) for x, d in mx.cell(m, sym).points
                     if d is not None)
        if pts:
            xs_all += [x for x, _ in pts]
            ax.plot([x for x, _ in pts], [d for _, d in pts], label=m, zorder=2, **_style(i))
    ax.axhline(1e-9, color="black", linestyle="--", linewidth=1.4, zorder=10,
               label="invariant if ≤ 1e-9\n(pseudo-inverse measures: ε₆₄·κ)")
    ax.axhline(1e-3, color="tab:red", linestyle="--", linewidth=1.4, zorder=10, label="moves if ≥ 1e-3")
    _log_if_decades(ax, xs_all)
    if len(set(xs_all)) == 1:
        ax.set_xticks(sorted(set(xs_all)))
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 10, None)
    ax.set_xlabel(mx.parameters.get(sym, f"{sym} symmetry parameter"))
    ax.set_ylabel(f"max relative change over blocks\n(exact 0 drawn at {FLOOR:.0e})")
    title = f"measures under the {sym} symmetry: relative change against its parameter"
    if zero:  # their lines coincide at the floor: name them
        title += "\n" + textwrap.fill(f"exactly 0 at every point (drawn at {FLOOR:.0e}): {', '.join(zero)}", 95)
    ax.set_title(title, fontsize=9)
    return finish_figure(fig, ax)


def eps_figure(mx: Any) -> Figure | None:
    """The BatchNorm cells judged as eps -> 0: relative change against eps (log-log) per measure and
    the function gap, each fitted law ``C·eps^p`` (fitted on the larger eps) dotted, extended to the
    run's eps (the last point) where it predicts the measured change. ``None`` without such cells."""
    cells = [c for c in mx.cells if c.eps_limit is not None]
    if not cells:
        return None
    from matplotlib.figure import Figure

    from coupled_curvature.numeric.core.plots import finish_figure

    fig = Figure(figsize=(9.5, 4.8))
    ax = fig.add_subplot(1, 1, 1)
    for c in cells:
        lim = c.eps_limit
        i = mx.measures.index(c.measure)
        pts = [(e, d) for e, d in zip(lim.eps, lim.deviations) if d is not None and d > 0]
        ax.plot([e for e, _ in pts], [d for _, d in pts], label=f"{c.measure} (order {_fmt_slope(lim.order)})",
                zorder=3, **_style(i))
        if lim.predicted is not None and lim.order is not None:
            e0, e1 = lim.eps[0], lim.eps[-1]
            d1 = lim.predicted
            ax.plot([e0, e1], [d1 * (e0 / e1) ** lim.order, d1], color=_style(i)["color"], linestyle=":",
                    linewidth=1.0, zorder=2)
    ev = cells[0].eps_limit
    ax.plot(ev.eps, [max(g, FLOOR) for g in ev.gaps], color="black", marker="x", linestyle="--", linewidth=1.2,
            zorder=4, label=f"function gap max|f' − f| (order {_fmt_slope(ev.gap_order)})")
    ax.axhline(1e-9, color="gray", linestyle="--", linewidth=1.2, zorder=10, label="invariant tolerance 1e-9")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("BatchNorm eps (same weights; the smallest is the run's own)")
    ax.set_ylabel("max relative change under the bn sweep")
    ax.set_title("BatchNorm scale symmetry as eps → 0 (dotted: fitted C·eps^p, extrapolated)", fontsize=10)
    return finish_figure(fig, ax)


def figure_set(mx: Any) -> list[tuple[str, str, Figure]]:
    """``(name, caption, figure)`` of every explorer figure: one per symmetry, then the eps figure."""
    out = [(sym, f"Relative change of every measure under the {sym} symmetry against "
                 f"{mx.parameters.get(sym, 'its parameter')}.", explore_figure(mx, sym)) for sym in mx.symmetries]
    eps = eps_figure(mx)
    if eps is not None:
        out.append(("bn_eps", "BatchNorm cells judged as eps → 0: relative change against eps.", eps))
    twin = getattr(mx, "sharpness_twin", None)
    if twin is not None:
        from coupled_curvature.reporting.sharpness_twin_page import CAPTION, twin_figure

        out.append(("sharpness_twin", CAPTION, twin_figure(twin)))
    return out


def figures(mx: Any, folder: Path) -> list[str]:
    """Write every figure of :func:`figure_set` into ``folder`` as SVG and PNG; returns the file names."""
    from coupled_curvature.reporting.figures import save_figure

    made = []
    for name, _, fig in figure_set(mx):
        made += save_figure(fig, str(folder), name)
    return made
