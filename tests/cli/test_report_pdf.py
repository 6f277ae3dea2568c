"""The compiled LaTeX report fits its page: at most 5 overfull boxes, none over 20 pt (pdflatex log);
``ccurv report --format pdf`` writes ``report.pdf`` atomically, and says in one line, before any
work, when pdflatex is missing.

Skipped only where ``pdflatex`` is not installed (the missing-pdflatex test runs everywhere). The
report holds all twelve theorems' steps (the small collection's sections), so every statement,
step and table is typeset.
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


# ------------------------------------------------------------------------- ccurv report --format pdf


def _listing(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed")
def test_format_pdf_writes_the_compiled_report(tmp_path, monkeypatch, capsys):
    from coupled_curvature.cli import main
    from _report_data import small_collect

    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = tmp_path / "rep"
    assert main(["report", "--format", "pdf", "--out", str(out)]) == 0
    assert "report written to" in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert "report.pdf" in names and "report.tex" not in names  # only the format asked for
    assert not [n for n in names if n.endswith((".aux", ".log", ".toc", ".out")) or n.startswith(".pdflatex-")]
    pdf = (out / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(out / "report.pdf"), "-"], capture_output=True, text=True,
                              check=True).stdout
        assert "T4" in text and "T12" in text
    # tex and pdf together: the .tex written is the source the PDF was compiled from
    both = tmp_path / "both"
    build.build_report(str(both), formats="tex,pdf")
    assert (both / "report.tex").is_file() and (both / "report.pdf").read_bytes().startswith(b"%PDF-")


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed")
def test_a_failed_compilation_keeps_the_previous_report(tmp_path, monkeypatch):
    from coupled_curvature.reporting import latex, pdf
    from _report_data import small_collect

    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    old = tmp_path / "rep"
    build.build_report(str(old), formats="md")
    before = _listing(old)
    monkeypatch.setattr(latex, "render_latex", lambda outline: "\\documentclass{article}\\begin{document}"
                        "\\undefinedmacro\\end{document}\n")
    with pytest.raises(pdf.LatexBuildError, match="Undefined control sequence"):
        build.build_report(str(old), formats="pdf")
    assert _listing(old) == before and sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_without_pdflatex_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """The missing-pdflatex path, whether or not this machine has pdflatex: ``shutil.which`` finds
    nothing, and the command stops before collecting anything or creating the folder."""
    from coupled_curvature.cli import main
    from coupled_curvature.reporting import pdf

    def no_work(*a, **k):
        raise AssertionError("the report's checks ran although pdflatex is missing")

    monkeypatch.setattr(build, "collect", no_work)
    monkeypatch.setattr(pdf.shutil, "which", lambda name, *a, **k: None)
    out = tmp_path / "rep"
    assert main(["report", "--format", "md,pdf", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ccurv: error:") and "pdflatex" in lines[0]
    assert pdf.DEBIAN_PACKAGES in lines[0] and captured.out == ""
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(pdf.LatexUnavailableError):  # the writer refuses too, before drawing anything
        from coupled_curvature.reporting.build import write_report

        write_report(str(out), ["pdf"], None, {}, {})
    assert list(tmp_path.iterdir()) == []
