"""Data classes of the symbolic layer: :class:`Step`, :class:`Derivation`, :class:`Witness`.

A :class:`Step` records an expression pair ``(lhs, rhs)``, the method that established
``lhs = rhs`` and the outcome, computed by actually running the method.  Methods:

* ``exact``        -- ``expand``/``cancel``/``Poly(...).is_zero`` on ``lhs - rhs`` (entrywise
  for matrices), i.e. rational-function identity;  ``lhs`` is shown as computed (unevaluated
  quotients, products, derivatives, substitutions: :mod:`.unevaluated`) and evaluated
  mechanically before the test, so the display never replaces the mathematics;
* ``groebner``     -- ideal membership decided by reduction modulo a Gröbner basis;
* ``certificate``  -- a plain-data certificate accepted by the independent checker
  (:mod:`coupled_curvature.symbolic.checker`);
* ``rewrite`` (printed ``rewrite:<rule>``) -- ``rhs`` is (the value of) ``lhs`` after applying a
  named rewrite rule, which is a declared hypothesis (see :mod:`coupled_curvature.symbolic.rules`).

A step's method is a :class:`~coupled_curvature.symbolic.methods.StepMethod` (a plain kind may be
given as its name, ``"exact"``, and becomes one).

Example:

>>> import sympy as sp
>>> x = sp.Symbol("x")
>>> d = Derivation("demo", "(x+1)^2 = x^2+2x+1", ["x is a complex number"])
>>> d.exact("square of a sum", (x + 1) ** 2, x**2 + 2 * x + 1).outcome
True
>>> d.ok
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
from sympy.logic.boolalg import BooleanAtom
from sympy.matrices.expressions import MatrixExpr, ZeroMatrix

from coupled_curvature.symbolic.evaluation import At, evaluate
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.theorems import get as get_theorem

__all__ = ["Step", "Derivation", "Witness", "derivation", "is_zero_exact", "exact_equal"]


def _scalar_zero(e: Any) -> bool:
    """Exact zero test of an evaluated scalar expression: ``expand`` then ``cancel`` then ``Poly``."""
    e = sp.sympify(e)
    if e.is_zero is True and e.is_number:
        return True
    e = sp.expand(e)
    if e == 0:
        return True
    e = sp.cancel(sp.together(e))
    if e == 0:
        return True
    # combine powers of a common base (x^a x^b = x^(a+b)) and retry; still an identity
    e2 = sp.expand(sp.powsimp(sp.expand_power_exp(e), combine="exp"))
    if e2 == 0:
        return True
    num, _den = sp.fraction(sp.cancel(sp.together(e2)))
    if not num.free_symbols:
        # a constant: decided only when rational (conservative: otherwise "not proved")
        return bool(num.is_Rational and num == 0)
    try:
        return sp.Poly(num).is_zero
    except (sp.PolynomialError, sp.polys.polyerrors.GeneratorsNeeded):  # pragma: no cover
        return False


def is_zero_exact(e: Any) -> bool:
    """True iff ``e`` (scalar or matrix, unevaluated forms allowed) is identically zero as a
    rational function.

    >>> import sympy as sp
    >>> a, b = sp.symbols("a b")
    >>> is_zero_exact((a + b) ** 2 - a**2 - 2 * a * b - b**2)
    True
    >>> is_zero_exact(sp.Matrix([a - a, b]))
    False
    """
    return _zero(evaluate(e))


def _zero(e: Any) -> bool:
    if isinstance(e, sp.MatrixBase):
        return all(_scalar_zero(x) for x in e)
    return _scalar_zero(e)


def exact_equal(lhs: Any, rhs: Any) -> bool:
    """``is_zero_exact(lhs - rhs)``, entrywise for matrices of equal shape.

    Unevaluated forms (:mod:`.unevaluated`: quotients, products, ``Derivative``, ``Subs``,
    :class:`~.unevaluated.Form`, unevaluated matrix products) are evaluated first; a false
    claim stays false however it is displayed.

    >>> import sympy as sp
    >>> from coupled_curvature.symbolic.unevaluated import frac
    >>> x = sp.Symbol("x")
    >>> exact_equal(x / (x + 1) + 1 / (x + 1), 1)
    True
    >>> exact_equal(frac(2 * x, x), 1), exact_equal(frac(2 * x, x), 2)
    (False, True)
    """
    if isinstance(lhs, (bool, BooleanAtom)) or isinstance(rhs, (bool, BooleanAtom)):
        return sp.sympify(lhs) is sp.sympify(rhs)
    lhs, rhs = evaluate(lhs), evaluate(rhs)
    if isinstance(lhs, sp.MatrixBase) and isinstance(rhs, sp.MatrixBase):
        lhs, rhs = sp.Matrix(lhs), sp.Matrix(rhs)
        if lhs.shape != rhs.shape:
            return False
        return _zero(lhs - rhs)
    if isinstance(lhs, (MatrixExpr, sp.MatrixBase)) or isinstance(rhs, (MatrixExpr, sp.MatrixBase)):
        if getattr(lhs, "shape", None) != getattr(rhs, "shape", None):
            return False
        # MatrixSymbol algebra: canonical form (associativity, scalar pull-out, A⁻¹A = I)
        diff = (lhs - rhs).doit()
        if isinstance(diff, sp.MatrixBase):
            return _zero(sp.Matrix(diff))
        return isinstance(diff, ZeroMatrix) or diff == 0
    return _zero(sp.sympify(lhs) - sp.sympify(rhs))


def _as_sympy(x: Any) -> Any:
    """Python integers become SymPy integers (so readers such as the proof catalogue re-check the step)."""
    return sp.Integer(x) if isinstance(x, int) and not isinstance(x, bool) else x


@dataclass
class Step:
    """One checked step: ``lhs = rhs`` established by ``method`` with result ``outcome``."""

    description: str
    lhs: Any
    rhs: Any
    method: StepMethod
    outcome: bool
    detail: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.method, StepMethod):
            self.method = StepMethod.of(self.method)

    def __str__(self) -> str:
        return self._render(True)

    def full_str(self) -> str:
        """Like ``str(step)`` but never abbreviates large expressions."""
        return self._render(False)

    def _render(self, brief: bool) -> str:
        mark = "ok " if self.outcome else "FAIL"
        sh = lambda e: _show_text(e, brief)
        s = f"[{mark}] ({self.method}) {self.description}: {sh(self.lhs)} = {sh(self.rhs)}"
        if self.detail:
            s += f"   # {self.detail}"
        return s

    def latex(self) -> str:
        """LaTeX of the step's identity, e.g. ``a = b \\quad\\text{(exact)}``; expressions with more than
        ``BRIEF_NODES`` nodes are abbreviated (``full_str`` gives them in full)."""
        return f"{_show_latex(self.lhs)} = {_show_latex(self.rhs)} \\quad \\text{{({self.method})}}"


#: expressions larger than this many tree nodes are abbreviated when printed
BRIEF_NODES = 250


def _size(e: Any, limit: int) -> int:
    if isinstance(e, sp.MatrixBase):
        tot = 0
        for x in e:
            tot += _size(x, limit - tot)
            if tot > limit:
                break
        return tot
    if not isinstance(e, sp.Basic):
        return 1
    k = 0
    for _ in sp.preorder_traversal(e):
        k += 1
        if k > limit:
            break
    return k


def _subs_parts(e: Any) -> tuple | None:
    """``(inner, variables, point)`` when ``e`` is ``Subs(…)`` or a matrix of ``Subs`` at one point."""
    if isinstance(e, (sp.Subs, At)):
        return e.expr, e.variables, e.point
    if isinstance(e, sp.MatrixBase) and len(e) and all(isinstance(x, (sp.Subs, At)) for x in e):
        first = e[0]
        if all(x.variables == first.variables and x.point == first.point for x in e):
            return e.applyfunc(lambda x: x.expr), first.variables, first.point
    return None


def _show_text(e: Any, brief: bool = True) -> str:
    """Text of one side: a matrix of substitutions at one point is shown once, ``Subs(Matrix, θ, θ')``;
    with ``brief``, expressions over ``BRIEF_NODES`` nodes are abbreviated."""
    if isinstance(e, sp.MatrixBase) and (parts := _subs_parts(e)) is not None:
        return f"Subs({_show_text(parts[0], brief)}, {sp.sstr(parts[1])}, {sp.sstr(parts[2])})"
    return (brief and _brief(e, _TEXT)) or sp.sstr(e)


def _show_latex(e: Any) -> str:
    if isinstance(e, sp.MatrixBase) and (parts := _subs_parts(e)) is not None:
        return f"\\left. {_show_latex(parts[0])} \\right|_{{{_points_latex(parts[1], parts[2])}}}"
    return _brief(e, _LATEX) or sp.latex(e)


def _points_latex(v: Any, p: Any) -> str:
    return ", ".join(f"{sp.latex(a)} = {sp.latex(b)}" for a, b in zip(v, p))


@dataclass(frozen=True)
class _Style:
    """How one output format writes a value, a substitution and the abbreviations of large expressions."""

    value: Callable[[Any], str]
    subs: Callable[[str, Any, Any], str]
    matrix: Callable[[tuple[int, int], str], str]
    large: str


_TEXT = _Style(sp.sstr, lambda inner, v, p: f"Subs({inner}, {sp.sstr(v)}, {sp.sstr(p)})",
               lambda shape, entry: f"<large {shape[0]}x{shape[1]} matrix expression, > {BRIEF_NODES} nodes; "
                                    f"entry (1,1): {entry}>",
               f"<large expression, > {BRIEF_NODES} nodes>")
_LATEX = _Style(sp.latex, lambda inner, v, p: f"\\left. {inner} \\right|_{{{_points_latex(v, p)}}}",
                lambda shape, entry: (f"\\langle\\text{{large {shape[0]}x{shape[1]} matrix expression, > {BRIEF_NODES} "
                                      f"nodes; entry (1,1): }}{entry}\\rangle"),
                f"\\langle\\text{{large expression, > {BRIEF_NODES} nodes}}\\rangle")


def _brief(e: Any, style: _Style) -> str | None:
    """An abbreviation of ``e`` if it has more than ``BRIEF_NODES`` nodes, else ``None``."""
    if _size(e, BRIEF_NODES) <= BRIEF_NODES:
        return None
    parts = _subs_parts(e)
    if parts is not None and _size(sp.Tuple(*parts[1], *parts[2]), BRIEF_NODES) <= BRIEF_NODES:
        inner, v, p = parts
        return style.subs(_brief(inner, style) or style.value(inner), v, p)
    if isinstance(e, sp.MatrixBase):
        first = e[0, 0]
        return style.matrix(e.shape, _brief(first, style) or style.value(first))
    return style.large


@dataclass
class Witness:
    """Exact rational witness of non-invariance of ``D`` under ``A``.

    ``w' = A w``, ``g' = A^{-T} g``, ``H' = A^{-T} H A^{-1}``,
    ``D = (wᵀHw / wᵀw) / ‖g‖²`` and ``factor = D'/D`` (an exact rational ``!= 1``).
    """

    A: sp.Matrix
    w: sp.Matrix
    g: sp.Matrix
    H: sp.Matrix
    factor: sp.Rational
    note: str = ""

    def to_data(self) -> dict:
        """Plain data (strings) for :func:`coupled_curvature.symbolic.checker.check_witness`."""
        return {
            "A": [[str(x) for x in self.A.row(i)] for i in range(self.A.rows)],
            "w": [str(x) for x in self.w],
            "g": [str(x) for x in self.g],
            "H": [[str(x) for x in self.H.row(i)] for i in range(self.H.rows)],
            "factor": str(self.factor),
        }

    def __str__(self) -> str:
        return (
            f"Witness(A={self.A.tolist()}, w={list(self.w)}, g={list(self.g)}, "
            f"H={self.H.tolist()}, D'/D={self.factor})" + (f"  # {self.note}" if self.note else "")
        )


@dataclass
class Derivation:
    """A theorem's machine-checked derivation: statement, hypotheses, steps, witnesses.

    ``ok`` is true only when there is at least one step and every step passed.
    """

    theorem: str
    statement: str
    hypotheses: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    witnesses: list[Any] = field(default_factory=list)
    elapsed: float = 0.0
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    @classmethod
    def for_theorem(cls, theorem_id: str, hypotheses: list[str] | None = None) -> "Derivation":
        """An empty derivation of a registered theorem, carrying the registry's statement.

        >>> d = Derivation.for_theorem("T12", ["s > 0"])
        >>> d.theorem, d.statement.startswith("Under L → sL")
        ('T12', True)
        """
        theorem = get_theorem(theorem_id)
        return cls(theorem.id, theorem.statement, list(hypotheses or []))

    # -- building -------------------------------------------------------------------------
    def assume(self, *hypotheses: str) -> None:
        """Declare ``hypotheses``: what the steps take as given."""
        self.hypotheses.extend(hypotheses)

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        return step

    def exact(self, description: str, lhs: Any, rhs: Any, detail: str = "") -> Step:
        """Add a step ``lhs = rhs`` decided by :func:`exact_equal`."""
        lhs, rhs = _as_sympy(lhs), _as_sympy(rhs)
        return self.add(Step(description, lhs, rhs, StepMethod.of(MethodKind.EXACT), exact_equal(lhs, rhs), detail))

    def rewrite(self, rule: Any, description: str, lhs: Any, rhs: Any, detail: str = "") -> Step:
        """Add a step: apply the named rule to ``lhs``; passes iff the result equals ``rhs`` exactly."""
        lhs, rhs = _as_sympy(lhs), _as_sympy(rhs)
        applied = rule(evaluate(lhs))  # the rule acts on the value of a shown (unevaluated) left side
        ok = exact_equal(applied, rhs)
        return self.add(Step(description, lhs, rhs, StepMethod.rewrite(rule.name), ok, detail))

    def finish(self) -> "Derivation":
        self.elapsed = time.perf_counter() - self._t0
        return self

    # -- reading --------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.outcome for s in self.steps)

    @property
    def rules_used(self) -> list[str]:
        return sorted({s.method.rule for s in self.steps if s.method.rule})

    def __str__(self) -> str:
        lines = [f"{self.theorem}: {self.statement}", "  hypotheses:"]
        lines += [f"    - {h}" for h in self.hypotheses]
        if self.rules_used:
            lines.append("  rewrite rules cited (declared hypotheses): " + ", ".join(self.rules_used))
        lines.append("  steps:")
        lines += [f"    {i + 1}. {s}" for i, s in enumerate(self.steps)]
        if self.witnesses:
            lines.append("  witnesses:")
            lines += [f"    - {w}" for w in self.witnesses]
        lines.append(f"  status: {'PROVED' if self.ok else 'NOT PROVED'} ({self.elapsed:.3f} s)")
        return "\n".join(lines)

    def latex(self) -> str:
        """LaTeX rendering: statement, then one ``align*`` row per step (via ``sympy.latex``)."""
        rows = " \\\\\n".join(
            f"& {s.latex()} && \\text{{{'✓' if s.outcome else '✗'} {_tex_escape(s.description)}}}"
            for s in self.steps
        )
        return (
            f"\\paragraph{{{self.theorem}}} {_tex_escape(self.statement)}\n"
            f"\\begin{{align*}}\n{rows}\n\\end{{align*}}"
        )


def derivation(theorem_id: str) -> Callable[[Callable[[Derivation], None]], Callable[[], Derivation]]:
    """Make ``steps(d)``, which adds a theorem's hypotheses and steps to ``d``, into ``derive() -> Derivation``.

    ``derive`` starts :meth:`Derivation.for_theorem` of ``theorem_id``, runs the steps and returns the
    derivation finished (timed); it keeps the name, docstring and module of ``steps``.

    >>> @derivation("T12")
    ... def derive_demo(d):
    ...     d.assume("s > 0")
    ...     d.exact("s·1 = s", sp.Symbol("s") * 1, sp.Symbol("s"))
    >>> derive_demo().ok, derive_demo.__name__, derive_demo().hypotheses
    (True, 'derive_demo', ['s > 0'])
    """

    def make(steps: Callable[[Derivation], None]) -> Callable[[], Derivation]:
        def derive() -> Derivation:
            d = Derivation.for_theorem(theorem_id)
            steps(d)
            return d.finish()

        derive.__name__, derive.__qualname__ = steps.__name__, steps.__qualname__
        derive.__doc__, derive.__module__ = steps.__doc__, steps.__module__
        return derive

    return make


def _tex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"), ("^", r"\^{}")):
        s = s.replace(a, b)
    return s
