"""``ccurv experiment transformers``: its terminal table, markdown page and figure, from the study's data
(:func:`~coupled_curvature.numeric.studies.transformer_study.transformer_study`)."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure

from coupled_curvature.reporting.terminal import table, wrap

__all__ = ["figure", "render_markdown", "terminal_text"]

_MARK = {"invariant": "i", "moves": "m", "degenerate": "d"}
_FLOOR, _CEIL = -16.0, 4.0  # log10 of the colour range


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def _grid(model: dict, measures: list[str], symmetries: list[str]) -> list[list[dict]]:
    cells = {(c["measure"], c["symmetry"]): c for c in model["cells"]}
    return [[cells[m, s] for s in symmetries] for m in measures]


def terminal_text(data: dict, width: int | None = None) -> str:
    """One table per model (measure × map: max relative change, prediction, ``*`` on a disagreement), the
    largest function gap, the legend said once.

    >>> c = {"measure": "D", "symmetry": "vo", "deviation": 0.5, "predicted": "moves", "agrees": True}
    >>> data = {"measures": ["D"], "symmetries": ["vo"], "models": [{"kind": "mha", "description": "mha: tiny",
    ...         "cells": [c], "function_gaps": {"vo": [["t=2", 1e-15]]}, "seconds": 1.0}]}
    >>> print(terminal_text(data, 60).splitlines()[2])
    D        5.0e-01 m
    """
    out = []
    for model in data["models"]:
        if "skipped" in model:
            out += [f"{model['kind']}: skipped ({model['skipped']})", ""]
            continue
        rows = [[m] + [f"{_fmt(c['deviation'])} {_MARK[c['predicted']]}{'' if c['agrees'] else '*'}" for c in row]
                for m, row in zip(data["measures"], _grid(model, data["measures"], data["symmetries"]))]
        gap = max((g for pts in model["function_gaps"].values() for _, g in pts), default=0.0)
        out += [*wrap(model["description"], width), table(["measure", *data["symmetries"]], rows, width=width),
                f"largest function gap {gap:.1e}; {model['seconds']:.1f} s", ""]
    out += wrap("cell: max relative change over the sweep and the measure's blocks, then the prediction (i invariant, "
                "m moves, d degenerate, T10); * marks a disagreement with the prediction", width)
    return "\n".join(out)


def render_markdown(data: dict) -> str:
    """The tables of :func:`terminal_text` in markdown, with every disagreement and its witness listed."""
    out = ["# Attention's symmetries on small trained transformers", "",
           "Largest relative change of each measure over each map's sweep (`i`/`m`/`d`: predicted invariant, "
           "moves, degenerate; `*`: disagrees). D[head]: per-head blocks; D[gauge]: gauge-fixed (T14).", ""]
    for model in data["models"]:
        if "skipped" in model:
            out += [f"## {model['kind']}", "", f"Skipped: {model['skipped']}", ""]
            continue
        out += [f"## {model['kind']}", "", model["description"], "",
                "| measure | " + " | ".join(data["symmetries"]) + " |", "|---" * (len(data["symmetries"]) + 1) + "|"]
        for m, row in zip(data["measures"], _grid(model, data["measures"], data["symmetries"])):
            out.append(f"| {m} | " + " | ".join(f"{_fmt(c['deviation'])} {_MARK[c['predicted']]}"
                                                f"{'' if c['agrees'] else '*'}" for c in row) + " |")
        bad = [c for c in model["cells"] if not c["agrees"]]
        out += [""] + [f"- disagreement {c['measure']} × {c['symmetry']} ({c['reason']}): {c['witness']}" for c in bad]
        out.append("")
    return "\n".join(out)


def figure(data: dict) -> Figure:
    """One heat map per model: log10 of the largest relative change (measure × map), each cell annotated with
    the prediction (i, m, d) and ``✗`` where it disagrees; exact zeros and rounding sit at the bottom of the scale."""
    models = [m for m in data["models"] if "skipped" not in m]
    ms, ss = data["measures"], data["symmetries"]
    fig = Figure(figsize=(3.0 * max(len(models), 1) + 1.6, 0.34 * len(ms) + 2.4), layout="constrained")
    axes = fig.subplots(1, max(len(models), 1), squeeze=False)[0]
    image = None
    for ax, model in zip(axes, models):
        grid = _grid(model, ms, ss)
        vals = [[_FLOOR if not c["deviation"] else max(_FLOOR, min(_CEIL, math.log10(c["deviation"]))) for c in row]
                for row in grid]
        image = ax.imshow(vals, cmap="viridis", vmin=_FLOOR, vmax=_CEIL, aspect="auto")
        for i, row in enumerate(grid):
            for j, c in enumerate(row):
                ax.text(j, i, _MARK[c["predicted"]] + ("" if c["agrees"] else " ✗"), ha="center", va="center",
                        fontsize=7, color="white" if vals[i][j] < -6 else "black")
        ax.set_xticks(range(len(ss)), ss, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(ms)), ms if ax is axes[0] else [""] * len(ms), fontsize=7)
        ax.set_title(model["kind"], fontsize=9)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.8)
        bar.set_label("log10 max relative change (i/m/d: predicted)", fontsize=8)
    fig.suptitle("Measures under attention's symmetries (T13): D[head] keeps under c·R, D[gauge] under all (T14)",
                 fontsize=9)
    return fig
