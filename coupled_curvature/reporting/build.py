"""Write a report from the data it is given: draw the figures, build the outline once
(:mod:`.sections`), render it as md/html/tex, write atomically.

The data (the catalogue's check, the cross-checks' sweeps) is gathered by the caller,
:func:`coupled_curvature.commands.report.collect`; nothing here runs a check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from coupled_curvature.choices import parse_choices

__all__ = ["FORMATS", "parse_formats", "write_report"]

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


def write_report(out: str, fmts: Iterable[str], data: Any, sweep: dict[str, Any],
                 changes: dict[str, list[float]]) -> str:
    """Write ``report.md``/``report.html``/``report.tex`` (those of ``fmts``, parsed by
    :func:`parse_formats`) plus figures into ``out`` atomically; returns the folder's path.

    ``data`` is a :class:`~coupled_curvature.reporting.content.ReportData`, ``sweep`` and
    ``changes`` the layer-rescaling sweep and neuron-scaling changes drawn as figures.
    """
    from coupled_curvature.reporting.figures import (cutoff_section_figure, neuron_figure, precision_figure,
                                                      rescaling_figure, save_figure)
    from coupled_curvature.reporting.html import render_html
    from coupled_curvature.reporting.latex import render_latex
    from coupled_curvature.reporting.markdown import render_markdown
    from coupled_curvature.reporting.sections import build_outline
    from coupled_curvature.output import write_folder

    fmts = list(fmts)
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
