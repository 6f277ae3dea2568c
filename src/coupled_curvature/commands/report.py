"""``ccurv report``: the proof catalogue and cross-checks as Markdown, HTML (offline MathML), LaTeX
and, on request, a PDF compiled from the LaTeX (``--format pdf``: pdflatex twice).

:func:`collect` runs the checks and measures the figure data; :func:`build_report` hands that data
to :func:`coupled_curvature.reporting.build.write_report`, which only renders and writes.

>>> build_report("report", formats=("md",), only=["T12"], heavy=False)   # doctest: +SKIP
'/abs/path/report'
"""

from __future__ import annotations

import argparse
import datetime as _dt
import time
from collections.abc import Callable
from typing import Any

from coupled_curvature.commands._common import say as _say
from coupled_curvature.commands._common import add_command, add_seed

#: the line of ``ccurv --help`` that names the command, and the description its own ``--help`` opens with
HELP = "write the proof catalogue as md/html/tex (or pdf) with figures"
DESCRIPTION = ("Write the theorem catalogue as a document: statements, every derivation step with its "
               "trust label and checking method, witnesses, numeric cross-checks and figures, as Markdown, "
               "self-contained HTML and LaTeX, into a folder written atomically; --format pdf compiles the LaTeX "
               "with pdflatex (twice) into report.pdf.")


def collect(only: Any = None, seed: int = 0, heavy: bool = False, progress: Callable[[str], None] | None = None,
            now: str | None = None) -> tuple[Any, dict[str, Any], dict[str, list[float]]]:
    """Run the checks and measure the figure data; returns ``(ReportData, sweep, changes)``."""
    from coupled_curvature.numeric.studies.cutoff import cutoff_data
    from coupled_curvature.numeric.studies.precision import precision_sweep
    from coupled_curvature.proofs import check_all
    from coupled_curvature.proofs.figure_data import neuron_scaling_changes, rescaling_sweep
    from coupled_curvature.reporting.content import FigureRef, ReportData

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
    from coupled_curvature.commands.check_rate import gather
    from coupled_curvature.numeric.studies.sharpness_twin import twin_curve_data

    say("report: λ's analytic identities; the radius sweep of a net and its rescaled twin")
    rate, twin = gather(seed=seed), twin_curve_data(seed)
    return ReportData(seed, stamp, check, figs, precision, cutoff, rate, twin), sweep, changes


def build_report(out: str = "report", formats: Any = None, only: Any = None, seed: int = 0, heavy: bool = False,
                 progress: Callable[[str], None] | None = None, now: str | None = None) -> str:
    """Write ``report.md``/``report.html``/``report.tex`` (and ``report.pdf`` when ``formats``
    names it) plus figures into ``out`` atomically."""
    from coupled_curvature.base.output import check_folder
    from coupled_curvature.proofs import parse_only
    from coupled_curvature.reporting.build import parse_formats, write_report
    from coupled_curvature.reporting.pdf import require_pdflatex

    fmts = parse_formats(formats)
    if "pdf" in fmts:
        require_pdflatex()  # one line, before any check runs
    ids = parse_only(only)
    check_folder(out, "report")  # fail on a bad folder before the minutes of work
    data, sweep, changes = collect(ids, seed, heavy, progress, now)
    return write_report(out, fmts, data, sweep, changes)


def register(sub: argparse._SubParsersAction) -> None:
    rep = add_command(sub, "report", run, HELP, DESCRIPTION)
    rep.add_argument("--format", default=None, metavar="FMT",
                     help="md, html, tex, pdf or a comma-separated list (default: md,html,tex; pdf needs "
                     "pdflatex)")
    rep.add_argument("--out", default="report", metavar="DIR", help="output folder (default: ./report)")
    rep.add_argument("--only", default=None, metavar="IDS", help="comma-separated theorem ids, e.g. T4,T6")
    add_seed(rep, "seed for training and the symmetry maps")
    rep.add_argument("--full", action="store_true",
                     help="include the digits 64x3 D⁺ chain and the 502-parameter precision sweep (~3 min more)")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    path = build_report(args.out, formats=args.format, only=args.only, seed=args.seed, heavy=args.full,
                        progress=_say)
    print(f"report written to {path}")
    _say(f"report finished in {time.perf_counter() - start:.1f}s")
    return 0
