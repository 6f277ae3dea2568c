"""Rendering of ``ccurv experiment invariance``: the summary, the results table (Markdown with every
column, HTML with compact headers and one legend), and the figure of D and D⁺ changes against the
Rayleigh-quotient change. Plain data in (the ``invariance.json`` payload), pages out.
"""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib loads only when a figure is drawn (not for ccurv --help)
    from matplotlib.figure import Figure

__all__ = ["certified_cell", "fmt", "summary", "render_markdown", "render_html", "invariance_figure", "svg_text", "HTML_LEGEND"]

#: every column, for the Markdown table (the HTML one keeps fewer, see ``_HTML``)
COLUMNS = [
    ("dataset", "dataset"), ("arch", "arch"), ("hidden", "hidden (layers×width)"), ("seed", "seed"),
    ("status", "status"), ("params", "params"), ("blocks", "blocks"), ("train_acc", "train acc"),
    ("test_acc", "test acc"), ("max_rel_change_D", "max ΔD"), ("max_rel_change_Dplus", "max ΔD⁺"),
    ("neuron_control_median", "neuron ΔD med"), ("neuron_control_min", "neuron ΔD min"),
    ("rq_change", "ΔRQ"), ("top_eig_change", "Δλmax"), ("t9_residual", "T9 resid"),
]
#: the HTML table: a net column, then these (accuracies share one cell)
_HTML = [("status", "status"), ("params", "params"), ("max_rel_change_D", "ΔD"),
         ("max_rel_change_Dplus", "ΔD⁺"), ("neuron_control_median", "nΔD med"),
         ("neuron_control_min", "nΔD min"), ("rq_change", "ΔRQ"), ("top_eig_change", "Δλmax"),
         ("t9_residual", "T9 res")]
HTML_LEGEND = (
    "net: dataset, architecture, hidden layers×width (or the widths), seed s; acc: training / test "
    "accuracy; ΔD, ΔD⁺: max relative change over tensor blocks under the random chain of layer "
    "rescalings and permutations; nΔD med / min: ΔD under random neuron-wise rescalings (the negative "
    "control, it must move), median and minimum over trials; ΔRQ, Δλmax: the same for the raw Rayleigh "
    "quotient and the top eigenvalue (they must move); T9 res: Euler-identity residual (bias-free nets); "
    "– not measured. Blocks, chains and per-block values are in invariance.json.")


def fmt(v: Any) -> str:
    """One table cell.

    >>> fmt(0.5), fmt(1.5e-12), fmt([8, 8, 8]), fmt([4, 2]), fmt(None)
    ('0.500', '1.50e-12', '3×8', '4,2', '–')
    """
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if 0.01 <= abs(v) <= 1.0 else f"{v:.2e}"
    if isinstance(v, list):  # hidden widths: 14×95 for fourteen layers of 95, else the widths listed
        return f"{len(v)}×{v[0]}" if len(v) > 1 and len(set(v)) == 1 else ",".join(map(str, v))
    return str(v)


def _short(v: Any) -> str:
    """A compact cell for the HTML table: two significant digits (the Markdown keeps three)."""
    if isinstance(v, float):
        return f"{v:.2f}" if 0.01 <= abs(v) <= 1.0 else f"{v:.1e}"
    return fmt(v)


def certified_cell(r: dict) -> str:
    """The ``--certify`` verdict of one row: ``∋0 ≤3e-70`` (the D-change balls contain 0, relative width at
    most that, and the RQ change ball excludes 0), ``FAILED``, or ``–`` (not certified; the JSON says why).

    >>> certified_cell({"cert_D_zero": True, "cert_RQ_moves": True, "cert_D_width": 2.5e-70})
    '∋0 ≤2.5e-70'
    """
    if r.get("cert_D_zero") is None:
        return "–"
    if r["cert_D_zero"] and r.get("cert_RQ_moves"):
        return f"∋0 ≤{r['cert_D_width']:.2g}"
    return "FAILED"


def summary(data: dict) -> list[str]:
    """The method and configuration, one sentence each."""
    rows = data["rows"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    cfg = data["config"]
    return [
        f"Configuration `{cfg['name']}`: {len(rows)} nets; {cfg['note']}.",
        f"Training criterion: {data['criterion']}.",
        "Status counts: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ".",
        f"'invariant' means max ΔD ≤ {cfg['tol_D']:g} and max ΔD⁺ ≤ {cfg['tol_Dplus']:g} over every tensor block "
        f"while the raw Rayleigh quotient moved by more than {cfg['moves']:g}; 'moves' means a change above "
        f"{cfg['moves']:g}. Nets with scale-invariant blocks (BatchNorm, T10: D ≡ 0) are reported "
        "'degenerate (T10)', not invariant; their ΔD columns cover the other blocks only.",
        "Neuron-wise rescaling (scales 10^U(−1,1) per unit, every hidden layer) is the negative control: "
        "its ΔD should be of order 1.",
        "D⁺ of the ReLU/LeakyReLU MLPs comes from exact per-sample factors H = BᵀB (checked block by block "
        "against autograd's wᵀHw), on every block; the CNN and BatchNorm nets use dense blocks up to "
        f"{cfg['max_dense']} parameters (column 'blocks with D⁺' in the JSON).",
        f"Wall time: {data['seconds']:.1f} s.",
        *([f"Certified (--certify, {cfg.get('certify_prec', 256)} bits, ball arithmetic on the exact float64 weights): "
           "per net a layer rescaling of the first weight layer by c = 37/10 is applied exactly; column "
           "'certified' gives ∋0 and the largest relative width when every block's D-change ball contains 0 and "
           "the rescaled layer's RQ-change ball excludes 0 (both halves of T3, certified), FAILED when either "
           "fails, – when the net is outside the certified engine (the reason is in invariance.json)."]
          if cfg.get("certify") else []),
    ]


def render_markdown(data: dict) -> str:
    cert = bool(data["config"].get("certify"))
    head = [h for _, h in COLUMNS] + (["certified"] if cert else [])
    lines = ["# Invariance experiment", "", *[f"- {s}" for s in summary(data)], "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([*(fmt(r.get(k)) for k, _ in COLUMNS), *([certified_cell(r)] if cert else [])])
              + " |" for r in data["rows"]]
    lines += ["", "![D and D⁺ changes against the Rayleigh-quotient change](invariance.png)", ""]
    return "\n".join(lines)


_CSS = """
table.results td { font-family: monospace; font-size: 0.85rem; text-align: right; white-space: nowrap; }
table.results td.net, table.results td.status { text-align: left; white-space: normal; font-family: sans-serif; }
tr.deg td { background: #eee; } tr.bad td.status { color: #b00020; font-weight: bold; }
p.legend { font-size: 0.85rem; color: #444; } figure svg { max-width: 52rem; }
@media (max-width: 60rem) { table.results td, table.results th { font-size: 0.75rem; padding: 0.2rem 0.25rem; } }
"""


def _row(r: dict) -> str:
    e = html.escape
    net = f"{r.get('dataset')} {r.get('arch')} {fmt(r.get('hidden'))} s{r.get('seed')}"
    cells = [f"<td class='net'>{e(net)}</td>"]
    for k, _ in _HTML:
        cells.append(f"<td class='{'status' if k == 'status' else 'num'}'>{e(_short(r.get(k)))}</td>")
        if k == "params":
            cells.append(f"<td>{e(_short(r.get('train_acc')))} / {e(_short(r.get('test_acc')))}</td>")
    if "cert_D_zero" in r:
        cells.append(f"<td>{e(certified_cell(r))}</td>")
    status = r.get("status")
    cls = "deg" if status == "degenerate (T10)" else "" if status == "invariant" else "bad"
    return f"<tr class='{cls}'>{''.join(cells)}</tr>"


def render_html(data: dict, svg: str | None = None) -> str:
    """The experiment as one self-contained page: title, method summary, compact results table with
    its legend said once, and ``svg`` (the figure's SVG text, see :func:`svg_text`) inlined."""
    from coupled_curvature.reporting.html import PAGE_CSS, figure_html

    e = html.escape
    head = ["net", "status", "params", "acc", *(h for k, h in _HTML[2:]),
            *(["certified"] if data["config"].get("certify") else [])]
    cfg = data["config"]
    caption = (f"Per net, the max relative change of D and D⁺ over the blocks against that of the raw Rayleigh "
               f"quotient; dashed: the invariant thresholds ΔD ≤ {cfg['tol_D']:g}, ΔD⁺ ≤ {cfg['tol_Dplus']:g} "
               f"and the 'moves' threshold ΔRQ > {cfg['moves']:g}; hollow diamonds: degenerate (T10) nets.")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>Invariance experiment</title><style>{PAGE_CSS}{_CSS}</style></head><body>",
           "<h1>Invariance experiment: D and D⁺ under exact symmetries of trained nets</h1>",
           "<p>Each trained net goes through a random chain of layer rescalings (c log-uniform in "
           "[1e-3, 1e3]) and neuron permutations, which leave its function unchanged. D and D⁺ should not "
           "move; the raw Rayleigh quotient and top eigenvalue should, and so should D under neuron-wise "
           "rescaling, which is the negative control.</p>",
           "<ul>" + "".join(f"<li>{e(s)}</li>" for s in summary(data)) + "</ul>",
           "<h2>Results</h2>",
           "<table class='results'><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head)
           + "</tr></thead><tbody>" + "".join(_row(r) for r in data["rows"]) + "</tbody></table>",
           f"<p class='legend'>{e(HTML_LEGEND)}</p>", "<h2>Figure</h2>"]
    if svg is not None:
        out.append(figure_html(svg, "invariance", e(caption)))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


#: exact zeros have no place on a log axis: they are drawn at this floor (the axis label says so)
FLOOR = 1e-17
_SERIES = (("max_rel_change_D", "max ΔD (symmetry chain)", "o", "tab:blue"),
           ("max_rel_change_Dplus", "max ΔD⁺ (symmetry chain)", "s", "tab:orange"),
           ("neuron_control_median", "ΔD, neuron-wise control (median)", "x", "tab:green"))


def invariance_figure(rows: list[dict], tol_D: float = 1e-8, tol_Dplus: float = 1e-5,
                      moves: float = 1e-3) -> Figure:
    """Per net: relative change of D, D⁺ and the neuron control (y) against the Rayleigh-quotient change
    (x), log-log; degenerate (T10) nets as hollow diamonds; the thresholds dashed on top; legend right.

    >>> fig = invariance_figure([{"status": "degenerate (T10)", "rq_change": 1e-7, "max_rel_change_D": 1e-6}])
    >>> any("T10" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    True
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(9.5, 5.0))
    ax = fig.add_subplot(1, 1, 1)
    handles = []
    for key, label, marker, colour in _SERIES:
        for deg in (False, True):
            pts = [(max(r.get("rq_change") or FLOOR, FLOOR), max(r[key], FLOOR)) for r in rows
                   if r.get(key) is not None and (r.get("status") == "degenerate (T10)") == deg]
            if not pts:
                continue
            style: dict[str, Any] = ({"marker": "D", "facecolors": "none", "edgecolors": colour, "s": 46, "linewidths": 1.3}
                     if deg else {"marker": marker, "color": colour, "s": 30})
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], zorder=3, **style)
        handles.append(Line2D([], [], linestyle="", marker=marker, color=colour, label=label))
    if any(r.get("status") == "degenerate (T10)" for r in rows):
        handles.append(Line2D([], [], linestyle="", marker="D", markerfacecolor="none", color="gray",
                              label="degenerate (T10) net (BatchNorm):\nΔD, ΔD⁺ over its other blocks"))
    for y, colour, label in ((tol_D, "black", f"invariant: ΔD ≤ {tol_D:g}"),
                             (tol_Dplus, "tab:purple", f"invariant: ΔD⁺ ≤ {tol_Dplus:g}")):
        handles.append(ax.axhline(y, color=colour, linestyle="--", linewidth=1.3, zorder=10, label=label))
    handles.append(ax.axvline(moves, color="tab:red", linestyle="--", linewidth=1.3, zorder=10,
                              label=f"raw curvature moves: ΔRQ > {moves:g}"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 10, None)
    ax.set_xlabel("max relative change of the Rayleigh quotient wᵀHw/‖w‖², ΔRQ (raw curvature)")
    ax.set_ylabel(f"max relative change over blocks\n(exact 0 drawn at {FLOOR:.0e})")
    ax.set_title("Symmetry chains: D and D⁺ stay put while the raw curvature moves", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.1, right=0.66, bottom=0.12, top=0.92)
    return fig


def svg_text(fig: Figure) -> str:
    """The figure as SVG text (text drawn as paths, fixed ids: the same bytes on every run).

    >>> from matplotlib.figure import Figure
    >>> svg_text(Figure(figsize=(1, 1))).count("<svg")
    1
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "coupled-curvature", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return buf.getvalue()
