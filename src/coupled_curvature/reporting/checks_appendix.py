"""The appendix of checks: per theorem, one table row per checked step of its derivation, the place
each proof step's evidence label links to (:func:`.proof_text.check_anchor`).

A row gives the step's statement, its trust label (the step's ``label`` field), the method that
checked it and whether the catalogue re-verified it, the size of the instance it was checked on
(:func:`.steps.step_view`), and the Coq theorems that state it in general (formal steps). What an
instance check is, is said once per theorem, above its table.

>>> from types import SimpleNamespace as NS
>>> st = NS(description="D → D/s", label="formal", passed=True, lhs=None, rhs=None, method="exact",
...         verification="re-verified", formal=("CoupledCurvature.T12_loss_scaling.T12_D",))
>>> t = check_table("T12", [st])
>>> t.row_ids, t.rows[0][5]
(('check-T12-1',), (Code(text='T12_loss_scaling.T12_D'),))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coupled_curvature.reporting.outline import Block, Code, Inline, Mark, Paragraph, Section, Table, Text
from coupled_curvature.reporting.proof_text import check_anchor
from coupled_curvature.reporting.steps import step_view

__all__ = ["check_table", "checks_appendix", "INSTANCE_NOTE"]

#: what a check on an explicit instance is (said once per theorem)
INSTANCE_NOTE = ("A step checked on an explicit instance writes both sides out in coordinates (a stated size n, "
                 "a stated network such as 2-3-2-1, or explicit matrices) and compares them exactly, entry by "
                 "entry for matrices; its instance column gives the shape and the size of the larger side in "
                 "expression-tree nodes. A step marked general is an identity between symbols, checked as such.")

_HEAD = ("#", "step", "evidence", "method", "instance", "Coq theorem")


def _row(i: int, st: Any) -> tuple[tuple[Inline, ...], ...]:
    v = step_view(st.description, st.lhs, st.rhs)
    evidence: tuple[Inline, ...] = (Mark(str(st.label), "label"),)
    if not st.passed:
        evidence += (Text(" ", False), Mark("FAIL", "failed"))
    coq: list[Inline] = []
    for k, n in enumerate(st.formal):
        coq += ([Text(", ", False)] if k else []) + [Code(n.removeprefix("CoupledCurvature."))]
    return ((Text(str(i), False),), (Text(v.statement),), evidence,
            (Code(str(st.method)), Text(f", {st.verification}", False)),
            (Text(v.size or "general", False),), tuple(coq) or (Text("-", False),))


def check_table(theorem: str, steps: Sequence[Any]) -> Table:
    """One row per checked step of ``theorem``, each with its anchor."""
    rows = tuple(_row(i, st) for i, st in enumerate(steps, 1))
    return Table(tuple((Text(h, False),) for h in _HEAD), rows, ("r", 0.31, "l", 0.15, 0.12, 0.2), small=True,
                 row_ids=tuple(check_anchor(theorem, i) for i in range(1, len(steps) + 1)))


def checks_appendix(entries: dict[str, Any]) -> list[Section]:
    """The appendix section of checks: a subsection per theorem with steps (none without any)."""
    subs: list[Block] = []
    for t, e in entries.items():
        if e.steps:
            subs.append(Section(f"{t} — {e.title}", (Paragraph((Text(INSTANCE_NOTE, False),)),
                                                     check_table(t, e.steps)), f"checks-{t}", level=2))
    if not subs:
        return []
    intro = Paragraph((Text("Every checked step of every proof, in the order of its derivation. A proof step's "
                            "evidence label links to the first check it rests on.", False),))
    return [Section("Checks of the proofs", (intro, *subs), "checks")]
