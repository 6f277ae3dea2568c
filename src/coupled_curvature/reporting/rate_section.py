"""The report's sections on the training side of sharpness: λ's analytic identities (exact coefficients,
fitted rates as evidence, the negative control, the band-limited signal) and the radius sweep of a net and
its rescaled twin. Renders the data it is given (:func:`coupled_curvature.commands.check_rate.gather`,
:func:`coupled_curvature.numeric.studies.sharpness_twin.twin_curve_data`)."""

from __future__ import annotations

from typing import Any

from coupled_curvature.reporting.outline import Block, Figure, Inline, Mark, Paragraph, Section, Table, Text
from coupled_curvature.reporting.sharpness_twin_page import CAPTION, twin_table, twin_text

__all__ = ["rate_sections", "sharpness_sections"]


def _t(s: str) -> tuple[Inline, ...]:
    return (Text(s, True),)


def _plain(s: str) -> tuple[Inline, ...]:
    return (Text(s, False),)


def _table(rows: list[list[Any]], widths: tuple[str, ...]) -> Table:
    """Head cells are mixed text (symbols as mathematics); body cells are plain strings (numbers stay numbers)
    or ready inline tuples (verdicts)."""
    cell = (lambda c: c if isinstance(c, tuple) else _plain(str(c)))
    return Table(tuple(_t(h) for h in rows[0]), tuple(tuple(cell(c) for c in r) for r in rows[1:]), widths,
                 None, True)


def _verdict(ok: bool, good: str) -> tuple[Inline, ...]:
    return (Mark(good if ok else "failed", good if ok else "failed"),)


def rate_sections(rate: Any) -> list[Section]:
    """One section: the statement, the series table (exact coefficients, fitted slope as evidence), the
    negative control, the band-limited table; trust labels in the cells."""
    if rate is None:
        return []
    blocks: list[Block] = [Paragraph(_t(
        "For f analytic at 0 with radius of convergence R, the factorial-normalised derivatives c_n = f^(n)(0)/n! "
        "grow at the rate −log R (Cauchy-Hadamard: limsup |c_n|^(1/n) = 1/R); for a signal band-limited to Ω, "
        "‖Dⁿf‖ grows at the rate log Ω. These give the curvature rate λ (the slope of log|d_n| against n) its "
        "meaning. Not a theorem of the catalogue: the coefficients are exact, every slope is a float fit and "
        "counts as evidence only."))]
    if rate.cases is not None:
        rows: list[list[Any]] = [["f", "R", "coefficients (exact)", "orders", "−log R", "fitted slope", "error",
                                  "predicted", "without log n", "fit"]]
        for c in rate.cases:
            rows.append([f"(1 − x/R)^−{c.pole_order}", str(c.R), _verdict(c.derivation.ok, "proved"),
                         f"{c.corrected.orders[0]}..{c.corrected.orders[-1]}", f"{c.target:+.6f}",
                         f"{c.corrected.slope:+.6f}", f"{c.error:.1e}", f"{abs(c.predicted):.1e}",
                         f"{c.plain_error:.1e}", _verdict(rate.case_ok(c), "evidence")])
        blocks += [Paragraph(_t(
            "Exact: SymPy's series S_N of (1 − x/R)^−k satisfies (1 − x/R)^k·S_N = 1 + O(x^(N+1)) and "
            "c_n·R^n / C(n+k−1, k−1) = 1 for every n ≤ N, both in rational arithmetic; hence log|c_n| = −n·log R + "
            "log C(n+k−1, k−1) exactly. Evidence: the least-squares slope of log|c_n| on n (and on log n for a pole of "
            "order k > 1, the log-n correction), whose distance to −log R equals the bias that the exact "
            "coefficients predict (a simple pole: round-off; a third-order pole: O(1/n)); without the log-n term "
            "the bias is about (k−1)/n.")), _table(rows, ("l", "r", "l", "r", "r", "r", "r", "r", "r", "l"))]
        d, fit = rate.flat
        blocks.append(Paragraph(_t(
            f"Negative control, exp(−1/x²) extended by 0: {len(d.steps)} exact steps "
            f"({'all pass' if d.ok else 'SOME FAIL'}) give the n-th derivative P_n(1/x)·exp(−1/x²) with "
            "P_{n+1}(t) = 2t³P_n(t) − t²P_n'(t); every Taylor coefficient at 0 is 0 (SymPy's series; that limit is "
            f"not a proof step) although f ≠ 0, so the fit answers: {fit.reason or 'a finite rate (WRONG)'}.")))
    if rate.band is not None:
        rows = [["Ω", "orders", "log Ω", "fitted rate", "error", "stated bound", "within"]]
        for b in rate.band:
            rows.append([str(b.omega), f"{b.orders[0]}..{b.orders[-1]}", f"{b.target:.6f}", f"{b.rate:.6f}",
                         f"{b.error:.1e}", f"{b.bound:.1e}", _verdict(b.within_bound, "evidence")])
        blocks += [Paragraph(_t(
            "Band-limited: f(t) = Σ_{k≤Ω} cos(kt + φ_k) with random phases, derivatives by FFT, rate = least-squares "
            "slope of log‖Dⁿf‖ over consecutive orders. Bernstein's inequality (each frequency ≤ Ω) and the "
            "log-convexity of ‖Dⁿf‖ put log Ω − rate in [0, log Ω − s_{n1}], s_{n1} the first local slope: that is the "
            "stated bound. Numeric evidence.")), _table(rows, ("r", "r", "r", "r", "r", "r", "l"))]
    return [Section("Curvature rate λ: analytic identities", tuple(blocks), "lambda-identities")]


def sharpness_sections(twin: Any) -> list[Section]:
    """One section: the radius sweep of a net and its rescaled twin, raw and adaptive, figure and table."""
    if twin is None:
        return []
    blocks: list[Block] = [Paragraph(_t(twin_text(twin))), Figure("sharpness_twin", _t(CAPTION)),
                           _table(twin_table(twin), ("r",) * 7)]
    return [Section("Sharpness over the radius: a net and its rescaled twin", tuple(blocks), "sharpness-twin")]
