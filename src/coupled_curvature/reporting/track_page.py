"""The page of ``ccurv track``: curves of ``D`` (and ``RQ``, ``D⁺`` when logged) per block over training
steps for one run or a run and its twin, as one self-contained HTML file (inline SVG, no scripts,
no external assets). It renders the records it is given; it computes nothing about curvature.

A run is ``(label, header, records)`` as :func:`coupled_curvature.numeric.tracking.records.read_run`
returns them, with a label. Values that a log axis cannot show (``null``, ``≤ 0``) are left out of the
curves and counted in the caption.

>>> head = {"blocks": ["w"], "measures": ["D"]}
>>> recs = [{"step": s, "loss": 1.0 / (s + 1), "D/w": 2.0 + s} for s in range(3)]
>>> page = render_page([("run", head, recs)], rows=[["w", "2", "4"]], head_row=["block", "first", "last"])
>>> page.startswith("<!DOCTYPE html>"), page.count("<svg"), "http" in page.replace("http://www.w3.org", "")
(True, 1, False)
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["render_page", "Run"]

Run = tuple[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]

_STYLES = ("-", "--", ":")
_MARKERS = (".", "x", "+")  # the second run's crosses sit on the first run's dots where the curves coincide
_TITLES = {"D": "D = (wᵀHw/wᵀw)/‖g‖² per block", "RQ": "RQ = wᵀHw/wᵀw per block",
           "Dplus": "D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² per block", "sqnorm_grad": "‖g‖² per block"}
_YLABELS = {"D": "D (log scale)", "RQ": "RQ (log scale)", "Dplus": "D⁺ (log scale)", "sqnorm_grad": "‖g‖² (log scale)"}
#: what the page says a reader is looking at (the measures' meaning, in words)
_READING = ("How to read it. For a parameter block with weights w, gradient g and Hessian block H of the probe loss, "
            "D = (wᵀHw/wᵀw)/‖g‖² is the curvature of the loss along the block's own direction, divided by the squared "
            "gradient. Unlike raw sharpness (the largest Hessian eigenvalue, or wᵀHw/wᵀw alone) it is unchanged when a "
            "ReLU layer is rescaled by c and the next by 1/c, so a change of D is a change of the function's "
            "curvature, not of its coordinates. A rising D means that curvature along the weights grows relative to "
            "the gradient: it rises as the gradient shrinks near a minimum, and a rise while the loss still falls "
            "marks a block whose loss surface is sharpening. D is a diagnostic, not a bound on generalisation.")
_CSS = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}"
        "figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#444}"
        "table{border-collapse:collapse;font-size:.85em}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;"
        "text-align:right}td:first-child,th:first-child{text-align:left}.scroll{overflow-x:auto}")


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _points(records: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float], int]:
    """Steps and values of ``key`` a log axis can show, and how many records it had to leave out."""
    xs, ys, left = [], [], 0
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            xs.append(r["step"])
            ys.append(float(v))
        else:
            left += 1
    return xs, ys, left


def _block_order(runs: Sequence[Run]) -> list[str]:
    order: list[str] = []
    for _, head, _ in runs:
        order += [b for b in head["blocks"] if b not in order]
    return order


def _draw(ax: Axes, runs: Sequence[Run], measure: str, colors: dict[str, Any]) -> int:
    left = 0
    for i, (_, head, recs) in enumerate(runs):
        if measure not in head["measures"]:
            continue
        for b in head["blocks"]:
            xs, ys, n = _points(recs, f"{measure}/{b}")
            left += n
            if xs:
                ax.plot(xs, ys, _STYLES[i % len(_STYLES)], color=colors[b], lw=1.3 if i == 0 else 0.9,
                        marker=_MARKERS[i % len(_MARKERS)] if len(xs) <= 60 else None, ms=4 if i == 0 else 6)
    ax.set_yscale("log")
    _against_steps(ax, _YLABELS[measure], _TITLES[measure])
    return left


def _against_steps(ax: Axes, ylabel: str, title: str) -> None:
    """Label a panel of curves over the training steps and grid it."""
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)


def _legend(ax: Axes, runs: Sequence[Run], colors: dict[str, Any]) -> None:
    """The blocks' colours (and the runs' line styles) in ``ax``, an empty panel beside the curves they name."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, lw=2, label=b) for b, c in colors.items()]
    if len(runs) > 1:
        handles += [Line2D([], [], color="k", ls=_STYLES[i % len(_STYLES)], marker=_MARKERS[i % len(_MARKERS)],
                           label=label)
                    for i, (label, _, _) in enumerate(runs)]
    ax.axis("off")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 1.0), fontsize=7, frameon=False,
              ncol=1 if len(handles) <= 18 else 2, title="blocks" + (" and runs" if len(runs) > 1 else ""),
              title_fontsize=8, alignment="left")


def _figure(runs: Sequence[Run], measure: str, with_loss: bool) -> tuple[Figure, int]:
    """The measure's curves, the legend of their blocks right beside them, then (``with_loss``) the probe loss."""
    from matplotlib.figure import Figure

    colors = dict(zip(_block_order(runs), _colors(len(_block_order(runs)))))
    fig = Figure(figsize=(12, 4.4))
    ratios = [3, 1.1, 2] if with_loss else [3, 1.1]
    axes = fig.subplots(1, len(ratios), gridspec_kw={"width_ratios": ratios})
    left = _draw(axes[0], runs, measure, colors)
    _legend(axes[1], runs, colors)
    if with_loss:
        ax = axes[2]
        for i, (label, _, recs) in enumerate(runs):
            xs, ys = [r["step"] for r in recs if r.get("loss") is not None], [r["loss"] for r in recs
                                                                              if r.get("loss") is not None]
            ax.plot(xs, ys, _STYLES[i % len(_STYLES)], color="k", lw=1.3, label=label)
        _against_steps(ax, "loss on the probe", "loss on the probe")
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.13, top=0.9, wspace=0.3)
    return fig, left


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<div class='scroll'><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"


def render_page(runs: Sequence[Run], *, rows: Sequence[Sequence[str]], head_row: Sequence[str],
                notes: Sequence[str] = (), owner: str | None = None) -> str:
    """The whole page as HTML text: the summary table (``head_row``, ``rows``), ``notes`` as paragraphs,
    then one figure per logged measure (``D`` with the probe loss beside it, on a linear axis; ``RQ``, ``D⁺``
    if logged). The first run is drawn solid with dots, the second dashed with crosses. ``owner`` puts that
    command's generator tag in the head (:func:`coupled_curvature.base.output.generator_tag`)."""
    from coupled_curvature.base.output import generator_tag
    from coupled_curvature.reporting.html import figure_html
    from coupled_curvature.reporting.invariance_page import svg_text

    measures = [m for m in ("D", "RQ", "Dplus", "sqnorm_grad") if any(m in h["measures"] for _, h, _ in runs)]
    parts = []
    for m in measures:
        fig, left = _figure(runs, m, with_loss=m == "D")
        what = "solid: " + runs[0][0] + "".join(f"; {s}: {lab}" for s, (lab, _, _) in
                                                  zip(("dashed", "dotted"), runs[1:]))
        cap = (f"{_TITLES[m]} over training steps (log scale{'; the loss on the probe beside it' if m == 'D' else ''})."
               f" {what}." + (f" {left} value(s) that a log axis cannot show (missing or ≤ 0) are left out." if left
                              else ""))
        parts.append(figure_html(svg_text(fig), f"track-{m.lower()}", html.escape(cap)))
    title = "Curvature during training: " + " vs ".join(lab for lab, _, _ in runs)
    body = [f"<h1>{html.escape(title)}</h1>", f"<p class='reading'>{html.escape(_READING)}</p>", _table(head_row, rows),
            *(f"<p>{html.escape(n)}</p>" for n in notes), *parts]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            + ("" if owner is None else generator_tag(owner)) +
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
