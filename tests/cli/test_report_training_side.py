"""The report's λ-identities and radius-sweep sections: the data they draw (not the picture), their trust
labels, and the figure file."""

from pathlib import Path

from coupled_curvature.commands import report as build
from _report_data import small_collect


def test_the_data_behind_the_sections():
    data = small_collect()[0]
    t = data.sharpness
    assert t.function_gap < 1e-12
    assert t.raw_gap > 0.05 and t.adaptive_gap < 1e-12  # the raw curves shift, the adaptive ones coincide
    assert [c.radii for c in t.raw + t.adaptive].count(t.raw[0].radii) == 4
    assert data.rate.ok and data.rate.cases and data.rate.band


def test_sections_with_labels_and_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = build.build_report(str(tmp_path / "r"), only="T4,T12", formats="md,html")
    md = Path(out, "report.md").read_text(encoding="utf-8")
    html = Path(out, "report.html").read_text(encoding="utf-8")
    for page in (md, html):
        assert "analytic identities" in page and "a net and its rescaled twin" in page
    section = md.split("Curvature rate λ: analytic identities", 1)[1]
    assert "proved" in section and "evidence" in section and "no finite rate" in section
    assert "counts as evidence only" in section
    assert Path(out, "sharpness_twin.svg").stat().st_size > 0 and "sharpness_twin" in html
