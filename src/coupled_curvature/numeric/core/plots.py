"""Plots of a diagnosis and of a spectral profile (matplotlib ``Figure``, no pyplot state).

They are the results' own ``plot()`` methods (``Diagnosis.plot()``, ``SpectralProfile.plot()``), so
they live beside the results; the report's figures are in :mod:`coupled_curvature.reporting.figures`.
Every axis names its quantity and unit (the loss in nats, parameters pure numbers);
:func:`finish_figure` gives every figure the same end (grid, legend outside the axes, layout).
"""

from __future__ import annotations

import textwrap
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["diagnosis_figure", "profile_figure", "finish_figure"]

def diagnosis_figure(diagnosis: Any) -> Figure:
    """Per-block bars of ``|D| = |wᵀHw/wᵀw|/‖g‖²`` and ``|D⁺| = |wᵀH⁺w/wᵀw|·‖g‖²`` (log axis).

    ``diagnosis`` is a :class:`~coupled_curvature.numeric.core.results.Diagnosis`. A negative
    value (an indefinite block) is drawn at its absolute value, hatched; a missing or zero one
    has no bar and an ``n/a`` mark at the foot; an unconverged Krylov ``D⁺`` (``None``) is drawn from its
    ``krylov_estimate`` with a dashed edge.
    D is in nat⁻¹ and D⁺ in nat (the loss in nats, parameters pure numbers).

    >>> from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis
    >>> a = BlockDiagnosis("a", ("a",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
    >>> b = BlockDiagnosis("b", ("b",), 2, 4.0, 1.0, 0.5, -8.0, -2.0, -2.0, None, None, None, None)
    >>> fig = diagnosis_figure(Diagnosis([a, b], {}))
    >>> len(fig.axes[0].patches), fig.axes[0].get_yscale()
    (3, 'log')
    """
    blocks = list(diagnosis)
    if not blocks:
        raise InvalidInputError("diagnosis_figure needs a diagnosis with at least one block")
    fig = Figure(figsize=(max(6.4, 0.9 * len(blocks) + 2.4), 4.4))
    ax = fig.add_subplot(1, 1, 1)
    width, drawn, missing = 0.38, [], []
    for k, (field, label, colour) in enumerate([("coupled", "|D| [1/nat]", "C0"),
                                                ("inverse_coupled", "|D⁺| [nat]", "C1")]):
        for i, b in enumerate(blocks):
            loose = field == "inverse_coupled" and b.krylov_estimate is not None
            v = b.krylov_estimate if loose else getattr(b, field)
            x = i + (k - 0.5) * width
            if v is None or float(v) == 0.0:
                missing.append(x)
                continue
            ax.bar(x, abs(float(v)), width, color=colour, hatch="//" if float(v) < 0 else None,
                   edgecolor="black" if float(v) < 0 or loose else colour, linestyle="--" if loose else "-", zorder=2)
        drawn.append(Patch(facecolor=colour, label=label))
    for x in missing:
        ax.annotate("n/a", (x, 0.0), xycoords=("data", "axes fraction"), xytext=(0, 3), textcoords="offset points",
                    ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(blocks)), [b.name for b in blocks], rotation=30 if len(blocks) > 4 else 0,
                  ha="right" if len(blocks) > 4 else "center", fontsize=8)
    ax.set_xlabel("parameter block")
    ax.set_ylabel("|D| [1/nat], |D⁺| [nat]")
    title = "D and D⁺ per block (hatched: negative, shown at |value|; dashed edge: unconverged Krylov estimate; n/a: missing)"
    ax.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=9)
    ax.grid(True, axis="y", which="major", alpha=0.3, zorder=0)
    ax.legend(handles=drawn, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def profile_figure(profile: dict[str, Any], title: str = "") -> Figure:
    """The cumulative spectral profile per block: ``μ_w(|x| ≤ t)`` against ``t = |λ|/max|λ|``, as steps.

    ``profile`` is ``SpectralProfile.to_dict()`` (per block ``rel_eigs``, ``weights``, ``route``,
    ``exact``, ``lambda_ratio``). The axis is logarithmic when the non-zero ``|x|`` span more than two
    decades; the weight at ``x = 0`` (the null space of ``H_bb``) is the curve's level at the left edge,
    and the default cutoff ``pinv_rtol = 1e-10`` is dashed.
    Negative eigenvalues are counted by ``|x|``, and their total weight is given in the legend;
    approximate (Krylov) profiles are dashed.

    >>> p = {"blocks": {"a": {"rel_eigs": [0.0, 1e-6, 1.0], "weights": [0.2, 0.3, 0.5], "route": "dense",
    ...      "exact": True, "lambda_ratio": 2.0}}}
    >>> ax = profile_figure(p).axes[0]; ax.get_xscale(), len(ax.lines)
    ('log', 1)
    """
    blocks = profile.get("blocks", {}) if isinstance(profile, dict) else {}
    if not blocks:
        raise InvalidInputError("profile_figure needs SpectralProfile.to_dict() data with at least one block")
    nonzero = [abs(x) for b in blocks.values() for x in b["rel_eigs"] if x != 0.0]
    smallest = min(nonzero, default=1.0)
    log = smallest < 1e-2
    left = max(smallest / 10.0, 1e-17) if log else 0.0
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    for i, (name, b) in enumerate(blocks.items()):
        pairs = sorted(zip((abs(x) for x in b["rel_eigs"]), b["weights"]))
        xs, ys, total = [left], [0.0], 0.0
        for x, p in pairs:
            total += p
            if x <= left:
                ys[0] = total
            else:
                xs.append(x)
                ys.append(total)
        xs.append(1.0 if not log else 1.5)
        ys.append(total)
        neg = sum(p for x, p in zip(b["rel_eigs"], b["weights"]) if x < 0)
        ratio = b.get("lambda_ratio")
        label = textwrap.fill(f"{name}: {b['route']}{'' if b.get('exact', True) else ' (approximate)'}, "
                              f"ρ/‖g‖² = {'-' if ratio is None else f'{ratio:.3g}'}"
                              f"{f', weight at λ < 0: {neg:.2g}' if neg > 0 else ''}", 48)
        ax.step(xs, ys, where="post", color=f"C{i % 10}", ls="-" if b.get("exact", True) else "--", lw=1.6,
                label=label)
    if log:
        ax.set_xscale("log")
        if left < 1e-10:
            ax.axvline(1e-10, color="black", linestyle="--", linewidth=1.4, zorder=5,
                       label="default pinv_rtol = 1e-10 (D⁺ keeps the weight to its right)")
    ax.set_xlim(left, 1.5 if log else 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("t = |λ| / max|λ| (dimensionless" + (", log axis)" if log else ")"))
    ax.set_ylabel("cumulative weight μ_w(|x| ≤ t) of w/‖w‖ (dimensionless)")
    ax.set_title(textwrap.fill((title + ": " if title else "") + "spectral profile of each block along w "
                               "(weight (uᵢᵀw)²/‖w‖² at λᵢ/max|λ|)", 70), fontsize=9)
    return finish_figure(fig, ax, size=(10.0, 4.6))


def finish_figure(fig: Figure, ax: Any, *, size: tuple[float, float] | None = None, fontsize: float = 7) -> Figure:
    """The common end of a figure: a major grid, the legend outside the axes on the right (so it
    never hides data), the size in inches if given, a tight layout; returns ``fig``.

    >>> fig = Figure(); ax = fig.add_subplot(1, 1, 1); _ = ax.plot([0, 1], label="a")
    >>> finish_figure(fig, ax, size=(4.0, 3.0)).get_size_inches().tolist()
    [4.0, 3.0]
    """
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if size is not None:
        fig.set_size_inches(*size)
    fig.tight_layout()
    return fig
