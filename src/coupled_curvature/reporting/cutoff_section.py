"""The report's "Cutoff sensitivity" section: ``D⁺`` against ``pinv_rtol``, dense and Krylov paths.

``D⁺_b(τ) = (wᵀH⁺_τ w / wᵀw)·‖g‖²`` with ``τ = pinv_rtol·max|λ|`` keeps exactly the
eigenvalues ``|λ| > τ`` of the block, so it is piecewise constant in the cutoff and jumps
where an eigenvalue (with weight of ``w`` on its eigenvector) crosses it. The curve comes
from :func:`coupled_curvature.numeric.studies.cutoff.cutoff_sensitivity` on a 1-2-5 grid of
``pinv_rtol`` from 1e-14 to 1e-2, on the net of the "Arbitrary precision" section (wine, ReLU
13-6-5-3, report seed, 24 samples) trained for 300 epochs instead of 30: near zero training
loss the softmax saturates and the block spectra spread over ten and more decades, so the
curve has steps throughout the plotted range, around the default cutoff too. The two tensor
blocks whose dense curve changes most often on the grid are plotted; the Krylov path is run
on those two only. Deterministic under the seed; about two seconds of CPU.
"""

from __future__ import annotations

from coupled_curvature.numeric.studies.cutoff import GRID, CutoffData, jumps, max_converged_gap

__all__ = ["TABLE_RTOLS", "DEFAULT_RTOL", "FORMULA_TEXT", "FORMULA_TEX", "FORMULA_MATHML", "CAPTION", "cutoff_table", "cutoff_text",
           "fmt_rtol"]

#: the rows of the table (all on the grid), including the default
TABLE_RTOLS = (1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
DEFAULT_RTOL = 1e-10

FORMULA_TEXT = "D⁺_b(τ) = (wᵀH⁺_τ w / wᵀw)·‖g‖², τ = pinv_rtol·max|λ|"
FORMULA_TEX = (r"D^+_b(\tau) = \frac{w^\top H^+_\tau w}{w^\top w}\,\|g\|^2,\quad "
               r"\tau = \mathtt{pinv\_rtol}\cdot\max|\lambda|")
#: :data:`FORMULA_TEXT` as presentation MathML (the inner of ``<math>``)
FORMULA_MATHML = (
    "<mrow><msubsup><mi>D</mi><mi>b</mi><mo>+</mo></msubsup><mo>(</mo><mi>τ</mi><mo>)</mo><mo>=</mo>"
    "<mfrac><mrow><msup><mi>w</mi><mo>⊤</mo></msup><msubsup><mi>H</mi><mi>τ</mi><mo>+</mo></msubsup><mi>w</mi></mrow>"
    "<mrow><msup><mi>w</mi><mo>⊤</mo></msup><mi>w</mi></mrow></mfrac>"
    "<msup><mrow><mo>‖</mo><mi>g</mi><mo>‖</mo></mrow><mn>2</mn></msup><mo>,</mo><mspace width='1em'/>"
    "<mi>τ</mi><mo>=</mo><mtext>pinv_rtol</mtext><mo>·</mo><mi>max</mi><mo>⁡</mo>"
    "<mrow><mo fence='true' form='prefix' stretchy='false'>|</mo><mi>λ</mi>"
    "<mo fence='true' form='postfix' stretchy='false'>|</mo></mrow></mrow>"
)
CAPTION = ("D⁺ against the pseudo-inverse cutoff pinv_rtol (log-log), dense path (wide, pale) and Krylov path "
           "(dashed) on the same axes, held constant between grid points; the dotted line marks the default "
           "pinv_rtol = 1e-10.")


def fmt_rtol(r: float) -> str:
    """A grid ``pinv_rtol`` as a short literal.

    >>> fmt_rtol(1e-10), fmt_rtol(5e-3)
    ('1e-10', '5e-3')
    """
    return f"{r:.0e}".replace("e-0", "e-")


def _fmt(v: float | None) -> str:
    return "undefined" if v is None else f"{v:.3e}"


def cutoff_table(c: CutoffData) -> list[list[str]]:
    """Header + one row per plotted block and ``rtol`` of :data:`TABLE_RTOLS` (plain text)."""
    rows = [["block", "pinv_rtol", "D⁺ dense", "D⁺ Krylov", "Krylov converged", "rank kept"]]
    at = {r: i for i, r in enumerate(c.dense["rtols"])}
    for b in c.blocks:
        d, k = c.dense["blocks"][b], c.krylov["blocks"][b]
        for r in TABLE_RTOLS:
            i = at[r]
            rows.append([b, fmt_rtol(r) + (" (default)" if r == DEFAULT_RTOL else ""), _fmt(d["inverse_coupled"][i]),
                         _fmt(k["inverse_coupled"][i]), "yes" if k["converged"][i] else "no",
                         f"{d['rank'][i]} / {d['size']}"])
    return rows


def cutoff_text(c: CutoffData) -> list[str]:
    """The section's paragraphs (plain text); the first holds :data:`FORMULA_TEXT` once."""
    lo, hi = fmt_rtol(GRID[0]), fmt_rtol(GRID[-1])
    first = (
        f"The curve is {FORMULA_TEXT}, where λ runs over the eigenvalues of the diagonal block H of block b: the "
        "pseudo-inverse keeps exactly the eigenvalues with |λ| > τ. As a function of pinv_rtol it is piecewise "
        "constant and discontinuous: each jump is an eigenvalue, with weight of w on its eigenvector, crossing the "
        "cutoff, and the rank kept drops there. The value at one cutoff is therefore a choice, not a limit; the "
        "default pinv_rtol = 1e-10 is marked on the plot."
    )
    parts = []
    for b in c.blocks:
        d = c.dense["blocks"][b]
        v, rk = d["inverse_coupled"], d["rank"]
        parts.append(f"{b} ({d['size']} parameters): {len(jumps(v))} visible jumps, D⁺ from {_fmt(v[0])} "
                     f"(rank {rk[0]}) to {_fmt(v[-1])} (rank {rk[-1]})")
    ok = sum(bool(x) for b in c.blocks for x in c.krylov["blocks"][b]["converged"])
    total = sum(len(c.krylov["blocks"][b]["converged"]) for b in c.blocks)
    at_default = sum(bool(c.krylov["blocks"][b]["converged"][GRID.index(DEFAULT_RTOL)]) for b in c.blocks)
    gap = max_converged_gap(c)
    agree = ("" if gap is None else
             f" Where it converged, its largest relative difference to the dense path is {gap:.1e}.")
    second = (
        f"On {c.net}, pinv_rtol from {lo} to {hi} ({len(GRID)} values, 1-2-5 per decade). Plotted are the "
        f"{len(c.blocks)} tensor block{'s' if len(c.blocks) > 1 else ''} whose dense curve jumps most often on this grid, out of "
        f"{len(c.scores)}: " + "; ".join(parts) + ". Dense path: one eigendecomposition of the assembled block, "
        "re-thresholded at every cutoff. Krylov path: one Lanczos run per block at the smallest cutoff, its "
        "Ritz values re-thresholded at every cutoff with a convergence verdict each (x on the plot: not "
        f"converged); {ok} of {total} Krylov points converged, {at_default} of {len(c.blocks)} at the default "
        f"pinv_rtol = {fmt_rtol(DEFAULT_RTOL)}." + agree
    )
    return [first, second]
