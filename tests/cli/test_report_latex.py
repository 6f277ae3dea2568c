"""The LaTeX report compiles with pdflatex (skipped only where no TeX engine is installed)."""

import shutil
import subprocess

import pytest

from coupled_curvature.cli import main
from coupled_curvature.reporting.latex import _ascii_math

PDFLATEX = shutil.which("pdflatex")


def test_text_mode_specials_are_escaped_once():
    tex = _ascii_math(r"\mathtt{\text{PᵀP}} \quad \text{(rewrite:sum_linearity)} \text{check\_it}")
    assert r"\text{P\^{}TP}" in tex and r"\text{(rewrite:sum\_linearity)}" in tex
    assert r"\text{check\_it}" in tex and r"\\_" not in tex


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed")
def test_latex_report_compiles(tmp_path):
    out = tmp_path / "rep"
    assert main(["report", "--format", "tex", "--only", "T1,T2,T4,T5,T7", "--out", str(out)]) == 0
    run = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
        cwd=out, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert (out / "report.pdf").stat().st_size > 10_000
