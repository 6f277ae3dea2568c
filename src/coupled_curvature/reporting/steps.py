"""How a checked step reads on a page: its general statement, a short identity, or an instance note.

A step of the catalogue holds SymPy objects (``lhs``, ``rhs``); printed as they are they show
internals (explicit 3×3 matrices entry by entry, ``matrixslice``, generated names such as
``L2_1``, ``= True``). :func:`step_view` decides what a person would write instead:

* the description, in Unicode mathematics (:func:`.umath.normalise`), is the general statement;
* ``lhs = rhs`` is shown as a formula only when it is small and written with symbols only
  (matrix symbols ``A``, ``H``, ``w``; no explicit matrix, no generated name);
* otherwise the step checked an instance (or a fact): the instance is summarised in words for a
  collapsible note (``<details>`` in HTML), never printed entry by entry.

>>> import sympy as sp
>>> c = sp.Symbol("c", positive=True)
>>> v = step_view("‖g'‖²/‖g‖² = c**(-2)", c**-2, c**-2)
>>> v.statement, v.latex == r"\\frac{1}{c^{2}} = \\frac{1}{c^{2}}"
("‖g'‖²/‖g‖² = c⁻²", True)
>>> step_view("A is conformal", sp.Matrix([[1, 2], [3, 4]]), sp.true).instance
'checked on an explicit instance: a fact about a 2×2 matrix, decided exactly'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sympy as sp
from sympy.logic.boolalg import BooleanAtom
from sympy.matrices.expressions import MatrixExpr

from coupled_curvature.reporting.umath import normalise

__all__ = ["StepView", "step_view", "presentable", "MAX_NODES"]

#: a formula shown inline has at most this many expression-tree nodes per side
MAX_NODES = 40
_GENERATED = re.compile(r"[A-Za-z]+\d|\d_\d|^d\d?ell|^ell_")
_GREEK_NAMES = {"alpha", "beta", "gamma", "delta", "epsilon", "theta", "kappa", "lambda", "mu", "rho", "sigma", "tau",
                "phi", "psi", "eta", "omega", "xi", "pi", "nu", "zeta", "chi", "iota", "ell"}
_NAMES = {"sigma": "σ", "ell": "ℓ", "dell": "∂ℓ", "d2ell": "∂²ℓ", "theta": "θ", "lambda": "λ", "tau": "τ"}


@dataclass(frozen=True)
class StepView:
    """What a renderer shows of one step: statement (Unicode), optional formula, optional instance note."""

    statement: str
    latex: str | None = None  # lhs = rhs as LaTeX, when presentable
    mathml: str | None = None  # the same as presentation MathML (inner of <math>)
    instance: str | None = None  # words for the collapsible instance details
    size: str | None = None  # the instance's size in a few words (a table cell): "2×2 matrices, 85 nodes"


def _nodes(e: Any) -> int:
    if isinstance(e, sp.MatrixBase):
        return sum(_nodes(x) for x in e) + 1
    if not isinstance(e, sp.Basic):
        return 1
    return sum(1 for _ in sp.preorder_traversal(e))


def presentable(e: Any) -> bool:
    """True for a small expression written with plain or matrix symbols only (no explicit matrix,
    slice, substitution or generated name).

    >>> import sympy as sp
    >>> presentable(sp.Symbol("c") ** -2), presentable(sp.Symbol("t11")), presentable(sp.eye(2))
    (True, False, False)
    """
    if isinstance(e, (bool, BooleanAtom)) or isinstance(e, str) or e is None:
        return False
    if isinstance(e, sp.MatrixBase) or not isinstance(e, sp.Basic):
        return False
    if _nodes(e) > MAX_NODES:
        return False
    for x in sp.preorder_traversal(e):
        if isinstance(x, (sp.MatrixBase, sp.Subs, sp.Derivative)) or type(x).__name__ in (
                "MatrixSlice", "MatrixElement", "At", "Indexed", "IndexedBase"):
            return False
        if isinstance(x, (sp.Symbol, sp.MatrixSymbol)) and _GENERATED.search(str(x.name) if hasattr(x, "name") else str(x)):
            return False
        if isinstance(x, sp.core.function.AppliedUndef) and _GENERATED.search(type(x).__name__):
            return False
    return True


#: a formula shown inline is at most this many visible symbols wide
MAX_WIDTH = 64


def _visible(tex: str) -> int:
    """Rough printed width of LaTeX: commands count one, braces and sizing nothing."""
    t = re.sub(r"\\(left|right)", "", tex)
    t = re.sub(r"\\frac", "", t)
    t = re.sub(r"\\[a-zA-Z]+", "x", t)
    return len(re.sub(r"[{}\s^_]", "", t))


def _folded(e: Any) -> Any:
    """``e`` with a reciprocal of a product that holds a reciprocal folded (``1/((1/c²)λ)`` as
    ``c²/λ``): a SymPy artefact of an unevaluated power, not how the identity is written."""
    def nested(x: Any) -> bool:
        return (isinstance(x, sp.Pow) and x.exp == -1 and isinstance(x.base, sp.Mul)
                and any(isinstance(a, sp.Pow) and a.exp.is_negative for a in x.base.args))
    try:
        return e.replace(nested, lambda x: sp.Pow(x.base, -1))
    except (AttributeError, TypeError):
        return e


def _latex(e: Any) -> str:
    """LaTeX of a step's side: multi-letter names upright (``\\mathrm{rtol}``, not a product
    ``r t o l``), nested reciprocals folded, ``(Aᵀ)⁻¹`` as ``A^{-T}``.

    >>> m, rtol, c = sp.symbols("m rtol c", positive=True)
    >>> _latex(-m * rtol / c**2), _latex(sp.Pow(c**-2 * m, -1, evaluate=False))
    ('- \\\\frac{m \\\\mathrm{rtol}}{c^{2}}', '\\\\frac{c^{2}}{m}')
    """
    e = _folded(e)
    names = {x: rf"\mathrm{{{x.name}}}" for x in getattr(e, "free_symbols", ())
             if isinstance(x, sp.Symbol) and re.fullmatch(r"[A-Za-z]{2,}", x.name) and x.name not in _GREEK_NAMES}
    tex = sp.latex(e, symbol_names=names) if names else sp.latex(e)
    tex = re.sub(r"\\left\(([A-Za-z])\^\{T\}\\right\)\^\{-1\}", r"\1^{-T}", tex)  # (Aᵀ)⁻¹ as A⁻ᵀ
    return re.sub(r"\\operatorname\{(sigma|ell)\}", lambda m: "\\" + m.group(1), tex)


def _mathml(e: Any) -> str:
    from sympy.printing.mathml import mathml

    out = mathml(e, printer="presentation")
    return re.sub(r"<mi>(sigma|ell|dell|d2ell|theta|lambda|tau)</mi>", lambda m: f"<mi>{_NAMES[m.group(1)]}</mi>", out)


def _shape(e: Any) -> str:
    if isinstance(e, (sp.MatrixBase, MatrixExpr)):
        r, c = e.shape
        if isinstance(r, (int, sp.Integer)) and isinstance(c, (int, sp.Integer)):
            return f"a {r}×{c} matrix"
        return "a matrix"
    return "a scalar expression"


def _instance(lhs: Any, rhs: Any, description: str) -> str:
    if isinstance(rhs, (bool, BooleanAtom)):
        what = "an explicit object" if lhs is None or isinstance(lhs, str) else _shape(lhs)
        return f"checked on an explicit instance: a fact about {what}, decided exactly"
    where = re.match(r"\s*(n\s*=\s*\d+|\d+(-\d+)+|instance [^:,]*)", description)
    size = max(_nodes(lhs), _nodes(rhs))
    how = "compared entry by entry" if isinstance(lhs, sp.MatrixBase) or isinstance(rhs, sp.MatrixBase) else "compared"
    return (f"checked on an explicit instance{' (' + where.group(1) + ')' if where else ''}: both sides are "
            f"{_shape(lhs)} written out in coordinates ({size} expression nodes), {how} exactly")


def _size(lhs: Any, rhs: Any) -> str:
    """Both sides' shape and expression size in a few words.

    >>> import sympy as sp
    >>> _size(sp.eye(2), sp.eye(2)), _size(sp.Symbol("x") + 1, sp.Integer(1))
    ('2×2 matrices, 5 nodes', 'scalars, 3 nodes')
    """
    shape = _shape(lhs)
    what = "scalars" if shape == "a scalar expression" else shape.removeprefix("a ").replace("matrix", "matrices")
    return f"{what}, {max(_nodes(lhs), _nodes(rhs))} nodes"


def _number(e: Any) -> bool:
    """A SymPy scalar without free symbols (``4/1``, ``(1/2)/1``): its display is arithmetic only."""
    return isinstance(e, sp.Expr) and not isinstance(e, MatrixExpr) and not e.free_symbols


def step_view(description: str, lhs: Any, rhs: Any) -> StepView:
    """The page form of a step ``description: lhs = rhs`` (see the module docstring)."""
    statement = normalise(description)
    if isinstance(rhs, (bool, BooleanAtom)) or isinstance(lhs, (bool, BooleanAtom)):
        fact = lhs if not isinstance(lhs, (bool, BooleanAtom)) else rhs
        if isinstance(fact, (sp.core.relational.Relational, sp.logic.boolalg.Boolean)) and presentable(fact) \
                and not isinstance(fact, BooleanAtom):
            return StepView(statement, _latex(fact), _mathml(fact))
        what = "an explicit object" if lhs is None or isinstance(lhs, str) else _shape(lhs).removeprefix("a ")
        return StepView(statement, instance=_instance(lhs, rhs, description), size=f"a fact about {what}")
    if isinstance(lhs, str) or isinstance(rhs, str):
        return StepView(statement, instance="checked by the independent checker on the certificate data "
                                             "(listed under Witnesses)", size="certificate data")
    if _number(lhs) and _number(rhs):  # 4/1 = 4: the statement already says the value
        return StepView(statement, instance="both sides are exact numbers, computed and compared exactly",
                        size="exact numbers")
    if presentable(lhs) and presentable(rhs):
        try:
            tex = f"{_latex(lhs)} = {_latex(rhs)}"
            if _visible(tex) <= MAX_WIDTH:
                return StepView(statement, tex, f"{_mathml(lhs)}<mo>=</mo>{_mathml(rhs)}")
            return StepView(statement, instance=f"the checked identity is {_visible(tex)} symbols long when written "
                                                "out; its two sides were compared exactly as computed",
                            size=_size(lhs, rhs))
        except Exception:  # noqa: BLE001 - a printing failure only loses the formula, never the step
            pass
    return StepView(statement, instance=_instance(lhs, rhs, description), size=_size(lhs, rhs))
