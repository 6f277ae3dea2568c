"""``explore --out``: matrix.html is one self-contained page (title, legend, notes, figures inlined,
each cell's criterion, its link to a details row with the theorem, the numbers and the witness); the
figures plot each measure's relative change against the symmetry's own parameter, each measure
with its own colour, marker and line style, the tolerances dashed on top, legends outside the data."""

import re

from matplotlib.colors import to_hex

from coupled_curvature.cli import main
from coupled_curvature.numeric.studies import explorer as E
from coupled_curvature.numeric.studies.explorer_predictions import EpsLimit
from coupled_curvature.reporting import explore_page


def test_explorer_page_is_a_page(tmp_path, monkeypatch):
    made = {}
    real = explore_page.explore_figure

    def spy(mx, sym):
        made[sym] = fig = real(mx, sym)
        return fig

    monkeypatch.setattr(explore_page, "explore_figure", spy)
    out = tmp_path / "out"
    argv = ["explore", "--arch", "linear:4x2", "--dataset", "wine", "--epochs", "2", "--samples", "40", "--quick",
            "--measures", "D,rho,fisher_rao", "--symmetries", "orthogonal,gl", "--out", str(out)]
    assert main(argv) == 0
    page = (out / "matrix.html").read_text(encoding="utf-8")
    assert "<title>coupled-curvature explorer: invariance matrix</title>" in page and "<style>" in page
    for key in ("inv", "inv→0", "mov", "deg", "ok", "NO"):
        assert f"<span>{key}</span>" in page
    assert "<h2>Notes</h2>" in page and "<h2>Figures</h2>" in page
    assert page.count("src='data:image/png;base64,") == 2 and not re.search(r"src=['\"](?!data:)", page)
    assert re.search(r'<td class="ok[^"]*" title="D × orthogonal: max relative deviation', page)
    # each cell: its criterion in the cell, a link to its details row (theorem, witness, numbers)
    assert re.search(r"<small>inv ≤ 1\.0e-09 ok</small>", page) and re.search(r"<small>mov ≥ 1\.0e-03 ok</small>", page)
    for m, s in (("D", "gl"), ("rho", "orthogonal")):
        assert f'href="#cell-{m}_{s}"' in page
        row = re.search(rf"<tr id='cell-{m}_{s}'.*?</tr>", page).group(0)
        assert "T4" in row or "T11" in row
        assert "orthogonal_mix" in row or "linear_mix" in row  # the witness names the map
        assert "x=1:" in row  # the deviation at the sweep point t = 1
    assert (out / "figures" / "gl.svg").exists() and (out / "figures" / "gl.png").exists()
    for sym, fig in made.items():
        ax = fig.axes[0]
        assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # legend right of the axes
        assert ax.get_xlabel().startswith({"orthogonal": "rotation size t", "gl": "mixing strength t"}[sym])
        data = [ln for ln in ax.get_lines() if ln.get_label() in ("D", "rho", "fisher_rao")]
        assert len(data) == 3 and all(list(ln.get_xdata()) == [1.0] for ln in data)  # x = t of the quick sweep


def _fake_matrix():
    """Every registered measure with a made-up curve (plain data for the figure code)."""
    from coupled_curvature.numeric.measures import registry as M

    measures = M.select("all")
    cells = []
    for i, m in enumerate(measures):
        for sym, xs in (("perm", [1.0, 32.0]), ("nonlinear", [0.05, 1.0]), ("neuron", [2.0, 8.0]), ("bn", [16.0])):
            if (m, sym) == ("fisher_rao", "bn"):
                continue
            pts = [(x, 0.0 if i == 0 else 10.0 ** (-i) * x) for x in xs]
            cells.append(E.Cell(m, sym, max(d for _, d in pts), E.MV, "T6", True, points=pts, witness="w"))
    lim = EpsLimit([1e-8, 1e-9, 1e-10, 1e-12], [1e-4, 1e-5, 1e-6, 1e-8], [1e-3, 1e-4, 1e-5, 1e-7], 1.0, 1.0,
                   1e-8, 1e-8, 1e-9, True)
    cells.append(E.Cell("fisher_rao", "bn", 1e-8, E.I, "T1", True, points=[(16.0, 1e-8)], witness="w", eps_limit=lim))
    return E.Matrix(measures, ["perm", "nonlinear", "neuron", "bn"], cells, {}, {}, 0.0,
                    parameters={s: E.PARAMETERS[s] for s in E.SYMMETRIES}), measures


def test_figures_use_the_symmetry_parameters_and_distinct_styles():
    mx, measures = _fake_matrix()
    for sym, log in (("perm", True), ("nonlinear", True), ("neuron", False)):
        ax = explore_page.explore_figure(mx, sym).axes[0]
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        for m in measures:  # x: the parameters of the sweep, y: the cell's points (exact 0 at the floor)
            cell = mx.cell(m, sym)
            assert list(lines[m].get_xdata()) == [x for x, _ in cell.points]
            assert list(lines[m].get_ydata()) == [max(d, explore_page.FLOOR) for _, d in cell.points]
        styles = {(to_hex(lines[m].get_color()), lines[m].get_marker(), lines[m].get_linestyle()) for m in measures}
        assert len(styles) == len(measures) == 15
        assert len({to_hex(lines[m].get_color()) for m in measures}) == 15  # not a 10-colour cycle
        assert (ax.get_xscale() == "log") == log
        assert ax.get_xlabel() == E.PARAMETERS[sym]
        assert "draw" not in ax.get_xlabel()
        refs = [lines["moves if ≥ 1e-3"], next(ln for k, ln in lines.items() if k.startswith("invariant if"))]
        assert all(r.get_linestyle() == "--" and r.get_zorder() > lines[m].get_zorder() for r in refs for m in measures)
    assert mx.parameters["perm"].startswith("swapped unit pairs") and "sinh" in mx.parameters["nonlinear"]
    ax = explore_page.eps_figure(mx).axes[0]
    fr = next(ln for ln in ax.get_lines() if ln.get_label().startswith("fisher_rao"))
    assert list(fr.get_xdata()) == [1e-8, 1e-9, 1e-10, 1e-12] and ax.get_xscale() == ax.get_yscale() == "log"
    html = explore_page.render_html(mx, embed_figures=False)
    assert "<small>inv as eps→0, order 1.00 ok</small>" in html
