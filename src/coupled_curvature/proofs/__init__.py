"""The theorem catalogue: statements, checked steps and numeric cross-checks.

``check_all(only=None, symbolic=True, numeric=True, seed=0, progress=None, heavy=True)`` runs
the symbolic derivations of T1–T14 (trust labels ``exact``/``certificate``/``rewrite``, every
witness and certificate re-checked by the independent checker) and the numeric cross-checks on
trained nets (label ``numeric``: evidence, never proof), and returns a :class:`CheckReport`
with a :class:`~coupled_curvature.proofs.catalogue.Status` per theorem and the timing.

>>> r = check_all(only=["T12"], numeric=False)    # doctest: +SKIP
>>> r.statuses["T12"].status                       # doctest: +SKIP
'proved'
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coupled_curvature.base.choices import parse_choices
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.theorems import THEOREMS

__all__ = ["check_all", "CheckReport", "THEOREM_IDS", "parse_only", "derivation", "entry"]


#: the registry's theorem ids, in catalogue order
THEOREM_IDS: tuple[str, ...] = tuple(THEOREMS)


def parse_only(only: str | Iterable[str] | None) -> list[str]:
    """``"T4,t6"`` or ``["T4", "T6"]`` -> ``["T4", "T6"]`` in catalogue order; ``None`` -> all.

    >>> parse_only("t6, T4")
    ['T4', 'T6']
    """
    if only is None:
        return list(THEOREM_IDS)
    return parse_choices(only, THEOREM_IDS, what="theorem id", example="--only T4,T6", normalize=str.upper,
                         valid_text=f"valid ids: {', '.join(THEOREM_IDS)}")


@functools.lru_cache(maxsize=None)
def derivation(theorem: str):
    """The symbolic derivation of ``theorem``, computed once per process (treat as read-only)."""
    from coupled_curvature.symbolic import derive

    return derive(theorem)


def entry(theorem: str, *, symbolic: bool = True, numeric: Any = None):
    """The catalogue :class:`~coupled_curvature.proofs.catalogue.Entry` of one theorem
    (:func:`~coupled_curvature.proofs.catalogue.build_entry`)."""
    from coupled_curvature.proofs.catalogue import build_entry

    return build_entry(theorem, derivation(theorem) if symbolic else None, numeric)


@dataclass
class CheckReport:
    """Per-theorem statuses and entries, the shared numeric lab, and the total time."""

    statuses: dict[str, Any]
    entries: dict[str, Any]
    seconds: float
    seed: int
    symbolic: bool
    numeric: bool
    lab: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.statuses.values())

    def to_json(self) -> dict[str, Any]:
        """``{"theorems": {"T1": {"status", "steps", "numeric", "seconds", "reasons"}}, ...}``."""
        return {
            "theorems": {t: s.to_dict() for t, s in self.statuses.items()},
            "seed": self.seed,
            "symbolic": self.symbolic,
            "numeric": self.numeric,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
        }


def check_all(
    only: str | Iterable[str] | None = None,
    symbolic: bool = True,
    numeric: bool = True,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    heavy: bool = True,
    lab: Any = None,
) -> CheckReport:
    """Check the selected theorems; ``heavy`` adds the digits 64x3 ``D⁺`` chain (~1.5 min).

    With ``numeric`` only, theorems without a cross-check are skipped and the others come out
    ``evidence`` (numbers cannot prove) or ``failed``.
    """
    from coupled_curvature.proofs.catalogue import evaluate

    if not (symbolic or numeric):
        raise InvalidInputError("nothing to run: enable symbolic and/or numeric checks")
    ids = parse_only(only)
    say = progress or (lambda s: None)
    t0 = time.perf_counter()
    if numeric:
        from coupled_curvature.proofs.crosschecks import CROSSCHECKS, Lab, crosscheck

        lab = lab if lab is not None else Lab(seed, heavy=heavy, progress=say)
        if not symbolic:
            ids = [t for t in ids if t in CROSSCHECKS]
    statuses, entries = {}, {}
    for i, t in enumerate(ids, 1):
        start = time.perf_counter()
        say(f"[{i}/{len(ids)}] {t} {THEOREMS[t].title}" + (": symbolic" if symbolic else ""))
        if symbolic:
            derivation(t)
        num = None
        if numeric:
            num = crosscheck(t, lab)
            if num is not None:
                say(f"  {t} numeric: {num.figure_name} = {num.figure:.3e} ({'agrees' if num.agrees else 'DISAGREES'})")
        e = entry(t, symbolic=symbolic, numeric=num)
        e.seconds = time.perf_counter() - start if e.seconds == 0 else e.seconds
        entries[t] = e
        statuses[t] = evaluate(e)
        say(f"  {t}: {statuses[t].status} ({statuses[t].seconds:.1f}s)")
    return CheckReport(statuses, entries, time.perf_counter() - t0, int(seed), symbolic, numeric,
                       lab if numeric else None)
