"""``ccurv check``'s section on the curvature rate λ's analytic identities (not a theorem T1–T14).

Symbolic (SymPy): exact series of ``(1 − x/R)^{−k}``, the coefficient identity checked in rational
arithmetic (label exact), the fitted rate against ``−log R`` (label num: evidence) and the negative
control ``exp(−1/x²)`` (no finite rate). Numeric (torch FFT): the rate of ``‖Dⁿf‖`` of a random-phase
band-limited signal against ``log Ω`` within the stated bound (label num). Gathering only; the
computations are :mod:`coupled_curvature.symbolic.rate_identities` and
:mod:`coupled_curvature.numeric.studies.band_limited`.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

__all__ = ["BAND_CASES", "RateIdentities", "gather", "render"]

#: (Ω, orders) of the band-limited checks
BAND_CASES: tuple[tuple[int, tuple[int, ...]], ...] = ((12, tuple(range(10, 31))), (50, tuple(range(10, 31))),
                                                      (50, tuple(range(40, 61))))
#: how far a fitted slope may sit from the bias that the exact coefficients predict (float round-off)
FIT_TOL = 1e-9


@dataclass
class RateIdentities:
    """The symbolic cases (or ``None``), the negative control, and the band-limited results (or ``None``)."""

    cases: list[Any] | None
    flat: tuple[Any, Any] | None  # (Derivation, RateFit)
    band: list[Any] | None

    def case_ok(self, c: Any) -> bool:
        return c.derivation.ok and abs((c.corrected.slope - c.target) - c.predicted) < FIT_TOL

    @property
    def ok(self) -> bool:
        sym = self.cases is None or (all(self.case_ok(c) for c in self.cases) and self.flat is not None
                                     and self.flat[0].ok and self.flat[1].slope is None)
        num = self.band is None or all(b.within_bound for b in self.band)
        return sym and num

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok}
        if self.cases is not None:
            out["series"] = [{"R": str(c.R), "pole_order": c.pole_order, "orders": [c.corrected.orders[0],
                              c.corrected.orders[-1]], "exact_steps": len(c.derivation.steps),
                              "exact_ok": c.derivation.ok, "target": c.target, "slope": c.corrected.slope,
                              "error": c.error, "predicted_error": abs(c.predicted), "plain_error": c.plain_error,
                              "label": "exact coefficients; the slope is numeric evidence"} for c in self.cases]
        if self.flat is not None:
            d, fit = self.flat
            out["non_analytic"] = {"function": "exp(-1/x^2)", "exact_steps": len(d.steps), "exact_ok": d.ok,
                                   "rate": fit.slope, "reason": fit.reason}
        if self.band is not None:
            out["band_limited"] = [{"omega": b.omega, "orders": [b.orders[0], b.orders[-1]], "rate": b.rate,
                                    "target": b.target, "error": b.error, "bound": b.bound,
                                    "within_bound": b.within_bound, "label": "numeric evidence"} for b in self.band]
        return out


def gather(symbolic: bool = True, numeric: bool = True, seed: int = 0,
           progress: Callable[[str], None] | None = None) -> RateIdentities:
    """Run the selected halves (about a second each); ``progress`` hears each stage."""
    say = progress or (lambda _: None)
    cases = flat = band = None
    if symbolic:
        say("λ identities: symbolic cases")
        from coupled_curvature.symbolic.rate_identities import flat_function_derivation, rate_identities

        cases, flat = rate_identities(), flat_function_derivation()
    if numeric:
        from coupled_curvature.numeric.studies.band_limited import band_limited_rate

        band = []
        for om, o in BAND_CASES:
            say(f"λ identities: band-limited rate, ω = {om}")
            band.append(band_limited_rate(om, orders=o, seed=seed))
    return RateIdentities(cases, flat, band)


def render(r: RateIdentities, width: int | None = None) -> list[str]:
    """The terminal lines of the section."""
    from coupled_curvature.reporting.terminal import table, wrap

    lines = wrap("Curvature rate λ, analytic identities (not a theorem T1–T14): for f analytic at 0 with radius "
                 "R, the rate of c_n = f⁽ⁿ⁾(0)/n! is −log R; for a band-limited signal the rate of ‖Dⁿf‖ is log Ω", width)
    if r.cases is not None:
        rows = [[f"1/(1−x/R)^{c.pole_order}", str(c.R), f"{len(c.derivation.steps)} exact " +
                 ("ok" if c.derivation.ok else "FAILED"), f"{c.corrected.orders[0]}..{c.corrected.orders[-1]}",
                 f"{c.target:+.6f}", f"{c.corrected.slope:+.6f}", f"{c.error:.1e}", f"{abs(c.predicted):.1e}",
                 f"{c.plain_error:.1e}", "yes" if r.case_ok(c) else "NO"] for c in r.cases]
        lines.append(table(["f", "R", "coefficients", "n", "−log R", "slope (num)", "error", "predicted",
                            "no log n", "ok"], rows, align="llll" + "r" * 6, width=width))
        lines += wrap("coefficients: (1 − x/R)^k·S_N = 1 + O(x^(N+1)) and c_n·R^n/C(n+k−1, k−1) = 1, rational "
                      "arithmetic (exact); slope: least squares of log|c_n| on n (and log n for k > 1), numeric "
                      "evidence; predicted: the fit's error forced by the exact coefficients (O(1/n) for k > 1); "
                      "no log n: the error without the log n term", width)
        d, fit = r.flat  # type: ignore[misc]
        lines += wrap(f"negative control exp(−1/x²): {len(d.steps)} exact derivative steps "
                      f"{'ok' if d.ok else 'FAILED'}; {fit.reason if fit.slope is None else 'a finite rate: WRONG'}",
                      width)
    if r.band is not None:
        rows = [[str(b.omega), f"{b.orders[0]}..{b.orders[-1]}", f"{b.target:.6f}", f"{b.rate:.6f}",
                 f"{b.error:.1e}", f"{b.bound:.1e}", "yes" if b.within_bound else "NO"] for b in r.band]
        lines.append(table(["Ω", "n", "log Ω", "rate (num)", "error", "bound", "ok"], rows, width=width))
        lines += wrap("band-limited: random-phase Σ cos(kt + φ_k), k ≤ Ω, derivatives by FFT; bound log Ω − s_n₁ "
                      "(Bernstein and log-convexity put log Ω − rate in [0, bound]); numeric evidence", width)
    lines.append("λ identities: " + ("PASS" if r.ok else "FAIL"))
    return lines
