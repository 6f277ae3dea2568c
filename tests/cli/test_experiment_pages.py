"""The two experiment pages as a person sees them: invariance.html and width.html fit a 1280 and an
800 px window (no element past the right edge) with their figures inlined, from small synthetic
payloads (no training); the invariance figure marks the degenerate (T10) nets and draws the
tolerance lines dashed, on top, with the legend outside the axes."""

from __future__ import annotations

import pytest

from coupled_curvature.reporting import invariance_page as P
from coupled_curvature.reporting import width_page as R
from test_browser import CHROMIUM, _width_run

CONFIG = {"name": "synthetic", "note": "a planted payload", "tol_D": 1e-8, "tol_Dplus": 1e-5, "moves": 1e-3,
          "max_dense": 1024}


def _invariance_data() -> dict:
    rows = []
    for i, (dataset, arch, hidden) in enumerate([("digits", "mlp", [12]), ("digits", "mlp-nobias", [8, 8]),
                                                 ("breast_cancer", "mlp-leaky", [8, 8]),
                                                 ("breast_cancer", "mlp-bn", [8, 8]), ("digits", "cnn", [2, 4])]):
        deg = arch == "mlp-bn"
        rows.append({"dataset": dataset, "arch": arch, "hidden": hidden, "seed": 0, "params": 900 + i,
                     "blocks": 4 + i, "train_acc": 0.9568, "test_acc": 0.9333,
                     "max_rel_change_D": 1.04e-6 if deg else 8.4e-16 * (i + 1),
                     "max_rel_change_Dplus": 6.2e-6 if deg else 1.6e-9 / (i + 1),
                     "neuron_control_median": None if deg else 0.993, "neuron_control_min": None if deg else 0.99,
                     "rq_change": 4.1e-7 if deg else 1.33e16 / 10 ** i, "top_eig_change": 7.09e3 * (i + 1),
                     "t9_residual": 1.4e-16 if arch == "mlp-nobias" else None,
                     "status": "degenerate (T10)" if deg else "invariant"})
    return {"rows": rows * 2, "config": CONFIG, "criterion": "synthetic", "seconds": 0.5}


def _width_data() -> dict:
    import numpy as np

    from coupled_curvature.numeric.studies.width import GAPS, kendall_table, quick_config, reported_measures

    measures = {m: f"measure {m}, a long description of what it averages" for m in reported_measures(quick_config())}
    rng = np.random.default_rng(0)
    runs = []
    for seed in (0, 1):
        for depth in (1, 3):
            for width in (8, 32, 128):
                gap = float(rng.uniform(0.05, 0.3))
                runs.append({"seed": seed, "depth": depth, "width": width, "params": 610 * width, "epochs": 30,
                             "reached_target": width > 8, "train_loss": 9.24e-3, "test_loss": 0.215,
                             "gap_loss": gap, "gap_err": gap / 5, "Dplus_blocks": f"{2 * depth + 2}/{2 * depth + 2}",
                             **{m: float(rng.lognormal(3, 2)) for m in measures}})
    cfg = {**quick_config().__dict__, "seeds": [0, 1]}
    return {"runs": runs, "kendall": kendall_table(runs, list(measures), n_boot=50), "measures": measures,
            "gaps": dict(GAPS), "config": cfg, "criterion": "synthetic", "aggregation": "synthetic",
            "seconds": 0.0}


def test_invariance_figure_marks_t10_nets_and_draws_the_tolerances():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = P.invariance_figure(_invariance_data()["rows"], 1e-8, 1e-5, 1e-3)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("degenerate (T10)" in s for s in labels)
    assert any("ΔD ≤ 1e-08" in s for s in labels) and any("ΔD⁺ ≤ 1e-05" in s for s in labels)
    assert any("ΔRQ > 0.001" in s for s in labels)
    hollow = [c for c in ax.collections if len(c.get_facecolors()) == 0 or c.get_facecolors()[0][3] == 0]
    assert len(hollow) == 2 and all(len(c.get_offsets()) == 2 for c in hollow)  # ΔD and ΔD⁺ of the two T10 nets
    top = max(c.get_zorder() for c in ax.collections)
    lines = {(tuple(ln.get_xdata()), tuple(ln.get_ydata())): ln for ln in ax.get_lines()}
    horizontal = {ln.get_ydata()[0] for ln in lines.values() if ln.get_ydata()[0] == ln.get_ydata()[1]}
    vertical = {ln.get_xdata()[0] for ln in lines.values() if ln.get_xdata()[0] == ln.get_xdata()[1]}
    assert horizontal == {1e-8, 1e-5} and vertical == {1e-3}
    assert all(ln.get_linestyle() == "--" and ln.get_zorder() > top for ln in lines.values())
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1  # outside


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("width", [1280, 800])
def test_invariance_page_fits_the_window(tmp_path, width):
    data = _invariance_data()
    page = P.render_html(data, P.svg_text(P.invariance_figure(data["rows"])))
    assert "<img" not in page and page.count("<svg") == 1 and "degenerate (T10)" in page
    res = _width_run(page, tmp_path, width)
    assert res["viewport"] == width and res["right"] <= width and res["scroll"] <= width, res


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("width", [1280, 800])
def test_width_page_fits_the_window(tmp_path, width):
    data = _width_data()
    svgs = R.write_figures(data, str(tmp_path))
    page = R.render_html(data, svgs)
    assert "<img" not in page and page.count("<svg") == 2
    assert page.count("<table") == 2 + -(-len(data["measures"]) // R.PANEL)  # τ, training, measure panels
    res = _width_run(page, tmp_path, width)
    assert res["viewport"] == width and res["right"] <= width and res["scroll"] <= width, res
