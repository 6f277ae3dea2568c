"""Report figures (matplotlib Agg, no pyplot state), byte-stable across runs.

* ``rescaling``: D, D⁺, the Rayleigh quotient and ‖g‖² of one block against ``c`` under
  layer rescaling (log axes): the raw quantities fall as ``c⁻²``, the diagnostics stay flat.
* ``neuron_scaling``: the distribution of the relative change of D under random non-uniform
  neuron-wise scalings, per affected block (T5).
* ``precision``: the invariance error of D and D⁺ against the working precision ``dps`` (log
  axis), with the ``10^-dps`` reference and the neuron-scaling negative control.
* ``cutoff``: ``D⁺`` against ``pinv_rtol`` on the dense and Krylov paths (log-log, steps), the
  default ``pinv_rtol = 1e-10`` marked.
* :func:`diagnosis_figure` and :func:`profile_figure` (``Diagnosis.plot()``, ``SpectralProfile.plot()``)
  are drawn by :mod:`coupled_curvature.numeric.core.plots` and re-exported here.

Every axis names its quantity and unit (the loss in nats, parameters pure numbers); titles are
wrapped to the figure's width; reference and tolerance lines are dashed and drawn on top; legends
sit outside the data, to the right of the axes.

Each figure is written as ``NAME.svg`` (HTML, Markdown) and ``NAME.png`` (LaTeX).
"""

from __future__ import annotations

import os
import textwrap
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.plots import diagnosis_figure, finish_figure, profile_figure

__all__ = ["save_figure", "rescaling_figure", "neuron_figure", "precision_figure", "cutoff_section_figure", "cutoff_figure",
           "diagnosis_figure", "profile_figure"]

_SVG_META = {"Date": None, "Creator": None}
_PNG_META = {"Software": None}


def save_figure(fig: Figure, folder: str, name: str) -> list[str]:
    """Write ``name.svg`` and ``name.png`` deterministically; returns the file names."""
    FigureCanvasAgg(fig)
    with matplotlib.rc_context({"svg.hashsalt": "coupled-curvature", "svg.fonttype": "path"}):
        fig.savefig(os.path.join(folder, f"{name}.svg"), format="svg", metadata=_SVG_META)
        fig.savefig(os.path.join(folder, f"{name}.png"), format="png", dpi=110, metadata=_PNG_META)
    return [f"{name}.svg", f"{name}.png"]


def rescaling_figure(sweep: dict[str, Any]) -> Figure:
    """Log-log plot of D, D⁺, RQ and ‖g‖² against c (data from ``figure_data.rescaling_sweep``).

    Units: parameters are pure numbers and the loss is in nats, so ‖g‖² is in nat², RQ and D⁺ in
    nat, D in nat⁻¹. The ``c⁻²`` reference is dashed and drawn on top.
    """
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    c = sweep["c"]
    styles = [("D", "D [1/nat]", "o-"), ("Dplus", "D⁺ [nat]", "s-"), ("RQ", "Rayleigh quotient wᵀHw/wᵀw [nat]", "^-"),
              ("g_sq", "‖g‖² [nat²]", "v-")]
    for key, label, style in styles:
        ax.plot(c, sweep[key], style, label=label, zorder=2)
    ref = [sweep["RQ"][len(c) // 2] * (x / c[len(c) // 2]) ** -2 for x in c]
    ax.plot(c, ref, "--", color="black", linewidth=1.4, zorder=5, label="c⁻² reference (slope −2)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("layer rescaling factor c (dimensionless, log₂ axis)")
    ax.set_ylabel("value of each quantity (log axis)")
    ax.set_title(textwrap.fill(f"{sweep['net']}, block {sweep['block']}: W_l → cW_l, b_l → cb_l, "
                               "W_(l+1) → W_(l+1)/c", 70), fontsize=9)
    return finish_figure(fig, ax, size=(8.4, 4.4), fontsize=7.5)


def neuron_figure(changes: dict[str, list[float]], net: str) -> Figure:
    """Histogram of rel ΔD per block under non-uniform neuron scaling of layer 0."""
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    moved = {k: v for k, v in changes.items() if max(v) > 1e-3}
    still = [k for k, v in changes.items() if max(v) <= 1e-3]
    bins = [i / 20 for i in range(21)]
    ax.hist(list(moved.values()), bins=bins, label=list(moved), stacked=False)
    ax.axvline(1e-3, color="black", linestyle="--", linewidth=1.4, zorder=5, label="tolerance 1e-3 (invariant below)")
    ax.set_xlabel("relative change of D, |D′ − D| / |D| (dimensionless)")
    ax.set_ylabel("number of random scalings a = 2^U(−2, 2)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(textwrap.fill(f"{net}: non-uniform neuron scaling of layer 0; blocks with |ΔD|/|D| ≤ 1e-3 "
                               f"(not drawn): {', '.join(still) or 'none'}", 80), fontsize=8)
    ax.legend(fontsize=7.5, title="block", title_fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0)
    fig.set_size_inches(8.0, 4.0)
    fig.tight_layout()
    return fig


def precision_figure(p: Any) -> Figure:
    """Max relative change of D and D⁺ against ``dps`` (log y): layer rescaling by a non-dyadic ``c``
    near ``10^-dps``; the non-uniform neuron scaling far above (data from ``numeric.studies.precision.precision_sweep``)."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    dps = [r.dps for r in p.rows]
    col = list(zip(*(r.values for r in p.rows)))

    def pos(xs, ys):  # an exact 0 has no place on a log axis: leave it out (the table shows it)
        pts = [(x, y) for x, y in zip(xs, ys) if y > 0]
        return [x for x, _ in pts], [y for _, y in pts]

    ax.plot(*pos(dps, col[0]), "o-", color="tab:blue", label=f"layer rescaling c = {p.c}: max rel ΔD")
    ax.plot(*pos(dps, col[1]), "s-", color="tab:orange", label=f"layer rescaling c = {p.c}: max rel ΔD⁺")
    grid = list(range(dps[0], dps[-1] + 1))
    ax.plot(grid, [10.0 ** -d for d in grid], "--", color="black", linewidth=1.6, zorder=5,
            label=r"reference $10^{-\mathrm{dps}}$")
    ax.plot(grid, [10.0 ** -(d - 4) for d in grid], ":", color="gray", linewidth=1.4, zorder=5,
            label=r"tolerance $10^{-(\mathrm{dps}-4)}$ (agrees below)")
    ax.axhline(1e-3, color="tab:red", linestyle="--", linewidth=1.0, zorder=5, label="control threshold 1e-3 (moves above)")
    ax.plot(*pos(dps, col[2]), "^", color="tab:red", markersize=8, label="control, neuron scaling: max rel ΔD")
    ax.plot(*pos(dps, col[3]), "v", color="tab:purple", markersize=8, label="control, neuron scaling: max rel ΔD⁺")
    ax.set_yscale("log")
    lo = 20 * (-(-(dps[-1] + 5) // 20))  # decades shown: down to the next multiple of 20 below 10^-dps
    ax.set_ylim(10.0 ** -(lo + 5), 1e5)
    ax.set_yticks([10.0 ** -k for k in range(0, lo + 1, 20)])
    ax.set_xticks(dps)
    ax.set_xlabel("working precision dps (decimal digits)")
    ax.set_ylabel("max relative change over blocks (dimensionless)")
    ax.set_title(textwrap.fill(p.net, 80) + "\ninvariance error against precision (T3), neuron-scaling control (T5)",
                 fontsize=9)
    return finish_figure(fig, ax, size=(9.0, 4.4))


def cutoff_section_figure(c: Any) -> Figure:
    """``|D⁺|`` against ``pinv_rtol`` (log-log), dense and Krylov on the same axes, drawn as steps
    (constant from one grid point to the next), with the default ``pinv_rtol`` marked
    (data from ``numeric.studies.cutoff.cutoff_data``; the curves from :func:`cutoff_figure`)."""
    from coupled_curvature.reporting.cutoff_section import DEFAULT_RTOL

    fig = cutoff_figure(c.dense, c.krylov)
    ax = fig.axes[0]
    for line in ax.get_lines():
        if line.get_linestyle() in ("-", "--"):
            line.set_drawstyle("steps-post")
    ax.axvline(DEFAULT_RTOL, color="black", linestyle="--", linewidth=1.4, zorder=5,
               label=f"default pinv_rtol = {DEFAULT_RTOL:.0e}")
    ax.set_title(textwrap.fill(c.net, 75) + "\nD⁺ against the pseudo-inverse cutoff (x: Krylov not converged, o: D⁺ < 0)",
                 fontsize=8)
    ax.set_xlabel("pinv_rtol (dimensionless; cutoff τ = pinv_rtol·max|λ|)")
    ax.set_ylabel("|D⁺| [nat]")
    return finish_figure(fig, ax, size=(9.0, 4.6))


def cutoff_figure(*results: dict) -> Figure:
    """Log-log ``|D⁺|`` against ``pinv_rtol``, one colour per block; dense solid (wide, pale), Krylov dashed.

    Negative ``D⁺`` (indefinite blocks) is drawn at ``|D⁺|`` with open markers; Krylov
    points that did not converge are marked ``x``.

    >>> r = {"method": "dense", "rtols": [1e-12, 1e-6], "blocks": {"a": {"size": 2,
    ...      "inverse_coupled": [3.0, 1.0], "rank": [2, 1], "converged": None, "error": None}}}
    >>> len(cutoff_figure(r).axes[0].lines)
    1
    """
    if not results:
        raise InvalidInputError("cutoff_figure needs at least one cutoff_sensitivity result")
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    names: list[str] = []
    for res in results:
        names += [b for b in res["blocks"] if b not in names]
    colours = {b: f"C{i % 10}" for i, b in enumerate(names)}
    for res in results:
        krylov = res["method"] == "krylov"
        for block, row in res["blocks"].items():
            pts = [(r, v) for r, v in zip(res["rtols"], row["inverse_coupled"]) if v not in (None, 0.0)]
            if not pts:
                continue
            x, y = zip(*pts)
            style: dict[str, Any] = {"ls": "--", "lw": 1.2} if krylov else {"ls": "-", "lw": 2.6, "alpha": 0.45}
            ax.plot(x, [abs(v) for v in y], color=colours[block], label=f"{block} ({'Krylov' if krylov else 'dense'})",
                    **style)
            neg = [(a, abs(b)) for a, b in pts if b < 0]
            if neg:
                ax.plot(*zip(*neg), "o", mfc="none", color=colours[block])
            if krylov and row["converged"] is not None:
                bad = [(r, abs(v)) for r, v, c in zip(res["rtols"], row["inverse_coupled"], row["converged"])
                       if not c and v not in (None, 0.0)]
                if bad:
                    ax.plot(*zip(*bad), "x", color=colours[block])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pinv_rtol (cutoff τ = rtol·max|λ|)")
    ax.set_ylabel("|D⁺|")
    ax.set_title("D⁺ against the pseudo-inverse cutoff (x: Krylov not converged, o: D⁺ < 0)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    if names:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
