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


_CSS = """
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
.scroll { max-width: 100%; overflow-x: auto; } table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.4rem; text-align: left; }
th { background: #f2f2f2; } td.ok { background: #e3f4e3; } td.NO { background: #fbd5d5; font-weight: bold; }
td.deg { background: #eee; } .key span { display: inline-block; padding: 0 0.4rem; margin-right: 0.3rem; border: 1px solid #ccc; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
pre { overflow-x: auto; font-size: 0.8rem; background: #f8f8f8; padding: 0.5rem; }
"""

_LEGEND = (("inv", "predicted invariant: the measure must not change beyond its tolerance"),
           ("mov", "predicted to move: the symmetry is outside the measure's invariance group"),
           ("deg", "degenerate: the measure is identically 0 or undefined on this symmetry's blocks (T10)"),
           ("ok", "the measured deviation agrees with the prediction"),
           ("NO", "it does not (explained under Notes)"))


def _cell_html(c: Any) -> str:
    short = {"invariant": "inv", "moves": "mov", "degenerate": "deg"}[c.predicted]
    tol = "" if c.tolerance is None else f"; tolerance {c.tolerance:.1e} {c.tolerance_reason}".rstrip()
    tip = (f"{c.measure} × {c.symmetry}: max relative deviation {_fmt(c.deviation)}; predicted {c.predicted} "
           f"({c.reason}){tol}{'; ' + c.note if c.note else ''}")
    cls = "ok" if c.agrees else "NO"
    cls += " deg" if short == "deg" else ""
    return (f'<td class="{cls}" title="{html.escape(tip)}">{_fmt(c.deviation)} {short} '
            f'{"ok" if c.agrees else "NO"}</td>')


def _embedded_figures(mx: Any) -> list[str]:
    import base64
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    out = []
    for sym in mx.values:
        fig = _figure(mx, sym)
        FigureCanvasAgg(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        out.append(f"<figure><img alt='measures under the {html.escape(sym)} symmetry' "
                   f"src='data:image/png;base64,{data}'><figcaption>Measures under the {html.escape(sym)} "
                   "symmetry against its parameter.</figcaption></figure>")
    return out


def render_html(mx: Any, embed_figures: bool = True) -> str:
    """The explorer as one self-contained page: title, method, legend, matrix (hover: the numbers, the
    theorem behind the prediction, tolerance and note), notes, the Dinh and BatchNorm-eps tables, figures."""
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
           f"<p>Agreement: {agree}/{len(mx.cells)} cells. Invariant cells use a tolerance of 1e-9 unless the "
           "tooltip names another.</p>",
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
    out.append("</body></html>")
    return "\n".join(out) + "\n"


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


_STYLES = ("-", "--", "-.", ":")
_X_LABEL = {"layer": "layer rescaling factor α (W_l → αW_l, W_(l+1) → W_(l+1)/α)",
            "neuron": "neuron-scaling spread (scales drawn in [1/x, x])", "perm": "permutation draw (no continuous parameter)",
            "bn": "BatchNorm-side weight scale s", "orthogonal": "rotation angle / draw", "gl": "mixing strength",
            "nonlinear": "reparameterization draw", "loss": "loss scale s (L → sL)"}


def _figure(mx: Any, sym: str):
    """One symmetry's panel: a distinct colour and line style per measure, the legend outside the data,
    log axes only where the data span more than a decade."""
    from matplotlib.figure import Figure

    per = mx.values[sym]
    fig = Figure(figsize=(9, 5))
    ax = fig.add_subplot(1, 1, 1)
    xs_all, ys_all = [], []
    for i, (m, pts) in enumerate(per.items()):
        pts = sorted((x, abs(v)) for x, v in pts if v)
        if pts:
            xs_all += [p[0] for p in pts]
            ys_all += [p[1] for p in pts]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=m,
                    color=f"C{i % 10}", linestyle=_STYLES[(i // 10 + i) % len(_STYLES)])
    if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) > 10:
        ax.set_xscale("log")
    if ys_all and min(ys_all) > 0 and max(ys_all) / min(ys_all) > 10:
        ax.set_yscale("log")
    ax.set_xlabel(_X_LABEL.get(sym, f"{sym} symmetry parameter"))
    ax.set_ylabel("|measure| (per-block measures: mean |block value|)")
    ax.set_title(f"measures under the {sym} symmetry", fontsize=10)
    ax.grid(True, alpha=0.3)
    if ys_all:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def figures(mx: Any, folder: Path) -> list[str]:
    """Write one PNG per symmetry into ``folder``; returns the file names."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    made = []
    for sym in mx.values:
        fig = _figure(mx, sym)
        FigureCanvasAgg(fig)
        name = f"{sym}.png"
        fig.savefig(folder / name, dpi=90)
        made.append(name)
    return made
