"""Evaluation: the substitution form ``At`` and :func:`evaluate`, the exact value of a form.

:func:`at` builds ``expr`` at a point, unevaluated (printed ``Subs(expr, θ, θ')``, entrywise for
matrices). :func:`evaluate` turns a form of :mod:`coupled_curvature.symbolic.unevaluated` (or
``At``) back into the object it denotes, using only mechanical operations: re-building with
evaluation (``doit``), differentiation, simultaneous substitution, matrix products and inverses
of explicit matrices, and the bilinear scalar pull-out of
:func:`~coupled_curvature.symbolic.unevaluated.quadratic_scalar` (plain unevaluated ``+``, ``×``,
``**`` are left to the ``expand`` of the zero test).  Sums, products, integrals and limits are
never evaluated (their closed forms are not exact methods): an expression containing one is
returned unchanged, so a claim about it stays unproved unless both sides are the same object.

>>> import sympy as sp
>>> from coupled_curvature.symbolic.unevaluated import Form, matmul
>>> n = sp.Symbol("n", integer=True, positive=True)
>>> w, H = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("H", n, n)
>>> c = sp.Symbol("c", positive=True)
>>> evaluate(Form(matmul(sp.Transpose(matmul(c, w)), matmul(c**-2, H), matmul(c, w))))
[w.T*H*w]
"""
from __future__ import annotations

from typing import Any

import sympy as sp
from sympy.matrices.expressions import MatrixExpr
from sympy.matrices.expressions.matexpr import MatrixElement

from coupled_curvature.symbolic.rules import rebuild
from coupled_curvature.symbolic.unevaluated import Form, Quotient, TexSymbol, explicit_inverses

__all__ = ["At", "at", "evaluate"]

#: evaluating these would call SymPy's closed-form algorithms (heuristics, not exact methods)
_NOT_EXACT = (sp.Sum, sp.Product, sp.Integral, sp.Limit)


class At(sp.Expr):
    """``expr`` at the point ``variables = point`` (simultaneous substitution), unevaluated;
    printed like SymPy's ``Subs``.  Built by :func:`at`; cheaper to construct than ``Subs``.

    >>> import sympy as sp
    >>> x, c = sp.symbols("x c")
    >>> At(x**2, (x,), (c * x,)).doit()
    c**2*x**2
    """

    is_commutative = True

    def __new__(cls, expr: Any, variables: Any, point: Any) -> "At":
        variables, point = sp.Tuple(*variables), sp.Tuple(*point)
        if len(variables) != len(point) or len(set(variables)) != len(variables):
            raise ValueError("At needs distinct variables and one point value per variable")
        if not all(isinstance(v, sp.Symbol) for v in variables):
            raise ValueError("At substitutes symbols only")
        return sp.Expr.__new__(cls, sp.sympify(expr), variables, point)

    expr = property(lambda self: self.args[0])
    variables = property(lambda self: self.args[1])
    point = property(lambda self: self.args[2])

    def doit(self, **hints: Any) -> Any:
        inner = self.expr
        if inner.has(*_NOT_EXACT):
            return self  # bound variables and non-exact closed forms: left as an opaque quantity
        if inner.has(*_DEFERRED):
            inner = _evaluate_scalar(inner)
        named = [TexSymbol._SHOWN.get(t.name) for t in inner.atoms(TexSymbol)]
        if any(set(self.variables) & getattr(x, "free_symbols", set()) for x in named):
            return self  # a variable hidden inside a symbol's name cannot be substituted: opaque
        if inner.has(sp.Derivative):  # a derivative at a point: SymPy's own Subs rules
            return sp.Subs(inner, self.variables, self.point).doit()
        return _normalise_args(inner.xreplace(dict(zip(self.variables, self.point))))

    def _sympystr(self, printer: Any) -> str:
        return f"Subs({printer._print(self.expr)}, {printer._print(self.variables)}, {printer._print(self.point)})"

    def _mathml_presentation(self, printer: Any) -> Any:
        dom = printer.dom

        def mo(text: str) -> Any:
            op = dom.createElement("mo")
            op.appendChild(dom.createTextNode(text))
            return op

        body = dom.createElement("mrow")
        body.appendChild(printer._print(self.expr))
        body.appendChild(mo("|"))
        pts = dom.createElement("mrow")
        for k, (v, p) in enumerate(zip(self.variables, self.point)):
            for part in ([mo(",")] if k else []) + [printer._print(v), mo("="), printer._print(p)]:
                pts.appendChild(part)
        sub = dom.createElement("msub")
        sub.appendChild(body)
        sub.appendChild(pts)
        return sub

    def _latex(self, printer: Any) -> str:
        pts = ", ".join(f"{printer._print(v)} = {printer._print(p)}" for v, p in zip(self.variables, self.point))
        return rf"\left. {printer._print(self.expr)} \right|_{{{pts}}}"


def at(expr: Any, sub: dict) -> Any:
    """``expr`` at the point ``sub`` (``{symbol: value}``, restricted to the symbols that occur),
    unevaluated (:class:`At`), entrywise for matrices.

    >>> import sympy as sp
    >>> x, c = sp.symbols("x c")
    >>> s = at(x**2, {x: c * x})
    >>> s, evaluate(s)
    (Subs(x**2, (x,), (c*x,)), c**2*x**2)
    """
    free = set(expr.free_symbols)
    for t in expr.atoms(TexSymbol):  # symbols that stand for an expression: count what they stand for
        free |= getattr(TexSymbol._SHOWN.get(t.name), "free_symbols", set())
    keys = tuple(k for k in sub if k in free)  # only the variables that occur
    vals = tuple(sub[k] for k in keys)
    if isinstance(expr, sp.MatrixBase):
        return sp.ImmutableMatrix(expr.rows, expr.cols, [At(x, keys, vals) for x in expr])
    return At(expr, keys, vals)


def _normalise_args(e: Any) -> Any:
    """Expand the arguments of applied functions (exact normal form of polynomial arguments)."""

    def norm(x: Any) -> Any:
        if isinstance(x, sp.Function) and not isinstance(x, sp.Abs) and all(isinstance(a, sp.Expr) for a in x.args):
            return x.func(*[sp.expand(a) for a in x.args])
        return x

    return rebuild(e, norm) if e.has(sp.Function) else e


#: node types whose value needs ``doit`` (plain arithmetic is evaluated by ``expand`` anyway)
_DEFERRED = (sp.Derivative, sp.Subs, sp.UnevaluatedExpr, sp.Trace, sp.Determinant, MatrixElement, At, Form, Quotient)


def _evaluate_scalar(e: Any) -> Any:
    if not isinstance(e, sp.Basic) or e.is_Atom:
        return e
    if isinstance(e, At):
        return e.doit()
    if not e.has(*_DEFERRED) or e.has(*_NOT_EXACT):
        return e  # plain (possibly unevaluated) arithmetic: ``expand`` evaluates it in the zero test
    if e.has(At):
        e = e.replace(lambda x: isinstance(x, At), lambda x: x.doit())
    return explicit_inverses(e).doit()


def evaluate(e: Any) -> Any:
    """The object an unevaluated form denotes (see module docstring); plain values pass through.

    >>> import sympy as sp
    >>> from coupled_curvature.symbolic.unevaluated import frac
    >>> x = sp.Symbol("x")
    >>> evaluate(sp.Matrix([sp.Derivative(x**3, x), frac(x, x)]))
    Matrix([
    [3*x**2],
    [     1]])
    """
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(_evaluate_scalar)
    if isinstance(e, MatrixExpr):
        if e.has(*_NOT_EXACT):
            return e
        if e.has(At):
            e = e.replace(lambda x: isinstance(x, At), lambda x: x.doit())
        out = explicit_inverses(e).doit()
        if isinstance(out, MatrixExpr) and not out.has(sp.MatrixSymbol):  # built from explicit matrices only
            if isinstance(out, sp.BlockDiagMatrix):  # entrywise as_explicit is slow for block matrices
                return sp.ImmutableMatrix(sp.diag(*[evaluate(b) for b in out.diag]))
            out = out.as_explicit()
        return out
    return _evaluate_scalar(e)
