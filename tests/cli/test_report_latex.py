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


def test_snake_case_names_are_one_upright_word_not_two_subscripts():
    """`attn.q_proj_weight` (a parameter name in T13's cross-check) stopped pdflatex with 'Double subscript';
    a name with two or more underscores is one upright word; a single subscript stays math (the control)."""
    from coupled_curvature.reporting.umath import math_latex

    got = math_latex("ΔD[attn.q_proj_weight]")
    assert r"\mathrm{q\_proj\_weight}" in got and "}_" not in got
    assert math_latex("W_Q + b_{l+1}") == "W_{Q}+b_{l+1}"
