"""The theorem registry is the one source of theorem identity and statement, for every layer."""

import doctest
import re
import subprocess
import sys

import pytest

from coupled_curvature import formal_claims as F
from coupled_curvature import theorems as R
from coupled_curvature.base.errors import InvalidInputError

IDS = [f"T{i}" for i in range(1, 15)]


def test_ids_in_order_and_records_complete():
    assert list(R.THEOREMS) == IDS
    for tid, th in R.THEOREMS.items():
        assert th.id == tid and th.title and th.statement
        assert len(th.derivation) == 2 and th.derivation[1] == f"derive_{tid}"
        assert th.crosscheck is None or th.crosscheck.strip()


def test_get_lists_the_valid_ids():
    assert R.get("T7") is R.THEOREMS["T7"]
    for bad in ("T15", "t4", "", None, 4):
        with pytest.raises(InvalidInputError, match="valid ids: T1, T2, T3, .*, T14$"):
            R.get(bad)


def test_registry_is_frozen_plain_data():
    with pytest.raises(AttributeError):
        R.THEOREMS["T1"].statement = "changed"  # type: ignore[misc]


def test_imports_neither_torch_nor_sympy():
    code = ("import sys, coupled_curvature.theorems as R, coupled_curvature.formal_claims as F; R.get('T1'); F.formal_names('T1');"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sympy', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_statements_are_readable_mathematics():
    from coupled_curvature.reporting.latex import _UNICODE

    for tid, th in R.THEOREMS.items():
        s = th.statement
        assert not re.search(r"->|<=|>=|!=|\bD\+|\^-|\bin CO\(|\|\|", s), (tid, s)
        unknown = {ch for ch in s if ord(ch) >= 128 and ch not in _UNICODE}
        assert not unknown, f"{tid}: no LaTeX form for {sorted(unknown)}"


def test_formal_names_are_the_pinned_coq_theorems():
    from coupled_curvature.proofs import formal

    pins = formal.formal_theorems()
    assert F.formal_names("T4") == tuple(pins["T4"]) and len(F.formal_names("T4")) >= 3
    assert all(F.formal_names(t) == tuple(pins.get(t, ())) for t in IDS)
    with pytest.raises(InvalidInputError):
        F.formal_names("T0")


def test_doctests():
    assert doctest.testmod(R, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_symbolic_derivations_use_the_registry():
    from coupled_curvature import symbolic as S
    from coupled_curvature.proofs import derivation

    assert S.THEOREMS is R.THEOREMS
    for tid, th in R.THEOREMS.items():
        d = derivation(tid)
        assert d.theorem == tid and d.statement == th.statement


def test_catalogue_uses_the_registry():
    from coupled_curvature import proofs as P
    from coupled_curvature.proofs import entry

    assert P.THEOREM_IDS == tuple(IDS) and P.parse_only(None) == IDS
    for tid, th in R.THEOREMS.items():
        for symbolic in (True, False):
            e = entry(tid, symbolic=symbolic)
            assert (e.theorem, e.title, e.statement) == (tid, th.title, th.statement)


def test_crosschecks_are_keyed_by_the_registry():
    from coupled_curvature.proofs.crosschecks import CROSSCHECKS

    assert list(CROSSCHECKS) == [t for t, th in R.THEOREMS.items() if th.crosscheck is not None]


def test_explorer_predictions_cite_registered_theorems():
    from coupled_curvature.numeric.studies.explorer import PREDICTIONS

    reasons = [reason for row in PREDICTIONS.values() for _, reason in row.values()]
    cited = {t for reason in reasons for t in R.cited(reason)}
    assert cited and cited <= set(R.THEOREMS)
    R.check_citations(reasons)  # numeric/ does not import the registry; the check is here
    with pytest.raises(InvalidInputError, match="T15"):
        R.check_citations(["T3", "T15: not a theorem"])


def test_every_formally_proved_theorem_states_its_scope():
    """A 'formal' label names what Coq proves of the theorem: the scope text exists exactly for the
    theorems with pinned Coq statements."""
    from coupled_curvature.proofs import formal

    assert set(F.FORMAL_SCOPE) == set(formal.formal_theorems())
    assert all(F.FORMAL_SCOPE[t].strip() for t in F.FORMAL_SCOPE)


def test_formal_steps_name_pinned_coq_theorems_and_real_steps():
    """Every Coq theorem that FORMAL_STEPS names is pinned in proofs/coq/statements, and every step
    it lists is a step (by its exact description) of that theorem's derivation."""
    import importlib

    from coupled_curvature.proofs.formal import formal_theorems
    from coupled_curvature.formal_claims import FORMAL_STEPS, formal_step

    pinned = {n for ns in formal_theorems().values() for n in ns}
    assert len(pinned) > 50
    for tid, steps in FORMAL_STEPS.items():
        module, fn = R.THEOREMS[tid].derivation
        derived = {s.description for s in getattr(importlib.import_module(f"coupled_curvature.symbolic.{module}"),
                                                  fn)().steps}
        for description in steps:
            assert description in derived, (tid, description)
            names = formal_step(tid, description)
            assert names and all(n in pinned for n in names), (tid, description, names)
    # negative control: a name that is not pinned, a step that is not listed
    assert "CoupledCurvature.T12_loss_scaling.T12_nope" not in pinned
    assert formal_step("T12", "no such step") == () and formal_step("T9", "D -> D/s") == ()


def test_step_labels_follow_the_registry(monkeypatch):
    """A listed step of a checked entry is labelled formal and names its Coq theorems; unlisted
    steps keep their symbolic label; a listed name that is not pinned gives no label."""
    from coupled_curvature import formal_claims as theorems
    from coupled_curvature.proofs.catalogue import evaluate, make_entry
    from coupled_curvature.symbolic.loss_scaling import derive_T12

    d = derive_T12()
    e = make_entry("T12", "Loss scaling", d)
    for st in e.steps:
        assert (st.label == "formal") == bool(theorems.formal_step("T12", st.description))
        assert st.formal == theorems.formal_step("T12", st.description)
    assert evaluate(e).steps["formal"] == len(theorems.FORMAL_STEPS["T12"]) and evaluate(e).status == "proved"
    monkeypatch.setitem(theorems.FORMAL_STEPS, "T12", {"D -> D/s": ("T12_loss_scaling.T12_nope",)})
    e = make_entry("T12", "Loss scaling", d)
    assert all(st.label != "formal" and st.formal == () for st in e.steps)


def ranges_named(text: str) -> list[str]:
    """The theorem ranges ``T1–Tn`` (en dash or hyphen) a text names, as their last id."""
    return [f"T{m}" for m in re.findall(r"\bT1[–-]T(\d+)\b", text)]


def test_the_readme_and_the_docs_name_the_whole_registry():
    """Where the README and the docs pages say 'T1–Tn', n is the last registered theorem (a new theorem once
    left 'T1–T12' in the README and 'T1–T13' on the site's front page)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    last = list(R.THEOREMS)[-1]
    assert ranges_named("every theorem T1–T12 and T1-T9") == ["T12", "T9"]  # the scan can see a stale range
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    if not pages[0].exists():
        pytest.skip("the README is not beside the tests (an installed copy)")
    stale = {p.name: r for p in pages for r in ranges_named(p.read_text(encoding="utf-8")) if r != last}
    assert stale == {}, f"ranges that stop before {last}: {stale}"
