"""Rendering of the width sweep (``ccurv experiment width``): Kendall tables, one sentence per
measure, the run table, and the measure-against-gap figures, in Markdown and HTML from one outline.
"""

from __future__ import annotations

import html
import math
import os
import textwrap

__all__ = ["figure", "kendall_text", "outline", "render_html", "render_markdown", "sentences", "write_figures"]

GAP_WORDS = {"gap_loss": "the loss gap", "gap_err": "the error gap"}


def _num(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == 0.0:
            return "0"
        return f"{v:.{digits}f}" if 0.01 <= abs(v) < 1000 else f"{v:.{digits - 1}e}"
    return str(v)


def _tau(e: dict | None) -> str:
    if e is None or e["tau"] is None:
        return "undefined"
    ci = "" if e["ci_low"] is None else f" [{e['ci_low']:+.2f}, {e['ci_high']:+.2f}]"
    return f"{e['tau']:+.2f}{ci}"


def _entry(data: dict, measure: str, gap: str, depth) -> dict | None:
    for e in data["kendall"]:
        if e["measure"] == measure and e["gap"] == gap and e["depth"] == depth:
            return e
    return None


def _direction(e: dict | None) -> str:
    if e is None or e["tau"] is None:
        return "undefined (a constant measure or too few nets)"
    if e["ci_low"] is None:
        return "no interval (fewer than two seeds)"
    if e["seeds"] < 5:
        return f"interval from only {e['seeds']} seeds: not evidence either way"
    if e["ci_low"] > 0:
        return "positive, the interval excludes 0"
    if e["ci_high"] < 0:
        return "negative, the interval excludes 0"
    return "not distinguishable from 0"


def _depths(data: dict) -> list[int]:
    return sorted({r["depth"] for r in data["runs"]})


def sentences(data: dict) -> list[str]:
    """One sentence per measure stating its pooled τ with both gaps (and the within-depth τ)."""
    out = []
    depths = _depths(data)
    for m, label in data["measures"].items():
        parts = []
        for g in data["gaps"]:
            e = _entry(data, m, g, None)
            n = "" if e is None else f" over {e['n']} nets"
            parts.append(f"τ = {_tau(e)} with {GAP_WORDS.get(g, g)}{n} ({_direction(e)})")
        within = ""
        if len(depths) > 1:
            bits = [f"depth {d}: {_tau(_entry(data, m, 'gap_loss', d))}" for d in depths]
            within = "; within each depth, τ with the loss gap is " + ", ".join(bits)
        out.append(f"{label} (`{m}`): " + " and ".join(parts) + within + ".")
    return out


def kendall_text(data: dict) -> str:
    """Plain aligned τ table (every scope), for the terminal."""
    head = ["measure", "gap", "scope", "tau", "95% CI", "n"]
    rows = [head]
    for e in data["kendall"]:
        ci = "–" if e["ci_low"] is None else f"[{e['ci_low']:+.3f}, {e['ci_high']:+.3f}]"
        rows.append([e["measure"], e["gap"], "all" if e["depth"] is None else f"depth {e['depth']}",
                     "undefined" if e["tau"] is None else f"{e['tau']:+.3f}", ci, str(e["n"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def _kendall_table(data: dict) -> tuple[list[str], list[list[str]]]:
    gaps = list(data["gaps"])
    depths = _depths(data)
    scopes = [None, *depths] if len(depths) > 1 else [None]
    head = ["measure"] + [f"τ {GAP_WORDS.get(g, g).replace('the ', '')} ({'all' if d is None else f'depth {d}'})"
                          for g in gaps for d in scopes]
    rows = [[m] + [_tau(_entry(data, m, g, d)) for g in gaps for d in scopes] for m in data["measures"]]
    return head, rows


_RUN_COLUMNS = [("depth", "depth"), ("width", "width"), ("seed", "seed"), ("params", "params"),
                ("epochs", "epochs"), ("train_loss", "train loss"), ("test_loss", "test loss"),
                ("gap_loss", "loss gap"), ("gap_err", "error gap")]


def _run_table(data: dict) -> tuple[list[str], list[list[str]]]:
    cols = _RUN_COLUMNS + [(m, m) for m in data["measures"]]
    show_dplus = any("Dplus_blocks" in r for r in data["runs"])
    head = [h for _, h in cols] + (["D⁺ blocks trusted"] if show_dplus else [])
    rows = []
    for r in data["runs"]:
        cells = [_num(r.get(k)) for k, _ in cols]
        if not r.get("reached_target", True):
            cells[4] += " (cap)"
        if show_dplus:
            cells.append(r.get("Dplus_blocks", "–"))
        rows.append(cells)
    return head, rows


def outline(data: dict) -> list[tuple]:
    """The report as a list of ``(kind, ...)`` items shared by the Markdown and HTML renderers."""
    cfg = data["config"]
    runs = data["runs"]
    capped = sum(1 for r in runs if not r.get("reached_target", True))
    untrusted = sum(len(r.get("Dplus_untrusted", [])) for r in runs)
    items: list[tuple] = [
        ("h1", "Width sweep: curvature measures against the generalization gap"),
        ("p", "**Exploratory.** This experiment looks for rank association between curvature measures and the "
              "generalization gap in one small population of nets. It tests no hypothesis fixed in advance and no "
              "generalization bound is claimed or implied by any number below."),
        ("h2", "Result, one sentence per measure"),
        ("ul", sentences(data)),
        ("p", "τ is Kendall's τ-b between the measure and the gap over the nets; the interval is the 95% percentile "
              f"bootstrap over seeds ({cfg['n_boot']} replicates, each drawing the seeds with replacement and keeping "
              "every net of a drawn seed, RNG seed " f"{cfg['boot_seed']}). Width changes both the measures and the gap, "
              "so a pooled τ can reflect a common trend in width rather than anything the measure adds; the "
              "within-depth τ still mixes widths." + _few_seeds(cfg)),
        ("h2", "Setup"),
        ("ul", [
            f"Configuration `{cfg['name']}`: {cfg['note']}; {len(runs)} nets (depths {list(cfg['depths'])}, "
            f"widths {list(cfg['widths'])}, seeds {list(cfg['seeds'])}), ReLU MLPs with biases on {cfg['dataset']} "
            "(stratified 80/20 train/test split, features standardised with training statistics).",
            f"Training criterion: {data['criterion']}. Nets that hit the epoch cap: {capped}.",
            f"Gaps on the full splits: loss gap = test − train mean cross-entropy; error gap = test − train top-1 error.",
            f"Measures on the first {cfg['measure_samples']} training points, in float64; {data['aggregation']}.",
            "D⁺ route: " + _route_text(cfg) + f" Untrusted D⁺ blocks over all nets: {untrusted}.",
            f"Baselines: Hessian top eigenvalue by Lanczos (at most {cfg['lanczos_iter']} steps, tolerance "
            f"{cfg['lanczos_tol']:g}); Hessian trace exact from per-sample factors; average adaptive sharpness with "
            f"‖ε‖₂ = {cfg['adaptive_rho']} over all parameters (δ = |θ|⊙ε), {cfg['adaptive_samples']} antithetic "
            f"pairs of common random numbers; Fisher–Rao norm E[(θᵀ∇ℓ)²]; curvature rate λ ({cfg['lambda_orders']} "
            f"orders at {cfg['lambda_points']} points).",
            f"Wall time: {data['seconds']:.1f} s.",
        ]),
        ("h2", "Kendall τ (95% seed-bootstrap interval)"),
        ("table", *_kendall_table(data)),
        ("h2", "Figures"),
    ]
    for g in data["gaps"]:
        items.append(("img", f"width_{g}.png", f"each measure against {GAP_WORDS.get(g, g)}, coloured by width"))
    items += [("h2", "Runs"), ("table", *_run_table(data)),
              ("p", "All numbers, per-block D and D⁺ included, are in `width.json`.")]
    return items


def _few_seeds(cfg: dict) -> str:
    k = len(cfg["seeds"])
    if k >= 5:
        return ""
    return (f" **With only {k} seeds every interval here is crude:** a bootstrap over {k} clusters has only "
            f"{math.comb(2 * k - 1, k)} distinct replicates, so an interval can even exclude the full-sample τ.")


def _route_text(cfg: dict) -> str:
    if cfg["dplus_route"] == "factor":
        return ("exact per-sample factor route: H_bb = BᵀB (exact for the diagonal blocks of a piecewise-linear "
                "net under cross-entropy), wᵀH⁺w from BᵀB or the Gram matrix BBᵀ, relative cutoff "
                f"{cfg['pinv_rtol']:g} (the `_alt` rows repeat the D⁺ aggregates at cutoff {cfg['pinv_rtol_alt']:g}: "
                "on large blocks D⁺ is dominated by the smallest kept eigenvalues, so the cutoff matters); a block is "
                "trusted when ‖Bw‖² reproduces the autograd wᵀHw to 1e-8.")
    return (f"diagnose(method={cfg['dplus_route']!r}), dense up to {cfg['max_dense']} parameters, Krylov at most "
            f"{cfg['krylov_max_iter']} steps; a block is trusted when D⁺ was computed and (Krylov) converged.")


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(data: dict) -> str:
    lines: list[str] = []
    for item in outline(data):
        kind = item[0]
        if kind == "h1":
            lines += [f"# {item[1]}", ""]
        elif kind == "h2":
            lines += [f"## {item[1]}", ""]
        elif kind == "p":
            lines += [item[1], ""]
        elif kind == "ul":
            lines += [f"- {s}" for s in item[1]] + [""]
        elif kind == "table":
            head, rows = item[1], item[2]
            lines += ["| " + " | ".join(map(_md_cell, head)) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in rows] + [""]
        elif kind == "img":
            lines += [f"![{item[2]}]({item[1]})", ""]
    return "\n".join(lines)


def _inline_html(s: str) -> str:
    """Escape, then turn Markdown ``**bold**`` and ```code``` into tags."""
    out, parts = [], html.escape(s).split("`")
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{part}</code>")
        else:
            bold = part.split("**")
            out.append("".join(f"<strong>{b}</strong>" if j % 2 else b for j, b in enumerate(bold)))
    return "".join(out)


_CSS = """
table.data td { font-family: monospace; font-size: 0.85rem; text-align: right; white-space: nowrap; }
table.data td:first-child { font-family: sans-serif; text-align: left; }
table.data td small { color: #555; } figure svg { max-width: 100%; }
@media (max-width: 60rem) { table.data td, table.data th { font-size: 0.75rem; padding: 0.2rem 0.25rem; } }
"""
#: at most this many measure columns in one table of the run measures (the rest go in the next)
PANEL = 6


def _tau_cell(c: str) -> str:
    """``+0.12 [-0.30, +0.50]`` as the τ over its interval, on two lines."""
    tau, _, ci = c.partition(" [")
    return html.escape(tau) + (f"<br><small>[{html.escape(ci)}</small>" if ci else "")


def _html_table(head: list[str], rows: list[list[str]], cell=html.escape) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell(c) if i else html.escape(c)}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table class='data'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _run_tables(head: list[str], rows: list[list[str]], measures: int) -> list[str]:
    """The run table in panels that fit an 800 px window: training columns (and the D⁺ blocks
    trusted), then the measures at most :data:`PANEL` at a time beside depth, width and seed."""
    base, key = len(_RUN_COLUMNS), [0, 1, 2]
    panels = [list(range(base)) + list(range(base + measures, len(head)))]
    panels += [key + list(range(base + i, base + min(i + PANEL, measures))) for i in range(0, measures, PANEL)]
    return [_html_table([head[j] for j in p], [[r[j] for j in p] for r in rows]) for p in panels]


def render_html(data: dict, svgs: dict[str, str] | None = None) -> str:
    """The sweep as one page: the outline's text, the tables in panels that fit the window, and the
    figures inlined from ``svgs`` (figure file name -> SVG text; without it, linked as PNG)."""
    from coupled_curvature.reporting.html import PAGE_CSS, figure_html

    body: list[str] = []
    for item in outline(data):
        kind = item[0]
        if kind in ("h1", "h2"):
            body.append(f"<{kind}>{html.escape(item[1])}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline_html(item[1])}</p>")
        elif kind == "ul":
            body.append("<ul>" + "".join(f"<li>{_inline_html(s)}</li>" for s in item[1]) + "</ul>")
        elif kind == "table" and item[1][0] == "measure":
            body.append(_html_table(item[1], item[2], _tau_cell))
        elif kind == "table":
            body += _run_tables(item[1], item[2], len(data["measures"]))
        elif kind == "img" and svgs and item[1] in svgs:
            body.append(figure_html(svgs[item[1]], item[1].rsplit(".", 1)[0], html.escape(item[2])))
        elif kind == "img":
            body.append(f"<p><img src=\"{html.escape(item[1])}\" alt=\"{html.escape(item[2])}\"></p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>Width sweep</title><style>{PAGE_CSS}{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def figure(data: dict, gap: str):
    """One panel per measure: the measure (y) against ``gap`` (x), coloured by width, marker by depth."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    measures = list(data["measures"])
    cols = min(2, len(measures))  # two panels a row: readable when a page scales it to 800 px
    nrows = math.ceil(len(measures) / cols)
    fig = Figure(figsize=(4.4 * cols, 3.4 * nrows + 0.9))
    widths = sorted({r["width"] for r in data["runs"]})
    cmap = colormaps["viridis"]
    colour = {w: cmap(i / max(1, len(widths) - 1)) for i, w in enumerate(widths)}
    markers = dict(zip(sorted({r["depth"] for r in data["runs"]}), "o^sDvP*X"))
    for i, m in enumerate(measures):
        ax = fig.add_subplot(nrows, cols, i + 1)
        pts = [r for r in data["runs"] if r.get(m) is not None and r.get(gap) is not None]
        for (w, d) in sorted({(r["width"], r["depth"]) for r in pts}):
            grp = [r for r in pts if r["width"] == w and r["depth"] == d]
            ax.scatter([r[gap] for r in grp], [r[m] for r in grp], color=colour[w], marker=markers[d], s=22,
                       edgecolors="black", linewidths=0.3)
        values = [r[m] for r in pts]
        if values and min(values) > 0 and max(values) / min(values) > 30:
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())
        e = _entry(data, m, gap, None)
        title = "\n".join(textwrap.wrap(data["measures"][m], 48))
        ax.set_title(f"{title}\nτ = {_tau(e)}", fontsize=9)
        ax.set_xlabel(f"{GAP_WORDS.get(gap, gap)} ({data['gaps'][gap]})", fontsize=8.5)
        ax.set_ylabel(m, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], marker="o", linestyle="", color=colour[w], label=f"width {w}") for w in widths]
    handles += [Line2D([], [], marker=mk, linestyle="", color="gray", label=f"depth {d}") for d, mk in markers.items()]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=9, frameon=False)
    fig.suptitle(f"Width sweep: each measure against {GAP_WORDS.get(gap, gap)} (exploratory; no bound claimed)",
                 fontsize=10)
    top = 1.0 - 0.75 / fig.get_figheight()
    fig.subplots_adjust(left=0.1, right=0.98, bottom=1.0 / fig.get_figheight() + 0.02, top=top - 0.02,
                        hspace=0.75, wspace=0.3)  # fixed margins: tight_layout doubles the drawing time
    return fig


def write_figures(data: dict, folder: str) -> dict[str, str]:
    """``width_<gap>.png`` for every gap (Agg, no timestamp metadata); returns each file name with
    the figure's SVG text, for :func:`render_html` to inline."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from coupled_curvature.reporting.invariance_page import svg_text

    svgs = {}
    for g in data["gaps"]:
        fig = figure(data, g)
        FigureCanvasAgg(fig)
        name = f"width_{g}.png"
        fig.savefig(os.path.join(folder, name), format="png", dpi=90, metadata={"Software": None})
        svgs[name] = svg_text(fig)
    return svgs
