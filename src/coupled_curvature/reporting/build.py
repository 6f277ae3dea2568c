"""Write a report from the data it is given: draw the figures, build the outline once
(:mod:`.sections`), render it as md/html/tex, compile the LaTeX to PDF when asked
(:mod:`.pdf`), write atomically.

The data (the catalogue's check, the cross-checks' sweeps) is gathered by the caller,
:func:`coupled_curvature.commands.report.collect`; nothing here runs a check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from coupled_curvature.base.choices import parse_choices

__all__ = ["FORMATS", "parse_formats", "write_report"]

FORMATS = {"md": "report.md", "html": "report.html", "tex": "report.tex", "pdf": "report.pdf"}
#: what ``--format`` means when it is not given (the PDF needs pdflatex: only on request)
DEFAULT_FORMATS = ("md", "html", "tex")


def parse_formats(formats: str | Iterable[str] | None) -> list[str]:
    """``"md,html"`` / ``["tex"]`` / ``None`` (md, html and tex) -> validated list.

    >>> parse_formats("html, md")
    ['md', 'html']
    >>> parse_formats(None), parse_formats("pdf")
    (['md', 'html', 'tex'], ['pdf'])
    """
    if formats is None:
        return list(DEFAULT_FORMATS)
    return parse_choices(formats, tuple(FORMATS), what="format", example="--format md,html",
                         valid_text="use md, html, tex and/or pdf")


def write_report(out: str, fmts: Iterable[str], data: Any, sweep: dict[str, Any],
                 changes: dict[str, list[float]]) -> str:
    """Write ``report.md``/``report.html``/``report.tex``/``report.pdf`` (those of ``fmts``, parsed
    by :func:`parse_formats`) plus figures into ``out`` atomically; returns the folder's path.
    The PDF is the LaTeX source compiled by ``pdflatex`` (:func:`.pdf.compile_pdf`); without
    ``pdflatex`` on the PATH, :class:`.pdf.LatexUnavailableError` before anything is drawn.

    ``data`` is a :class:`~coupled_curvature.reporting.content.ReportData`, ``sweep`` and
    ``changes`` the layer-rescaling sweep and neuron-scaling changes drawn as figures.
    """
    from coupled_curvature.reporting.figures import (cutoff_section_figure, neuron_figure, precision_figure,
                                                      rescaling_figure, save_figure)
    from coupled_curvature.reporting.html import render_html
    from coupled_curvature.reporting.latex import render_latex
    from coupled_curvature.reporting.markdown import render_markdown
    from coupled_curvature.reporting.sections import build_outline
    from coupled_curvature.base.output import write_folder, write_texts
    from coupled_curvature.reporting.pdf import compile_pdf, require_pdflatex

    fmts = list(fmts)
    if "pdf" in fmts:
        require_pdflatex()
    outline = build_outline(data)  # one outline; each format walks it
    renderers = {"md": render_markdown, "tex": render_latex}

    def fill(tmp: str) -> None:
        save_figure(rescaling_figure(sweep), tmp, "rescaling")
        save_figure(neuron_figure(changes, "bc-16x2"), tmp, "neuron_scaling")
        if data.precision is not None:
            save_figure(precision_figure(data.precision), tmp, "precision")
        if data.cutoff is not None:
            save_figure(cutoff_section_figure(data.cutoff), tmp, "cutoff")
        if data.sharpness is not None:
            from coupled_curvature.reporting.sharpness_twin_page import twin_figure

            save_figure(twin_figure(data.sharpness), tmp, "sharpness_twin")
        svgs = {}
        for name in os.listdir(tmp):
            if name.endswith(".svg"):
                with open(os.path.join(tmp, name), encoding="utf-8") as fh:
                    svgs[name[:-4]] = fh.read()
        texts = {f: render_html(outline, svgs) if f == "html" else renderers[f](outline)
                 for f in fmts if f != "pdf"}
        write_texts(tmp, {FORMATS[f]: text for f, text in texts.items()})
        if "pdf" in fmts:
            compile_pdf(tmp, texts.get("tex") or render_latex(outline))

    return write_folder(out, "report", fill)
