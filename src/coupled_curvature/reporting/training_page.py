"""The training experiment's pages (Markdown and self-contained HTML, through the report's own outline
renderers) and its two figures: λ against the CRR scale with the test error beside it, and λ per epoch.

``data`` is what ``ccurv experiment training`` writes to ``training.json``: ``config``, ``rows`` (one per
condition, arm and seed), ``table`` (:func:`~coupled_curvature.numeric.studies.training_summary.arm_table`),
``curves`` (:func:`~...lambda_curves`), ``verdicts`` and ``seconds``.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from coupled_curvature.reporting.outline import (Bullets, Figure, Mark, Outline, Paragraph, Section, Strong, Table,
                                                 Text)

__all__ = ["FIGURES", "cell", "epoch_figure", "mark_kind", "outline", "scale_figure", "table_rows", "write_figures"]

#: figure name -> caption
FIGURES = {
    "training_scale": "Boundary λ (left) and test error (right) against the CRR scale, per condition; the baseline "
                      "(scale 0) at the left edge, SAM and ASAM as horizontal bands; mean over seeds with the 95% "
                      "seed-bootstrap interval.",
    "training_epochs": "Boundary λ after every epoch (0: initialisation), mean over seeds, one line per arm.",
}
_COLUMNS = (("test_error", "test error"), ("lambda_boundary", "λ boundary"), ("ece", "ECE"),
            ("D_median", "D (median block)"), ("Dplus_median", "D⁺ (median block)"), ("top_eig", "λmax"))


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def cell(m: dict) -> str:
    """``mean [low, high]`` of a ``MeanInterval`` dict, or ``–``.

    >>> cell({"mean": 0.25, "low": 0.2, "high": 0.31, "n": 3})
    '0.25 [0.2, 0.31]'
    """
    if m.get("mean") is None:
        return "–"
    return f"{_num(m['mean'])} [{_num(m['low'])}, {_num(m['high'])}]"


def table_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the arm table: condition, arm, seeds, then each quantity's mean and interval."""
    head = ["condition", "arm", "seeds", *(h for _, h in _COLUMNS)]
    rows = [[t["condition"], t["arm"], str(t["seeds"]), *(cell(t[k]) for k, _ in _COLUMNS)] for t in data["table"]]
    return head, rows


#: outcomes that go against the claim (styled as failed whatever stands behind them)
_AGAINST = ("not reproduced", "contradicted")


def mark_kind(v: dict) -> str:
    """The style of a verdict (a ``Verdict`` as a dict): ``proved`` only for an exact method's result (its
    ``kind``), ``failed`` for an outcome against the claim, ``evidence`` for every other statistical or
    indicative one, whatever its word.

    >>> mark_kind({"verdict": "reproduced", "outcome": "reproduced", "kind": "statistical"})
    'evidence'
    >>> mark_kind({"verdict": "reproduced", "outcome": "reproduced", "kind": "exact"})
    'proved'
    """
    outcome = v.get("outcome") or v["verdict"]
    if outcome in _AGAINST:
        return "failed"
    return "proved" if v.get("kind") == "exact" else "evidence"


def _t(s: str) -> tuple:
    return (Text(s, maths=False),)


def outline(data: dict) -> Outline:
    """The page as the report's :class:`~coupled_curvature.reporting.outline.Outline`."""
    cfg = data["config"]
    head, rows = table_rows(data)
    verdicts = tuple((Strong(_t(v["claim"])), Text(f" ({v['condition']}): ", maths=False),
                      Mark(v["verdict"], mark_kind(v)), Text(f". {v['evidence']}", maths=False))
                     for v in data["verdicts"])
    conds = ", ".join(dict.fromkeys(r["condition"] for r in data["rows"]))
    notes = [
        f"{cfg['name']} run: {len(cfg['seeds'])} seeds per arm; conditions {conds}; Adam lr {cfg['lr']:g}, "
        f"batch {cfg['batch_size']}, {cfg['epochs']} epochs; CRR orders {tuple(cfg['crr_orders'])} at scales "
        f"{', '.join(f'{s:g}' for s in cfg['crr_scales'])} (headline {cfg['headline_scale']:g}); SAM ρ={cfg['sam_rho']:g}, "
        f"ASAM ρ={cfg['asam_rho']:g}; this invocation took {data['seconds']:.0f} s with {data.get('jobs', 1)} "
        f"worker(s), {sum(bool(r.get('cached')) for r in data['rows'])} of {len(data['rows'])} runs read from the "
        f"cache; the runs' own training and measuring time sums to "
        f"{sum(r.get('train_seconds', 0.0) + r.get('measure_seconds', 0.0) for r in data['rows']):.0f} s.",
        "Moons: make_moons(n_samples, noise 0.2), standardised, 70/30 split, the training labels flipped at the "
        "stated rate (test labels clean); MLP 2→64→64→2, tanh. Digits: 8×8 images, CNN conv(8)–pool–conv(16)–pool–"
        "linear, ReLU.",
        "λ boundary: the curvature rate λ (slope of log|dⁿ/dtⁿ ℓ(x + t u)| over n = 1…"
        f"{cfg['lambda_orders']}) on up to {cfg['lambda_points']} test points whose top probability lies in "
        f"[{cfg['band'][0]:g}, {cfg['band'][1]:g}]. ECE: 10 equal-width bins of the top probability. D, D⁺: per "
        f"block on {cfg['probe']} training points, the median over blocks; D⁺ by the exact routes only (see the JSON "
        "for the blocks left out and why). λmax: the raw Hessian's top eigenvalue.",
        "The digits CNN is piecewise linear (ReLU, max-pooling): its higher input derivatives come only from the "
        "loss (softmax cross-entropy), so λ there measures the loss's curvature along the input, not the "
        "network's; on the tanh MLP both contribute.",
        "Intervals: 95% percentile bootstrap over seeds (paired by seed for differences). A verdict is evidence "
        "from this run, not proof.",
    ]
    sections = (
        Section("Verdicts", (Bullets(verdicts),), "verdicts"),
        Section("Per arm", (Table(tuple(_t(h) for h in head), tuple(tuple(_t(c) for c in r) for r in rows),
                                  ("l", "l", "r", *("r",) * len(_COLUMNS)), small=True),), "table"),
        Section("Figures", tuple(Figure(name, _t(cap)) for name, cap in FIGURES.items()), "figures"),
        Section("Protocol", (Bullets(tuple(_t(n) for n in notes)),), "protocol"),
    )
    intro = (Paragraph(_t("Curvature Rate Regularization (CRR), SAM and ASAM against a baseline: does CRR lower "
                          "the curvature rate λ at the decision boundary without costing accuracy, does it match "
                          "SAM's accuracy and calibration, and does λ rise during training?")),)
    return Outline("Training experiment: the curvature rate under CRR, SAM and ASAM",
                   data.get("generated") or time.strftime("%Y-%m-%d"), intro, sections)


def _arms(data: dict, cond: str) -> list[dict]:
    return [t for t in data["table"] if t["condition"] == cond]


def scale_figure(data: dict):
    """Per condition (rows): λ (left) and test error (right) against the CRR scale."""
    from matplotlib.figure import Figure as MplFigure

    conds = list(dict.fromkeys(t["condition"] for t in data["table"]))
    fig = MplFigure(figsize=(9.0, 2.6 * len(conds) + 0.6))
    scales = [float(s) for s in data["config"]["crr_scales"]]
    x0 = min(scales) / 10.0  # where the baseline (scale 0) is drawn on the log axis
    for i, cond in enumerate(conds):
        arms = {t["arm"]: t for t in _arms(data, cond)}
        for j, (key, label) in enumerate((("lambda_boundary", "λ at the boundary"), ("test_error", "test error"))):
            ax = fig.add_subplot(len(conds), 2, 2 * i + j + 1)
            xs, ms, lo, hi = [], [], [], []
            for x, name in [(x0, "baseline"), *((s, f"CRR {s:g}") for s in scales)]:
                m = arms.get(name, {}).get(key, {})
                if m.get("mean") is not None:
                    xs.append(x)
                    ms.append(m["mean"])
                    lo.append(m["mean"] - m["low"])
                    hi.append(m["high"] - m["mean"])
            ax.errorbar(xs, ms, yerr=[lo, hi], marker="o", capsize=3, color="C0", label="baseline, CRR")
            for k, (name, colour) in enumerate((("SAM", "C1"), ("ASAM", "C2"))):
                t = next((v for a, v in arms.items() if a.startswith(name + " ")), None)
                m = (t or {}).get(key, {})
                if m.get("mean") is not None:
                    ax.axhline(m["mean"], color=colour, linestyle="--", linewidth=1, label=name)
                    ax.axhspan(m["low"], m["high"], color=colour, alpha=0.15)
            ax.set_xscale("log")
            ax.set_xticks([x0, *scales], ["0", *(f"{s:g}" for s in scales)])
            ax.set_xlabel("CRR scale", fontsize=8.5)
            ax.set_ylabel(label, fontsize=8.5)
            ax.set_title(cond, fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(True, alpha=0.3)
            if i == 0 and j == 1:
                ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.subplots_adjust(left=0.08, right=0.86, bottom=0.5 / fig.get_figheight() + 0.04, top=0.95, hspace=0.7,
                        wspace=0.3)
    return fig


def epoch_figure(data: dict):
    """Per condition: mean boundary λ against the epoch, one line per arm."""
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.ticker import MaxNLocator

    conds = list(dict.fromkeys(c["condition"] for c in data["curves"]))
    cols = min(2, len(conds))
    nrows = math.ceil(len(conds) / cols)
    fig = MplFigure(figsize=(4.6 * cols + 1.6, 3.0 * nrows + 0.4))
    arms = list(dict.fromkeys(c["arm"] for c in data["curves"]))
    for i, cond in enumerate(conds):
        ax = fig.add_subplot(nrows, cols, i + 1)
        for k, arm in enumerate(arms):
            c = next((c for c in data["curves"] if c["condition"] == cond and c["arm"] == arm), None)
            if c is None:
                continue
            pts = [(e, v) for e, v in enumerate(c["lambda"]) if v is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=f"C{k % 10}", linewidth=1.2, label=arm)
        ax.set_title(cond, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("λ at the boundary", fontsize=8.5)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
    fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.08, right=1.0 - 1.5 / fig.get_figwidth(), bottom=0.12, top=0.92, hspace=0.55,
                        wspace=0.3)
    return fig


def write_figures(data: dict, folder: str) -> dict[str, Any]:
    """``NAME.png`` and ``NAME.svg`` of both figures in ``folder``; returns name -> SVG text."""
    from coupled_curvature.reporting.invariance_page import svg_text

    svgs = {}
    for name, make in (("training_scale", scale_figure), ("training_epochs", epoch_figure)):
        fig = make(data)
        svg = svg_text(fig)
        fig.savefig(os.path.join(folder, f"{name}.png"), format="png", dpi=90, metadata={"Software": None})
        with open(os.path.join(folder, f"{name}.svg"), "w", encoding="utf-8") as fh:
            fh.write(svg)
        svgs[name] = svg
    return svgs
