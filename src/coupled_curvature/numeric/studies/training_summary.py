"""The training experiment's table (seed-bootstrap intervals per condition and arm) and its verdicts.

Three claims are put to the runs of :mod:`~coupled_curvature.numeric.studies.training_run`, per condition:

1. **CRR lowers λ at an unchanged error**: at a CRR scale, the paired (same seed) change of boundary λ
   against the baseline has a 95% interval below 0, and the paired change of test error has an interval
   inside ``±ERROR_MARGIN``. Reproduced if it holds at the headline scale; partly if only at another scale;
   inconclusive if λ is lower at some scale but the error interval, while it contains 0, is too wide to
   show the error unchanged; not reproduced otherwise.
2. **CRR matches SAM's accuracy and calibration**: at the headline scale, the paired CRR − SAM changes of
   test error and ECE have intervals inside ``±ERROR_MARGIN`` and ``±ECE_MARGIN`` (equivalence, not merely
   "no difference detected"), or wholly on CRR's better side ("reproduced (CRR better)"); not reproduced if
   either interval lies wholly on CRR's worse side; inconclusive otherwise.
3. **λ rises during training** (baseline): the per-seed change of λ from the first recorded epoch (the
   initialisation, where test points already lie in the boundary band) to the last has an interval above 0;
   contradicted if below 0; inconclusive otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum

from coupled_curvature.numeric.studies.stats import MeanInterval, mean_interval

__all__ = ["ECE_MARGIN", "ERROR_MARGIN", "FEW_SEEDS", "TABLE_FIELDS", "EvidenceKind", "Verdict", "arm_table",
           "lambda_curves", "verdicts"]

#: "unchanged" test error: the paired interval lies within ± this (one percentage point)
ERROR_MARGIN = 0.01
#: "matches" calibration: the paired ECE interval lies within ± this
ECE_MARGIN = 0.02
#: below this many seeds a verdict carries the caveat that its intervals are rough
FEW_SEEDS = 10
#: the table's quantities: the row field, and how the per-seed value is read off a run
TABLE_FIELDS = ("test_error", "lambda_boundary", "ece", "D_median", "Dplus_median", "top_eig")


class EvidenceKind(str, Enum):
    """What stands behind a verdict (a ``str`` enum: it compares equal to, and is written as, its value).
    Only ``EXACT`` (an exact computation or a proof) may be presented as proved."""

    EXACT = "exact"  #: an exact method's result
    STATISTICAL = "statistical"  #: bootstrap intervals over at least FEW_SEEDS seeds: evidence, not proof
    INDICATIVE = "indicative"  #: intervals over fewer than FEW_SEEDS seeds: a rough indication only


@dataclass(frozen=True)
class Verdict:
    """One claim on one condition: ``outcome`` is reproduced, partly, not reproduced, contradicted or
    inconclusive; ``verdict`` is what is shown: the outcome, prefixed ``indicative:`` with the reason when
    fewer than :data:`FEW_SEEDS` seeds stand behind it; ``kind`` the :class:`EvidenceKind`; ``evidence``
    says why in words, with the intervals.

    >>> v = Verdict("claim", "c", "indicative: reproduced (3 seeds < 10)", "…", 3, "reproduced",
    ...             EvidenceKind.INDICATIVE)
    >>> v.kind == "indicative", v.outcome
    (True, 'reproduced')
    """

    claim: str
    condition: str
    verdict: str
    evidence: str
    seeds: int = 0
    outcome: str = ""
    kind: EvidenceKind = EvidenceKind.STATISTICAL


def _median(values: Mapping[str, float | None] | None) -> float | None:
    v = [x for x in (values or {}).values() if x is not None and math.isfinite(x)]
    return statistics.median(v) if v else None


def _value(row: Mapping, name: str) -> float | None:
    if name == "D_median":
        return _median(row.get("D"))
    if name == "Dplus_median":
        return _median(row.get("Dplus"))
    return row.get(name)


def _groups(rows: Sequence[Mapping]) -> dict[tuple[str, str], dict[int, Mapping]]:
    out: dict[tuple[str, str], dict[int, Mapping]] = {}
    for r in rows:
        out.setdefault((r["condition"], r["arm"]), {})[r["seed"]] = r
    return out


def arm_table(rows: Sequence[Mapping], *, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    """One entry per (condition, arm): ``{"condition", "arm", "seeds", FIELD: MeanInterval as a dict}``.

    ``D_median``/``Dplus_median`` are the median over blocks of one run, then averaged over seeds.

    >>> rows = [{"condition": "c", "arm": "a", "seed": s, "test_error": 0.1 * s, "D": {"w": 1.0}} for s in (1, 2)]
    >>> t = arm_table(rows, n_boot=100)
    >>> t[0]["seeds"], round(t[0]["test_error"]["mean"], 12), t[0]["D_median"]["mean"], t[0]["ece"]["mean"]
    (2, 0.15, 1.0, None)
    """
    table = []
    for (cond, arm), by_seed in _groups(rows).items():
        entry: dict = {"condition": cond, "arm": arm, "seeds": len(by_seed)}
        for f in TABLE_FIELDS:
            entry[f] = asdict(mean_interval([_value(r, f) for r in by_seed.values()], n_boot=n_boot, seed=seed))
        table.append(entry)
    return table


def lambda_curves(rows: Sequence[Mapping]) -> list[dict]:
    """Per (condition, arm): λ at the boundary after every epoch (epoch 0 = initialisation), the mean over
    the seeds that have a value at that epoch, and how many do."""
    out = []
    for (cond, arm), by_seed in _groups(rows).items():
        curves = [r.get("lambda_curve") or [] for r in by_seed.values()]
        length = max((len(c) for c in curves), default=0)
        mean, counts = [], []
        for e in range(length):
            v = [c[e] for c in curves if e < len(c) and c[e] is not None and math.isfinite(c[e])]
            mean.append(sum(v) / len(v) if v else None)
            counts.append(len(v))
        out.append({"condition": cond, "arm": arm, "lambda": mean, "seeds": counts})
    return out


def _paired(a: Mapping[int, Mapping], b: Mapping[int, Mapping], name: str, n_boot: int, seed: int) -> MeanInterval:
    diffs = []
    for s in sorted(set(a) & set(b)):
        x, y = _value(a[s], name), _value(b[s], name)
        if x is not None and y is not None:
            diffs.append(x - y)
    return mean_interval(diffs, n_boot=n_boot, seed=seed)


def _ci(m: MeanInterval, digits: int = 3) -> str:
    if m.mean is None:
        return "no paired values"
    return f"{m.mean:+.{digits}g} [{m.low:+.{digits}g}, {m.high:+.{digits}g}] (n={m.n})"


def _below(m: MeanInterval) -> bool:
    return m.high is not None and m.high < 0.0


def _inside(m: MeanInterval, margin: float) -> bool:
    return m.low is not None and m.high is not None and -margin <= m.low and m.high <= margin


def _crr_label(scale: float) -> str:
    return f"CRR {scale:g}"


def _claim_crr_lambda(cond: str, g, scales: Sequence[float], headline: float, n_boot: int, seed: int) -> Verdict:
    base = g.get((cond, "baseline"), {})
    held, open_, parts = [], [], []
    for s in scales:
        arm = g.get((cond, _crr_label(s)), {})
        dl = _paired(arm, base, "lambda_boundary", n_boot, seed)
        de = _paired(arm, base, "test_error", n_boot, seed)
        if _below(dl) and _inside(de, ERROR_MARGIN):
            held.append(s)
        elif _below(dl) and de.low is not None and de.high is not None and de.low <= 0.0 <= de.high:
            open_.append(s)  # λ lower; the error neither shown unchanged (too wide) nor shown to move
        parts.append(f"scale {s:g}: Δλ {_ci(dl)}, Δerror {_ci(de)}")
    verdict = ("reproduced" if headline in held else "partly reproduced" if held else
               "inconclusive" if open_ else "not reproduced")
    return Verdict("CRR lowers λ at an unchanged error", cond, verdict, "; ".join(parts))


def _claim_crr_sam(cond: str, g, headline: float, n_boot: int, seed: int) -> Verdict:
    crr, sam = g.get((cond, _crr_label(headline)), {}), g.get((cond, next(
        (a for (c, a) in g if c == cond and a.startswith("SAM")), "SAM")), {})
    de = _paired(crr, sam, "test_error", n_boot, seed)
    dc = _paired(crr, sam, "ece", n_boot, seed)
    worse = (de.low is not None and de.low > 0.0) or (dc.low is not None and dc.low > 0.0)
    better = _below(de) or _below(dc)
    if worse:
        verdict = "not reproduced"
    elif _inside(de, ERROR_MARGIN) and _inside(dc, ECE_MARGIN):
        verdict = "reproduced"
    elif better and (_below(de) or _inside(de, ERROR_MARGIN)) and (_below(dc) or _inside(dc, ECE_MARGIN)):
        verdict = "reproduced (CRR better)"
    else:
        verdict = "inconclusive"
    return Verdict("CRR matches SAM's accuracy and calibration", cond, verdict,
                   f"CRR {headline:g} − SAM: Δerror {_ci(de)}, ΔECE {_ci(dc)} (margins ±{ERROR_MARGIN:g}, "
                   f"±{ECE_MARGIN:g})")


def _claim_lambda_rises(cond: str, g, n_boot: int, seed: int) -> Verdict:
    base = g.get((cond, "baseline"), {})
    diffs = []
    for r in base.values():
        c = [v for v in r.get("lambda_curve") or [] if v is not None and math.isfinite(v)]
        if len(c) >= 2:
            diffs.append(c[-1] - c[0])
    m = mean_interval(diffs, n_boot=n_boot, seed=seed)
    verdict = ("reproduced" if m.low is not None and m.low > 0 else "contradicted" if _below(m) else "inconclusive")
    return Verdict("λ rises during training", cond, verdict,
                   f"baseline λ(last epoch) − λ(first epoch with boundary points; initialisation where it has them): {_ci(m)}"
                   + ("" if m.n == len(base) else f"; {len(base) - m.n} seed(s) had no boundary points at one end"))


def verdicts(rows: Sequence[Mapping], scales: Sequence[float], headline: float, *, n_boot: int = 2000,
             seed: int = 0) -> list[Verdict]:
    """The three claims (module docstring) on every condition of ``rows``, in order."""
    g = _groups(rows)
    out: list[Verdict] = []
    for cond in dict.fromkeys(r["condition"] for r in rows):
        seeds = min(len(v) for (c, _), v in g.items() if c == cond)
        few = seeds < FEW_SEEDS
        caveat = (f"; only {seeds} seeds: a bootstrap over so few understates the uncertainty, so the verdict is "
                  "indicative only" if few else "")
        kind = EvidenceKind.INDICATIVE if few else EvidenceKind.STATISTICAL
        for v in (_claim_crr_lambda(cond, g, scales, headline, n_boot, seed), _claim_crr_sam(cond, g, headline, n_boot, seed),
                  _claim_lambda_rises(cond, g, n_boot, seed)):
            shown = f"indicative: {v.verdict} ({seeds} seeds < {FEW_SEEDS})" if few else v.verdict
            out.append(Verdict(v.claim, v.condition, shown, v.evidence + caveat, seeds, v.verdict, kind))
    return out
