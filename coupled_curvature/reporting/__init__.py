"""Report assembly: Markdown, HTML (offline MathML) and LaTeX, written atomically.

``build_report(out="report", formats=None, only=None, seed=0, heavy=False)`` writes
``report.md``, ``report.html``, ``report.tex`` and the figures (``rescaling.svg/png``,
``neuron_scaling.svg/png``, ``precision.svg/png``, ``cutoff.svg/png``) into ``out`` through a temporary
folder and a rename. The section "Arbitrary precision" plots the invariance error against ``dps``; the
last, "Cutoff sensitivity", plots ``D⁺`` against ``pinv_rtol`` on the dense and Krylov paths.
"""

from coupled_curvature.reporting.build import FORMATS, build_report, parse_formats

__all__ = ["build_report", "parse_formats", "FORMATS"]
