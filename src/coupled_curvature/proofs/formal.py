"""The Coq development in ``proofs/coq``: build it, and check the pinned theorem statements.

This module is the build/check machinery; what the sources and pins must satisfy besides
(no ``Admitted``, local hypotheses, a pinned instance per formal theorem) lives in
:mod:`coupled_curvature.proofs.formal_evidence`, whose public names are re-exported here.

The statements are the contract.  ``proofs/coq/statements/<ID>.txt`` (``T04.txt`` for catalogue
id ``T4``) pins, for each headline Coq theorem of that id, the statement exactly as ``coqc``
prints it for ``Check <qualified name>.``, in this format::

    # comment lines start with '#'
    == CoupledCurvature.T04_invariance_group.T4_i_iii
    forall (R : rcfType) (n : nat) (A : 'M_n),
    A \\in unitmx -> ...

i.e. a line ``== <fully qualified name>`` followed by the printed type (the text after the
``:`` of Coq's ``name\\n     : type`` answer).  Statements are compared after collapsing runs of
whitespace, so only Coq's line breaking is ignored.  The printing context (``PREAMBLE``) is fixed:
MathComp's and mathcomp-analysis' notations (``differentiable f x``, ``\\forall y \\near x, P``,
``'D_v f x``; column vectors print as ``'cV[R]_(n.+1)``, a printing notation of ``DefsAnalytic``),
``Defs``, ``DefsAnalytic`` and the theorem's own module imported; names of other modules of the
development print qualified (``T01_analytic.differentiable_near``), so the pins do not depend on
which other files the development contains.

``Print Assumptions`` must answer "Closed under the global context" or list only the axioms of
the real-number libraries (``ALLOWED_AXIOMS``): Coq's ``Reals`` (``sig_forall_dec``,
``sig_not_dec``, ``functional_extensionality_dep``) and mathcomp-analysis' ``boolp``
(``functional_extensionality_dep``, ``propositional_extensionality``,
``constructive_indefinite_description``).

>>> from coupled_curvature.proofs.formal import formal_theorems, coq_available
>>> sorted(formal_theorems(), key=lambda t: int(t[1:]))   # doctest: +SKIP
['T3', 'T4', 'T7', 'T8', 'T11', 'T12']
>>> r = check_statements(["T4"])                  # doctest: +SKIP
>>> all(x.matches and x.axioms_allowed for x in r)  # doctest: +SKIP
True
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from coupled_curvature.base.errors import CoupledCurvatureError
from coupled_curvature.proofs.formal_evidence import (
    FORMAL_INSTANCES, GLOBAL_PINS, forbidden_vernacular, global_differentiability, proof_extent,
    undeclared_global_pins, unsupported_steps)

__all__ = [
    "ALLOWED_AXIOMS", "FORMAL_INSTANCES", "GLOBAL_PINS", "INSTALL_HINT", "PREAMBLE", "BuildResult",
    "CoqUnavailableError", "CoqBuildError", "StatementCheck", "build", "check_statements",
    "coq_available", "coq_dir", "formal_theorems", "forbidden_vernacular",
    "global_differentiability", "parse_statements", "proof_extent", "statement_pins",
    "undeclared_global_pins", "unsupported_steps",
]

#: Debian packages that provide Coq 8.16 and the libraries the development uses.
INSTALL_HINT = (
    "install Coq and MathComp: apt-get install coq libcoq-mathcomp-ssreflect "
    "libcoq-mathcomp-algebra libcoq-mathcomp-field libcoq-mathcomp-real-closed "
    "libcoq-mathcomp-algebra-tactics libcoq-mathcomp-analysis libcoq-coquelicot"
)

#: Fully qualified axioms of the real-number libraries; a printed axiom is allowed when it is one
#: of these or a dotted suffix of one (Coq prints the shortest unambiguous name).  No ``Axiom`` is
#: allowed in ``proofs/coq`` itself (:func:`forbidden_vernacular`), so a suffix cannot be ours.
ALLOWED_AXIOMS: frozenset[str] = frozenset({
    "Coq.Reals.ClassicalDedekindReals.sig_forall_dec",
    "Coq.Reals.ClassicalDedekindReals.sig_not_dec",
    "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep",
    "mathcomp.classical.boolp.functional_extensionality_dep",
    "mathcomp.classical.boolp.propositional_extensionality",
    "mathcomp.classical.boolp.constructive_indefinite_description",
})

#: The printing context of the pinned statements (the module's own import is appended).
PREAMBLE = """From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.
From CoupledCurvature Require Import Defs DefsAnalytic.
"""

LOGICAL_ROOT = "CoupledCurvature"


class CoqUnavailableError(CoupledCurvatureError, RuntimeError):
    """``coqc`` (or the Coq sources) cannot be found; the message says how to install Coq."""


class CoqBuildError(CoupledCurvatureError, RuntimeError):
    """The Coq development or a statement check did not compile; the message carries Coq's error."""


@dataclass(frozen=True)
class BuildResult:
    """Outcome of :func:`build`: the folder built, the seconds ``make`` took, its output."""

    coq_dir: Path
    seconds: float
    output: str


@dataclass(frozen=True)
class StatementCheck:
    """One pinned theorem checked against Coq.

    ``printed`` is Coq's statement (``None`` when Coq does not know the name), ``matches`` whether
    it equals the pin up to whitespace, ``axioms`` what ``Print Assumptions`` lists (empty when
    closed under the global context) and ``axioms_allowed`` whether all of them are in
    :data:`ALLOWED_AXIOMS`.
    """

    theorem_id: str
    name: str
    pinned: str
    printed: str | None
    matches: bool
    axioms: tuple[str, ...] = field(default_factory=tuple)
    axioms_allowed: bool = True

    @property
    def ok(self) -> bool:
        """Pinned statement matches and no axiom beyond the real-number libraries'."""
        return self.matches and self.axioms_allowed


def coq_dir() -> Path | None:
    """The ``proofs/coq`` folder (it ships in the source tree), or ``None`` when not found.

    Looked up in order: ``$CCURV_COQ_DIR``, next to this module, ``src/coupled_curvature/proofs/coq``
    in the current folder or one of its parents (a source checkout).

    >>> d = coq_dir()
    >>> d is None or (d / "_CoqProject").is_file()
    True
    """
    candidates: list[Path] = []
    env = os.environ.get("CCURV_COQ_DIR")
    if env:
        candidates.append(Path(env))
    candidates.append(Path(__file__).resolve().parent / "coq")
    cwd = Path.cwd().resolve()
    candidates.extend(p / "src" / "coupled_curvature" / "proofs" / "coq" for p in (cwd, *cwd.parents))
    for c in candidates:
        if (c / "_CoqProject").is_file():
            return c
    return None


def coq_available() -> bool:
    """Whether ``coqc`` is on the PATH.

    >>> isinstance(coq_available(), bool)
    True
    """
    return shutil.which("coqc") is not None


def _require_coq() -> Path:
    if not coq_available():
        raise CoqUnavailableError(f"coqc was not found on the PATH; {INSTALL_HINT}")
    d = coq_dir()
    if d is None:
        raise CoqUnavailableError(
            "the Coq sources (proofs/coq with its _CoqProject) were not found: run from a source "
            "checkout of coupled-curvature or set CCURV_COQ_DIR")
    return d


def _coq_flags(d: Path) -> list[str]:
    """``-Q``/``-R`` mappings (made absolute) and ``-arg`` options of the ``_CoqProject``."""
    tokens = (d / "_CoqProject").read_text().split()
    flags: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t in ("-Q", "-R") and i + 2 < len(tokens):
            flags += [t, str((d / tokens[i + 1]).resolve()), tokens[i + 2]]
            i += 3
        elif t == "-arg" and i + 1 < len(tokens):
            flags.append(tokens[i + 1])
            i += 2
        else:
            i += 1
    return flags


def build(jobs: int = 2, timeout: float = 900.0) -> BuildResult:
    """Run ``make -j<jobs>`` in ``proofs/coq`` (a no-op when every ``.vo`` is up to date).

    Raises :class:`CoqUnavailableError` (with the ``apt-get`` line) when ``coqc`` or ``make`` is
    missing and :class:`CoqBuildError` with Coq's output when a file does not compile.
    """
    d = _require_coq()
    if shutil.which("make") is None:
        raise CoqUnavailableError("make was not found on the PATH; apt-get install make")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["make", f"-j{int(jobs)}"], cwd=d, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CoqBuildError(f"make in {d} did not finish within {timeout:.0f} s") from exc
    out = p.stdout + p.stderr
    if p.returncode != 0:
        raise CoqBuildError(f"the Coq development in {d} did not compile:\n{out[-4000:]}")
    return BuildResult(coq_dir=d, seconds=time.perf_counter() - t0, output=out)


def parse_statements(text: str) -> list[tuple[str, str]]:
    """``[(qualified name, pinned statement)]`` from a statements file's text.

    >>> parse_statements("# c\\n== A.b.c\\nforall x,\\n  x = x\\n== A.b.d\\nTrue\\n")
    [('A.b.c', 'forall x,\\n  x = x'), ('A.b.d', 'True')]
    """
    out: list[tuple[str, str]] = []
    name: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") and name is None:
            continue
        if line.startswith("== "):
            if name is not None:
                out.append((name, "\n".join(body).strip()))
            name, body = line[3:].strip(), []
        elif name is not None:
            body.append(line)
    if name is not None:
        out.append((name, "\n".join(body).strip()))
    return out


def _theorem_id(stem: str) -> str:
    m = re.fullmatch(r"T0*(\d+)", stem)
    return f"T{int(m.group(1))}" if m else stem


def statement_pins(d: Path | None = None) -> dict[str, list[tuple[str, str]]]:
    """``{catalogue id: [(qualified name, pinned statement)]}`` from ``statements/*.txt``."""
    d = d or coq_dir()
    if d is None or not (d / "statements").is_dir():
        return {}
    pins: dict[str, list[tuple[str, str]]] = {}
    for f in sorted((d / "statements").glob("*.txt")):
        pins.setdefault(_theorem_id(f.stem), []).extend(parse_statements(f.read_text()))
    return pins


def formal_theorems() -> dict[str, list[str]]:
    """``{catalogue id: [qualified Coq names]}`` of the pinned theorems (``{}`` without sources).

    >>> all(n.startswith("CoupledCurvature.") for ns in formal_theorems().values() for n in ns)
    True
    """
    return {tid: [n for n, _ in ps] for tid, ps in statement_pins().items()}


def _norm(s: str) -> str:
    return " ".join(s.split())


def _parse_check(out: str) -> str:
    """The type part of Coq's ``name\\n     : type`` answer."""
    lines = out.strip("\n").splitlines()
    text = "\n".join(lines[1:]) if len(lines) > 1 else lines[0] if lines else ""
    text = text.strip()
    return text[1:].strip() if text.startswith(":") else text


def _parse_assumptions(out: str) -> tuple[str, ...]:
    if "Closed under the global context" in out:
        return ()
    names: list[str] = []
    started = False
    for line in out.splitlines():
        if line.strip() == "Axioms:":
            started = True
            continue
        if started and line and not line[0].isspace():
            names.append(line.split(" :", 1)[0].strip())
    return tuple(names)


def _axiom_allowed(name: str) -> bool:
    return any(a == name or a.endswith("." + name) for a in ALLOWED_AXIOMS)


def _module_of(name: str) -> str:
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != LOGICAL_ROOT:
        raise CoqBuildError(f"{name!r} is not a qualified name {LOGICAL_ROOT}.<Module>.<name>")
    return parts[1]


def _run_checks(d: Path, groups: dict[str, list[str]], tmp: Path) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Check and Print Assumptions for every name, in one coqc run.

    Each module's names are checked inside a Coq ``Module`` that imports only that module, so the
    printing context is the same as a file importing ``Defs`` and that module alone.  Unknown
    names come back as ``(None, ())``.
    """
    results: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    pending = {m: list(ns) for m, ns in groups.items()}
    flags = _coq_flags(d)
    while any(pending.values()):
        mods = [m for m, ns in pending.items() if ns]
        lines = PREAMBLE.rstrip("\n").splitlines()
        lines.append(f"From {LOGICAL_ROOT} Require {' '.join(mods)}.")
        line_of: dict[int, str] = {}
        files: list[tuple[str, int]] = []
        for gi, m in enumerate(mods):
            lines += [f"Module CCurvCheck{gi}.", f"Import {m}."]
            for n in pending[m]:
                k = len(files)
                files.append((n, k))
                lines.append(f'Redirect "c{k}" Check {n}.')
                line_of[len(lines)] = n
                lines.append(f'Redirect "a{k}" Print Assumptions {n}.')
                line_of[len(lines)] = n
            lines.append(f"End CCurvCheck{gi}.")
        src = tmp / "ccurv_check.v"
        src.write_text("\n".join(lines) + "\n")
        for old in tmp.glob("*.out"):
            old.unlink()
        p = subprocess.run(["coqc", *flags, src.name], cwd=tmp, capture_output=True, text=True,
                           timeout=900)
        if p.returncode == 0:
            for n, k in files:
                results[n] = (_parse_check((tmp / f"c{k}.out").read_text()),
                              _parse_assumptions((tmp / f"a{k}.out").read_text()))
            break
        err = p.stdout + p.stderr
        where = re.search(r"line (\d+), characters", err)
        bad = line_of.get(int(where.group(1))) if where else None
        if bad is None or "was not found" not in err:
            raise CoqBuildError(f"checking the pinned statements failed:\n{err[-3000:]}")
        results[bad] = (None, ())
        for ns in pending.values():
            if bad in ns:
                ns.remove(bad)
    return results


def check_statements(only: Iterable[str] | None = None,
                     pins: dict[str, list[tuple[str, str]]] | None = None) -> list[StatementCheck]:
    """Check every pinned statement (or those of the ids in ``only``) against the compiled development.

    Run :func:`build` first.  ``pins`` replaces the statements files (used by the negative
    control of the tests).  Raises :class:`CoqUnavailableError` without ``coqc``.
    """
    d = _require_coq()
    pins = statement_pins(d) if pins is None else pins
    wanted = None if only is None else {_theorem_id(t.upper()) for t in only}
    todo = [(tid, n, s) for tid, ps in pins.items() if wanted is None or tid in wanted
            for n, s in ps]
    groups: dict[str, list[str]] = {}
    for _, n, _ in todo:
        groups.setdefault(_module_of(n), [])
        if n not in groups[_module_of(n)]:
            groups[_module_of(n)].append(n)
    found: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    with tempfile.TemporaryDirectory(prefix="ccurv-coq-") as t:
        found.update(_run_checks(d, groups, Path(t)))
    out: list[StatementCheck] = []
    for tid, n, s in todo:
        printed, axioms = found[n]
        out.append(StatementCheck(
            theorem_id=tid, name=n, pinned=s, printed=printed,
            matches=printed is not None and _norm(printed) == _norm(s),
            axioms=axioms, axioms_allowed=all(_axiom_allowed(a) for a in axioms)))
    return out
