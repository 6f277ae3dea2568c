"""``explore --out``: matrix.html is one self-contained page (title, legend, notes, figures inlined);
the figures give each measure a distinct colour and line style, legends sit outside the data."""

import re

from coupled_curvature.cli import main
from coupled_curvature.reporting import explore_page


def test_explorer_page_is_a_page(tmp_path, monkeypatch):
    made = {}
    real = explore_page._figure

    def spy(mx, sym):
        made[sym] = fig = real(mx, sym)
        return fig

    monkeypatch.setattr(explore_page, "_figure", spy)
    out = tmp_path / "out"
    argv = ["explore", "--arch", "linear:4x2", "--dataset", "wine", "--epochs", "2", "--samples", "40", "--quick",
            "--measures", "D,rho,fisher_rao", "--symmetries", "orthogonal,gl", "--out", str(out)]
    assert main(argv) == 0
    page = (out / "matrix.html").read_text(encoding="utf-8")
    assert "<title>coupled-curvature explorer: invariance matrix</title>" in page and "<style>" in page
    for key in ("inv", "mov", "deg", "ok", "NO"):
        assert f"<span>{key}</span>" in page
    assert "<h2>Notes</h2>" in page and "<h2>Figures</h2>" in page
    assert page.count("src='data:image/png;base64,") == 2 and not re.search(r"src=['\"](?!data:)", page)
    assert re.search(r'<td class="ok[^"]*" title="D × orthogonal: max relative deviation', page)
    for fig in made.values():
        ax = fig.axes[0]
        styles = [(ln.get_color(), ln.get_linestyle()) for ln in ax.get_lines()]
        assert len(set(styles)) == len(styles)
        assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # legend right of the axes
        assert "parameter" not in ax.get_xlabel() or ax.get_xlabel() != "orthogonal parameter"
