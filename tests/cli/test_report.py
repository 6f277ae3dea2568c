"""``ccurv report``: contents, determinism, atomic writing, bad input."""

import os
from pathlib import Path

import pytest

from coupled_curvature.cli import main
from coupled_curvature.commands import report as build
from _report_data import small_collect

FILES = {"report.md", "report.html", "report.tex", "rescaling.svg", "rescaling.png",
         "neuron_scaling.svg", "neuron_scaling.png", "precision.svg", "precision.png", "cutoff.svg", "cutoff.png",
         "sharpness_twin.svg", "sharpness_twin.png", ".ccurv-output"}


def _read(folder):
    return {f: (folder / f).read_bytes() for f in sorted(os.listdir(folder))}


def _without_stamp(b: bytes) -> bytes:
    return b"\n".join(l for l in b.split(b"\n") if b"Generated:" not in l)


def test_report_twice_is_identical_but_timestamp(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["report", "--only", "T4", "--out", str(a)]) == 0
    assert main(["report", "--only", "T4", "--out", str(b)]) == 0
    fa, fb = _read(a), _read(b)
    assert set(fa) == FILES == set(fb)
    for name in fa:
        assert _without_stamp(fa[name]) == _without_stamp(fb[name]), name
    for name in ("report.md", "report.html", "report.tex"):
        assert sum(b"Generated:" in l for l in fa[name].split(b"\n")) == 1


def test_report_contents(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = build.build_report(str(tmp_path / "r"), only="T4,T12")
    md, html, tex = (Path(out, f"report.{x}").read_text(encoding="utf-8") for x in ("md", "html", "tex"))
    assert "## T4 — Exact invariance group" in md and "$$" in md and "check_witness: accepted" in md
    assert "<math" in html and "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/1998/Math/MathML"', "")
    # figures are inlined in report.html (the file alone is complete), files for md and tex
    assert "data-figure='rescaling'" in html and "<img" not in html and "neuron_scaling.svg" in md and "rescaling.png" in tex
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    assert all(ord(ch) < 128 for ch in tex.replace("Gröbner", ""))  # pdflatex-safe apart from escapes
    for label in ("exact", "certificate", "rewrite", "numeric"):
        assert label in html
    # the "Arbitrary precision" section, in all three formats, shows the computed rows
    p = small_collect()[0].precision
    assert "## Arbitrary precision" in md and "<h2>Arbitrary precision</h2>" in html
    assert "\\section*{Arbitrary precision}" in tex and "precision.png" in tex
    assert "(precision.svg)" in md and "data-figure='precision'" in html
    for r in p.rows:
        cells = [str(r.dps), r.dD, r.dDplus, f"1e-{r.dps}", r.control_D, r.control_Dplus, "yes" if r.agrees else "NO"]
        assert "| " + " | ".join(cells) + " |" in md
        assert all(f"<td>{c}</td>" in html for c in cells[:-1]) and all(c in tex for c in cells)
    # the "Cutoff sensitivity" section, last in all three formats, with its figure and table
    from coupled_curvature.reporting.cutoff_section import cutoff_table
    from coupled_curvature.reporting.latex import tex_text

    c = small_collect()[0].cutoff
    assert md.index("## Arbitrary precision") < md.index("## Cutoff sensitivity")
    assert "<section id='cutoff'><h2>Cutoff sensitivity</h2>" in html and "\\section*{Cutoff sensitivity}" in tex
    assert "(cutoff.svg)" in md and "data-figure='cutoff'" in html and "{cutoff.png}" in tex
    assert Path(out, "cutoff.svg").stat().st_size > 10_000 and Path(out, "cutoff.png").read_bytes()[:4] == b"\x89PNG"
    assert "H^+_\\tau" in md and "<msubsup><mi>H</mi><mi>τ</mi>" in html and "H^+_\\tau" in tex
    rows = cutoff_table(c)
    assert len(rows) > 10 and any("1e-10 (default)" == r[1] for r in rows)
    for r in rows[1:]:
        assert "| " + " | ".join(r) + " |" in md
        assert all(f"<td>{x}</td>" in html for x in (r[0], r[1], r[2], r[3], r[5]))
        assert " & ".join(tex_text(x) for x in r) + " \\\\" in tex


def test_precision_data_falls_like_ten_to_minus_dps():
    """One row per dps; errors near 10^-dps, the negative control far above (computed, not hard-coded)."""
    p = small_collect()[0].precision
    assert [r.dps for r in p.rows] == [15, 30, 50, 100] and p.c == "3/7"
    for r in p.rows:
        dD, dDp, cD, cDp = r.values
        assert 0 < dD <= 10.0 ** -(r.dps - 4) and 0 < dDp <= 10.0 ** -(r.dps - 8)
        assert cD > 1e-3 and cDp > 1e-3  # the control moves D and D⁺ at every precision
        assert r.agrees
    assert all(b.values[0] < a.values[0] * 1e-10 for a, b in zip(p.rows, p.rows[1:]))  # it falls with dps


def test_precision_figure_is_log_scale_with_reference():
    from coupled_curvature.reporting.figures import precision_figure

    p = small_collect()[0].precision
    ax = precision_figure(p).axes[0]
    assert ax.get_yscale() == "log"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    ref = lines[r"reference $10^{-\mathrm{dps}}$"]
    assert all(abs(y - 10.0 ** -x) <= 1e-12 * 10.0 ** -x for x, y in zip(ref.get_xdata(), ref.get_ydata()))
    d = lines["layer rescaling c = 3/7: max rel ΔD"]
    assert list(d.get_xdata()) == [15, 30, 50, 100] and list(d.get_ydata()) == [r.values[0] for r in p.rows]
    lo, hi = ax.get_ylim()
    assert lo < min(d.get_ydata()) and hi > max(r.values[2] for r in p.rows)  # nothing is clipped


def test_failure_mid_report_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    import coupled_curvature.reporting.latex as latex

    def boom(data):
        raise RuntimeError("simulated failure while rendering LaTeX")

    monkeypatch.setattr(latex, "render_latex", boom)
    with pytest.raises(RuntimeError):
        build.build_report(str(tmp_path / "new"))
    assert os.listdir(tmp_path) == []
    # an existing report is left exactly as it was
    monkeypatch.undo()
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    old = build.build_report(str(tmp_path / "old"), formats="md")
    before = _read(tmp_path / "old")
    monkeypatch.setattr(latex, "render_latex", boom)
    with pytest.raises(RuntimeError):
        build.build_report(old)
    assert _read(tmp_path / "old") == before and os.listdir(tmp_path) == ["old"]


@pytest.mark.parametrize("argv,msg", [
    (["--format", "docx"], "unknown format"),
    (["--only", "T99"], "unknown theorem"),
    (["--out", "/proc/ccurv-report-test"], "cannot write"),
    (["--out", "/nonexistent-dir/report"], "does not exist"),
])
def test_bad_input_exit_2(argv, msg, capsys):
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccurv: error:") and msg in err and "Traceback" not in err


def test_refuses_to_replace_unrelated_folder(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["report", "--only", "T1", "--out", str(tmp_path / "mine")]) == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_report_names_the_coq_theorems_with_their_scope_and_size(tmp_path, monkeypatch):
    """T4's section lists its pinned Coq theorems with line counts and what they prove."""
    from coupled_curvature.proofs import formal

    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = build.build_report(str(tmp_path / "r"), formats="md,html")
    md = (tmp_path / "r" / "report.md").read_text()
    t4 = md.split("## T4")[1].split("\n## ")[0]
    first = formal.formal_theorems()["T4"][0].removeprefix("CoupledCurvature.")
    assert "Formal (Coq), for every n" in t4 and f"`{first}` (" in t4 and "lines)" in t4
    assert "Formal (Coq)" in (tmp_path / "r" / "report.html").read_text()
    assert out
