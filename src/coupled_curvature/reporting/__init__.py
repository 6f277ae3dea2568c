"""Report assembly: Markdown, HTML (offline MathML), LaTeX and its PDF (pdflatex), written atomically.

``write_report(out, formats, data, sweep, changes)`` renders the data it is given (gathered by
:func:`coupled_curvature.commands.report.build_report`) as ``report.md``, ``report.html``,
``report.tex`` (``report.pdf`` on request, :mod:`.pdf`) and the figures (``rescaling.svg/png``, ``neuron_scaling.svg/png``,
``precision.svg/png``, ``cutoff.svg/png``) into ``out`` through a temporary folder and a rename. The section "Arbitrary precision" plots the invariance error against ``dps``; the
last, "Cutoff sensitivity", plots ``D⁺`` against ``pinv_rtol`` on the dense and Krylov paths.
"""

from coupled_curvature.reporting.build import FORMATS, parse_formats, write_report

__all__ = ["write_report", "parse_formats", "FORMATS"]
