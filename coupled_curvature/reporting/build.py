"""Assemble a report: run the catalogue, draw the figures, build the outline once
(:mod:`.sections`), render it as md/html/tex, write atomically.

>>> build_report("report", formats=("md",), only=["T12"], heavy=False)   # doctest: +SKIP
'/abs/path/report'
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Iterable
from typing import Any

from coupled_curvature.choices import parse_choices

__all__ = ["FORMATS", "parse_formats", "build_report", "collect"]

FORMATS = {"md": "report.md", "html": "report.html", "tex": "report.tex"}


def parse_formats(formats: str | Iterable[str] | None) -> list[str]:
    """``"md,html"`` / ``["tex"]`` / ``None`` (all three) -> validated list.

    >>> parse_formats("html, md")
    ['md', 'html']
    """
    if formats is None:
        return list(FORMATS)
    return parse_choices(formats, tuple(FORMATS), what="format", example="--format md,html",
                         valid_text="use md, html and/or tex")


def collect(only: Any = None, seed: int = 0, heavy: bool = False, progress: Callable[[str], None] | None = None,
            now: str | None = None):
    """Run the checks and measure the figure data; returns ``(ReportData, sweep, changes)``."""
    from coupled_curvature.proofs import check_all
    from coupled_curvature.proofs.crosschecks import neuron_scaling_changes, rescaling_sweep
    from coupled_curvature.reporting.content import FigureRef, ReportData
    from coupled_curvature.numeric.studies.cutoff import cutoff_data
    from coupled_curvature.numeric.studies.precision import precision_sweep

    say = progress or (lambda s: None)
    check = check_all(only=only, seed=seed, progress=say, heavy=heavy)
    say("report: layer-rescaling sweep and neuron-scaling distribution for the figures")
    sweep = rescaling_sweep(check.lab)
    changes = neuron_scaling_changes(check.lab)
    figs = [
        FigureRef("rescaling", f"D, D⁺, Rayleigh quotient and ‖g‖² of {sweep['block']} ({sweep['net']}) against the "
                  "layer rescaling factor c (log axes): the raw quantities fall as c⁻², D and D⁺ stay flat (T3)."),
        FigureRef("neuron_scaling", "Distribution of the relative change of D per block under random non-uniform "
                  "neuron-wise scalings of layer 0 (bc-16x2): far from 0 on the affected blocks (T5)."),
    ]
    precision = precision_sweep(seed, heavy, say)
    cutoff = cutoff_data(seed, say)
    stamp = now or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ReportData(seed, stamp, check, figs, precision, cutoff), sweep, changes


def build_report(out: str = "report", formats: Any = None, only: Any = None, seed: int = 0, heavy: bool = False,
                 progress: Callable[[str], None] | None = None, now: str | None = None) -> str:
    """Write ``report.md``/``report.html``/``report.tex`` plus figures into ``out`` atomically."""
    from coupled_curvature.proofs import parse_only
    from coupled_curvature.reporting.figures import (cutoff_section_figure, neuron_figure, precision_figure,
                                                      rescaling_figure, save_figure)
    from coupled_curvature.reporting.html import render_html
    from coupled_curvature.reporting.latex import render_latex
    from coupled_curvature.reporting.markdown import render_markdown
    from coupled_curvature.reporting.sections import build_outline
    from coupled_curvature.output import check_folder, write_folder

    fmts = parse_formats(formats)
    ids = parse_only(only)
    check_folder(out, "report")  # fail on a bad folder before the minutes of work
    data, sweep, changes = collect(ids, seed, heavy, progress, now)
    outline = build_outline(data)  # one outline; each format walks it
    renderers = {"md": render_markdown, "tex": render_latex}

    def fill(tmp: str) -> None:
        save_figure(rescaling_figure(sweep), tmp, "rescaling")
        save_figure(neuron_figure(changes, "bc-16x2"), tmp, "neuron_scaling")
        if data.precision is not None:
            save_figure(precision_figure(data.precision), tmp, "precision")
        if data.cutoff is not None:
            save_figure(cutoff_section_figure(data.cutoff), tmp, "cutoff")
        svgs = {}
        for name in os.listdir(tmp):
            if name.endswith(".svg"):
                with open(os.path.join(tmp, name), encoding="utf-8") as fh:
                    svgs[name[:-4]] = fh.read()
        for f in fmts:
            text = render_html(outline, svgs) if f == "html" else renderers[f](outline)
            with open(os.path.join(tmp, FORMATS[f]), "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)

    return write_folder(out, "report", fill)
