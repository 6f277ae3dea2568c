"""The compiled LaTeX report fits its page: at most 5 overfull boxes, none over 20 pt (pdflatex log).

Skipped only where ``pdflatex`` is not installed. The report holds all twelve theorems' steps
(the small collection's sections), so every statement, step and table is typeset.
"""

import re
import shutil
import subprocess

import pytest

from coupled_curvature.commands import report as build
from _report_data import all_theorems_data

PDFLATEX = shutil.which("pdflatex")


def overfull(log: str) -> list[float]:
    """The widths in pt of the overfull boxes reported in a TeX log.

    >>> overfull("Overfull \\\\hbox (3.5pt too wide) in paragraph\\nOverfull \\\\vbox (21.0pt too high) has")
    [3.5, 21.0]
    """
    return [float(x) for x in re.findall(r"^Overfull \\[hv]box \(([0-9.]+)pt too", log, re.M)]


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed")
def test_latex_report_has_no_wide_boxes(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "collect", lambda *a, **k: all_theorems_data())
    out = tmp_path / "rep"
    build.build_report(str(out), formats="tex")
    tex = (out / "report.tex").read_text(encoding="utf-8")
    assert r"\usepackage[T1]{fontenc}" in tex and r"\usepackage{lmodern}" in tex and r"\usepackage{booktabs}" in tex
    run = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
                         cwd=out, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    log = (out / "report.log").read_text(encoding="latin-1")
    assert "! " not in log.replace("! LaTeX Font Warning", ""), log[-3000:]
    boxes = overfull(log)
    assert len(boxes) <= 5 and max(boxes, default=0.0) <= 20.0, boxes
