"""What a report shows, independent of format: check results, witness values, figure list.

Everything here is deterministic under the seed; timings are left out on purpose (a report
differs between runs only in its one ``Generated:`` line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

__all__ = ["ReportData", "FigureRef", "as_math", "fmt_num", "summary_rows", "formal_listing", "NUMERIC_HEAD"]

NUMERIC_HEAD = ("net", "quantity", "measured", "expected", "agrees")


@dataclass(frozen=True)
class FigureRef:
    name: str
    caption: str


@dataclass
class ReportData:
    """Inputs of every renderer."""

    seed: int
    generated: str
    check: Any  # proofs.CheckReport
    figures: list[FigureRef] = field(default_factory=list)
    precision: Any = None  # numeric.studies.precision.PrecisionData: the "Arbitrary precision" section
    cutoff: Any = None  # numeric.studies.cutoff.CutoffData: the "Cutoff sensitivity" section
    rate: Any = None  # commands.check_rate.RateIdentities: the "Curvature rate λ: analytic identities" section
    sharpness: Any = None  # numeric.studies.sharpness_twin.TwinCurves: the radius-sweep section and figure


def fmt_num(x: float) -> str:
    """Stable short form of a float (4 significant digits)."""
    return f"{x:.3e}" if x == x else "nan"


def as_math(v: Any) -> Any:
    """Witness values (strings, lists, nested lists) as exact SymPy objects where possible, else text."""
    try:
        if isinstance(v, list) and v and all(isinstance(r, list) for r in v):
            return sp.Matrix([[sp.Rational(str(x)) for x in r] for r in v])
        if isinstance(v, list) and v and all(isinstance(x, (int, str)) for x in v):
            return sp.Matrix([sp.Rational(str(x)) for x in v])
        if isinstance(v, (int, str)) and str(v).replace("/", "").replace("-", "").isdigit():
            return sp.Rational(str(v))
    except (TypeError, ValueError, sp.SympifyError):
        pass
    return str(v)


def summary_rows(check: Any) -> list[list[str]]:
    """Header + one row per theorem: id, title, status, step counts, numeric figure (no timings)."""
    rows = [["theorem", "title", "status", "formal", "exact", "certificate", "rewrite", "numeric", "numeric figure"]]
    for t, s in check.statuses.items():
        e = check.entries[t]
        num = s.numeric
        fig = "-" if num is None else f"{num.figure_name} = {fmt_num(num.figure)} ({'agrees' if num.agrees else 'DISAGREES'})"
        rows.append([t, e.title, s.status, *(str(s.steps[k]) for k in ("formal", "exact", "certificate", "rewrite", "numeric")), fig])
    return rows


def formal_listing(entry: Any) -> list[tuple[str, int | None]]:
    """The entry's pinned Coq theorems (short names, without the library prefix) with the lines of
    their statement and proof in ``proofs/coq`` (``None`` when the sources are not at hand)."""
    from coupled_curvature.proofs.formal import proof_extent

    out = []
    for name in entry.formal:
        extent = proof_extent(name)
        out.append((name.removeprefix("CoupledCurvature."), None if extent is None else extent[2] - extent[1] + 1))
    return out
