"""Catalogue records: checked steps with trust labels, witnesses, and the proved/failed verdict.

Trust labels, strongest first:

* ``formal``      -- a step checked symbolically (one of the labels below) whose claim a pinned Coq
  theorem also states in general (:data:`coupled_curvature.formal_claims.FORMAL_STEPS`); the step
  names those theorems in ``CheckedStep.formal`` and keeps its symbolic method;
* ``exact``       -- exact symbolic identity (``expand``/``cancel``/``Poly``) or Gröbner reduction;
* ``certificate`` -- a plain-data witness or certificate accepted by the independent
  ``fractions.Fraction`` checker of :mod:`coupled_curvature.symbolic.checker`;
* ``rewrite``     -- a named rewrite rule, stated as a hypothesis of the theorem;
* ``numeric``     -- floating-point agreement: evidence, never proof.

A theorem is **proved** only when it has at least one step, every step is ``exact``,
``certificate`` or ``rewrite`` and passed, every witness with a checker is accepted, and the
numeric cross-check (when run) agrees with the prediction. Anything else is **failed**, with
reasons.  ``exact`` steps whose two sides are SymPy objects are re-verified here, so a
corrupted step (say a wrong exponent) is caught even if its recorded outcome says "ok".

>>> import sympy as sp
>>> from coupled_curvature.symbolic.derivation import Derivation
>>> c = sp.Symbol("c", positive=True)
>>> d = Derivation("T0", "demo", ["c > 0"])
>>> _ = d.exact("c⁻²·c² = 1", c**-2 * c**2, 1)
>>> evaluate(make_entry("T0", "demo", d.finish())).status
'proved'
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import sympy as sp

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.symbolic import check_certificate, check_pinv_witness, check_witness
from coupled_curvature.symbolic.derivation import Derivation, Step, Witness, exact_equal
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.formal_claims import FORMAL_SCOPE, formal_names, formal_step
from coupled_curvature.theorems import THEOREMS

__all__ = [
    "TRUST_LABELS", "PROOF_LABELS", "trust_label", "CheckedStep", "WitnessRecord", "Entry", "Status",
    "make_entry", "evaluate", "certificate_step", "EXTRA_CHECKS", "build_entry",
]

TRUST_LABELS = ("formal", "exact", "certificate", "rewrite", "numeric")
PROOF_LABELS = frozenset({"formal", "exact", "certificate", "rewrite"})


def trust_label(method: StepMethod) -> str:
    """Map a symbolic method to its trust label.

    >>> [trust_label(StepMethod.of(m)) for m in ("exact", "groebner", "certificate")]
    ['exact', 'exact', 'certificate']
    >>> trust_label(StepMethod.rewrite("penrose"))
    'rewrite'
    """
    if not isinstance(method, StepMethod):
        raise InvalidInputError(f"unknown step method {method!r}; expected a StepMethod (exact, groebner, "
                                "certificate or a rewrite)")
    return "exact" if method.kind is MethodKind.GROEBNER else method.kind.value


@dataclass
class CheckedStep:
    """One step of a theorem with its trust label and the catalogue's verdict on it."""

    description: str
    method: StepMethod
    label: str
    passed: bool
    lhs: Any = None
    rhs: Any = None
    detail: str = ""
    verification: str = "recorded"  # "re-verified" (catalogue recomputed it) or "recorded"
    text: str = ""
    latex: str = ""
    formal: tuple[str, ...] = ()  # qualified pinned Coq theorems stating this step's claim in general

    @property
    def rule(self) -> str | None:
        return self.method.rule


@dataclass
class WitnessRecord:
    """A witness of non-invariance as plain data, and whether the independent checker accepts it."""

    kind: str
    data: dict[str, Any]
    checker: str | None
    accepted: bool | None
    note: str = ""


@dataclass
class Entry:
    """A theorem's catalogue record: statement, hypotheses, steps, witnesses, numeric cross-check."""

    theorem: str
    title: str
    statement: str
    hypotheses: list[str] = field(default_factory=list)
    steps: list[CheckedStep] = field(default_factory=list)
    witnesses: list[WitnessRecord] = field(default_factory=list)
    numeric: Any = None  # crosschecks.NumericCheck | None
    symbolic: bool = True
    seconds: float = 0.0
    formal: tuple[str, ...] = ()  # pinned Coq theorems (label "formal" once ccurv check --formal checks them)
    formal_scope: str | None = None  # what those Coq theorems prove of this theorem

    @property
    def rules(self) -> list[str]:
        return sorted({s.rule for s in self.steps if s.rule})


@dataclass
class Status:
    """Verdict on one theorem: ``status`` is ``proved`` or ``failed`` (``evidence`` when only numbers ran)."""

    theorem: str
    status: str
    reasons: list[str]
    steps: dict[str, int]
    numeric: Any
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "steps": dict(self.steps),
            "numeric": None if self.numeric is None else self.numeric.to_dict(),
            "seconds": round(float(self.seconds), 3),
            "reasons": list(self.reasons),
        }


def _sympy_side(x: Any) -> bool:
    return isinstance(x, (sp.Basic, sp.MatrixBase)) and not isinstance(x, str)


def _check_step(step: Step) -> CheckedStep:
    label = trust_label(step.method)
    passed, how = bool(step.outcome), "recorded"
    if step.method.kind is MethodKind.EXACT and _sympy_side(step.lhs) and _sympy_side(step.rhs):
        passed, how = bool(exact_equal(step.lhs, step.rhs)), "re-verified"
        if passed != bool(step.outcome):
            how = "re-verified (disagrees with the recorded outcome)"
    try:
        tex = step.latex()
    except Exception:  # noqa: BLE001 - printing must never sink a proof record
        tex = r"\text{(no LaTeX form)}"
    return CheckedStep(step.description, step.method, label, passed, step.lhs, step.rhs, step.detail, how,
                       str(step), tex)


def _witness_record(w: Any) -> WitnessRecord:
    if isinstance(w, Witness):
        data = w.to_data()
        return WitnessRecord("D non-invariance (T4 action)", data, "check_witness", bool(check_witness(data)), w.note)
    if isinstance(w, dict) and "Hp" in w:
        return WitnessRecord("wᵀH⁺w changes (pseudo-inverse)", dict(w), "check_pinv_witness", bool(check_pinv_witness(w)))
    if isinstance(w, dict):
        return WitnessRecord("example (its factor is an exact step)", dict(w), None, None)
    return WitnessRecord("example", {"value": str(w)}, None, None)


def certificate_step(n: int) -> tuple[CheckedStep, WitnessRecord]:
    """Re-run the independent checker on the T4 certificate of size ``n`` (a ``certificate`` step)."""
    from coupled_curvature.symbolic import certificate

    cert = certificate(n)
    ok = bool(check_certificate(cert))
    step = CheckedStep(f"independent checker re-verifies the n={n} certificate (AᵀA = c²I)",
                       StepMethod.of(MethodKind.CERTIFICATE), "certificate", ok, f"certificate({n})", "accepted", verification="re-verified",
                       text=f"check_certificate(certificate({n})) = {ok}",
                       latex=rf"\text{{check\_certificate(certificate({n}))}} = \text{{{ok}}}")
    rec = WitnessRecord(f"T4 certificate n={n} ({len(cert['targets'])} targets)", {"n": n, "targets": [t["name"] for t in cert["targets"]]},
                        "check_certificate", ok)
    return step, rec


def _t4_certificates() -> tuple[list[CheckedStep], list[WitnessRecord]]:
    """Re-run the independent checker on fresh T4 certificates for n = 2, 3, 4."""
    pairs = [certificate_step(n) for n in (2, 3, 4)]
    return [s for s, _ in pairs], [w for _, w in pairs]


#: theorem id -> the checks its entry adds to its derivation's steps and witnesses (with a derivation
#: only); the other theorems' entries are their derivation and cross-check alone
EXTRA_CHECKS: dict[str, Callable[[], tuple[list[CheckedStep], list[WitnessRecord]]]] = {"T4": _t4_certificates}


def build_entry(theorem: str, derivation: Derivation | None, numeric: Any = None) -> Entry:
    """The catalogue entry of the registered ``theorem`` from its derivation (``None``: numeric only),
    its cross-check and its :data:`EXTRA_CHECKS`; title and statement come from the registry.

    >>> build_entry("T15", None)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: no theorem T15; valid ids: T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14
    """
    if theorem not in THEOREMS:
        raise InvalidInputError(f"no theorem {theorem}; valid ids: {', '.join(THEOREMS)}")
    extra = EXTRA_CHECKS.get(theorem) if derivation is not None else None
    steps, witnesses = extra() if extra is not None else ([], [])
    return make_entry(theorem, THEOREMS[theorem].title, derivation, numeric, steps, witnesses)


def make_entry(theorem: str, title: str, derivation: Derivation | None, numeric: Any = None,
               extra_steps: list[CheckedStep] | None = None, extra_witnesses: list[WitnessRecord] | None = None,
               statement: str = "", hypotheses: list[str] | None = None) -> Entry:
    """Build an :class:`Entry` from a derivation (``None``: numeric-only) and an optional cross-check.

    A registered theorem's entry states the registry's statement (``statement`` is for
    unregistered demos); with a derivation, the derivation's statement, which is the same text.
    """
    t0 = time.perf_counter()
    if theorem in THEOREMS:
        statement = THEOREMS[theorem].statement
    if derivation is None:
        entry = Entry(theorem, title, statement, list(hypotheses or []), numeric=numeric, symbolic=False)
    else:
        entry = Entry(
            theorem, title, derivation.statement, list(derivation.hypotheses),
            [_check_step(s) for s in derivation.steps] + list(extra_steps or []),
            [_witness_record(w) for w in derivation.witnesses] + list(extra_witnesses or []),
            numeric, True, float(derivation.elapsed),
        )
    if theorem in THEOREMS:
        entry.formal, entry.formal_scope = formal_names(theorem), FORMAL_SCOPE.get(theorem)
        _label_formal(theorem, entry.steps)
    entry.seconds += time.perf_counter() - t0 + (numeric.seconds if numeric is not None else 0.0)
    return entry


def _label_formal(theorem: str, steps: list[CheckedStep]) -> None:
    """Give the label ``formal`` to the steps whose claim a pinned Coq theorem states in general
    (only names that are pinned in ``proofs/coq/statements`` and not declared global count; without
    the sources, none)."""
    from coupled_curvature.proofs.formal import GLOBAL_PINS, formal_theorems

    pinned = {n for ns in formal_theorems().values() for n in ns
              if n.removeprefix("CoupledCurvature.") not in GLOBAL_PINS}
    for st in steps:
        names = tuple(n for n in formal_step(theorem, st.description) if n in pinned)
        if names and st.label in PROOF_LABELS:
            st.formal, st.label = names, "formal"


def evaluate(entry: Entry) -> Status:
    """The verdict (see module docstring), with a reason for every failure."""
    reasons: list[str] = []
    counts = Counter(s.label for s in entry.steps)
    if entry.symbolic:
        if not entry.steps:
            reasons.append("no steps: nothing was established")
        for i, s in enumerate(entry.steps, 1):
            if s.label not in PROOF_LABELS:
                reasons.append(f"step {i} ({s.description}) is {s.label} evidence, not proof")
            elif not s.passed:
                reasons.append(f"step {i} ({s.description}) failed [{s.method}, {s.verification}]")
        for w in entry.witnesses:
            if w.checker and not w.accepted:
                reasons.append(f"witness rejected by {w.checker}: {w.kind}")
    if entry.numeric is not None:
        counts["numeric"] += len(entry.numeric.rows)
        if not entry.numeric.agrees:
            bad = [r for r in entry.numeric.rows if not r["agrees"]]
            reasons += [f"numeric disagrees with the prediction: {r['net']}: {r['quantity']} = "
                        f"{r['measured']:.3e} (expected {r['bound']})" for r in bad] or ["numeric disagrees"]
    if reasons:
        status = "failed"
    elif entry.symbolic:
        status = "proved"
    elif entry.numeric is not None:
        status = "evidence"
    else:
        status = "failed"
        reasons.append("nothing was run for this theorem")
    steps = {lab: int(counts.get(lab, 0)) for lab in TRUST_LABELS}
    return Status(entry.theorem, status, reasons, steps, entry.numeric, entry.seconds)
