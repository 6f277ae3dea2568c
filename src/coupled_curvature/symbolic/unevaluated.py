"""Unevaluated forms that show a step's claim as computed.

A step ``lhs = rhs`` should show *what was computed* (``D'/D`` as a quotient of the two
defining expressions, ``(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw)``, ``∂/∂t L(tw)`` at ``t = 1``), not the value it
evaluates to.  The builders here never evaluate; the substitution form ``At`` and
:func:`~coupled_curvature.symbolic.evaluation.evaluate`, which turns a form back into the object
it denotes, are in :mod:`coupled_curvature.symbolic.evaluation`.

* :func:`frac` (:class:`Quotient`), :func:`prod` -- unevaluated ``a / b`` and ``a·b·…``;
* :func:`matmul` -- unevaluated matrix product (``MatMul(..., evaluate=False)``);
* :class:`Form` -- a ``1×1`` matrix expression read as a scalar, printed ``[wᵀHw]``;
* :class:`PseudoInverse` -- unevaluated ``X⁺`` of an explicit matrix;
* :func:`quadratic_scalar` -- ``coeff·[word]`` for a product of matrix symbols;
* :class:`TexSymbol` -- a scalar symbol printed in LaTeX/MathML as what it stands for (``w^Tw``);
* :func:`explicit_inverses` -- ``Inverse(X)`` of explicit matrices replaced by ``X.inv()``.

>>> import sympy as sp
>>> from coupled_curvature.symbolic.evaluation import evaluate
>>> x = sp.Symbol("x")
>>> q = frac(2 * x, x)
>>> q, evaluate(q)
(2*x/x, 2)
>>> n = sp.Symbol("n", integer=True, positive=True)
>>> w, H = sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("H", n, n)
>>> c = sp.Symbol("c", positive=True)
>>> f = Form(matmul(sp.Transpose(matmul(c, w)), matmul(c**-2, H), matmul(c, w)))
>>> f, evaluate(f)
([(c*w).T*(c**(-2)*H)*(c*w)], [w.T*H*w])
"""
from __future__ import annotations

from typing import Any

import sympy as sp
from sympy.matrices.expressions import MatMul, MatrixExpr
from sympy.printing.precedence import PRECEDENCE, precedence


__all__ = ["Quotient", "frac", "prod", "matmul", "Form", "PseudoInverse", "TexSymbol", "quadratic_scalar",
           "explicit_inverses"]

class Quotient(sp.Expr):
    """Unevaluated ``num / den``, printed ``(num)/(den)`` (``\\frac`` in LaTeX); ``doit()`` divides.

    >>> import sympy as sp
    >>> q = Quotient(sp.Rational(5, 6), sp.Rational(1, 2))
    >>> q, q.doit()
    ((5/6)/(1/2), 5/3)
    """

    is_commutative = True
    precedence = PRECEDENCE["Mul"]

    def __new__(cls, num: Any, den: Any) -> "Quotient":
        return sp.Expr.__new__(cls, sp.sympify(num), sp.sympify(den))

    def doit(self, **hints: Any) -> Any:
        num, den = (a.doit(**hints) for a in self.args) if hints.get("deep", True) else self.args
        return num / den

    def _sympystr(self, printer: Any) -> str:
        (a, b), mul = self.args, PRECEDENCE["Mul"]
        frac_like = lambda x: isinstance(x, Quotient) or (x.is_Rational and not x.is_Integer)
        num, den = printer._print(a), printer._print(b)
        num = f"({num})" if precedence(a) < mul or frac_like(a) else num
        den = f"({den})" if precedence(b) <= mul or frac_like(b) or (b.is_Number and b < 0) else den
        return f"{num}/{den}"

    def _latex(self, printer: Any) -> str:
        num, den = (printer._print(a) for a in self.args)
        return rf"\frac{{{num}}}{{{den}}}"

    def _mathml_presentation(self, printer: Any) -> Any:
        f = printer.dom.createElement("mfrac")
        for a in self.args:
            f.appendChild(printer._print(a))
        return f


def frac(num: Any, den: Any) -> Quotient:
    """Unevaluated ``num / den`` (no cancellation): a :class:`Quotient`.

    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> frac(x, x), frac(x, x).doit()
    (x/x, 1)
    """
    return Quotient(num, den)


def prod(*factors: Any) -> sp.Expr:
    """Unevaluated product ``f_1·f_2·…``.

    >>> import sympy as sp
    >>> c = sp.Symbol("c")
    >>> prod(c, c**-1).doit()
    1
    """
    return sp.Mul(*[sp.sympify(f) for f in factors], evaluate=False)


def _operand(x: Any) -> Any:
    """``x`` as an argument of an unevaluated expression: an explicit matrix made immutable, else sympified."""
    return sp.ImmutableMatrix(x) if isinstance(x, sp.MatrixBase) else sp.sympify(x)


def matmul(*factors: Any) -> MatrixExpr:
    """Unevaluated matrix product (scalars are kept where they stand).

    >>> import sympy as sp
    >>> n = sp.Symbol("n", integer=True, positive=True)
    >>> A, w = sp.MatrixSymbol("A", n, n), sp.MatrixSymbol("w", n, 1)
    >>> matmul(A.I, A, w), matmul(A.I, A, w).doit()
    (A**(-1)*A*w, w)
    """
    return MatMul(*map(_operand, factors), evaluate=False)


class TexSymbol(sp.Symbol):
    """A scalar symbol that names a quantity (``w^Tw``, ``[w.T*H*w]``) and prints, in LaTeX and
    MathML, as the expression ``shown`` it stands for (SymPy would read ``^`` in the name as a
    superscript).  Equal iff name and assumptions are equal: ``shown`` is presentation only.

    >>> import sympy as sp
    >>> n = sp.Symbol("n", integer=True, positive=True)
    >>> w = sp.MatrixSymbol("w", n, 1)
    >>> s = TexSymbol("w^Tw", w.T * w, positive=True)
    >>> str(s), sp.latex(2 * s)
    ('w^Tw', '2 w^{T} w')
    """

    _SHOWN: dict[str, Any] = {}

    def __new__(cls, name: str, shown: Any = None, **assumptions: Any) -> "TexSymbol":
        if shown is not None:
            cls._SHOWN[name] = shown
        return super().__new__(cls, name, **assumptions)

    def _latex(self, printer: Any) -> str:
        shown = TexSymbol._SHOWN.get(self.name)
        return printer._print(shown) if shown is not None else printer._print_Symbol(self)

    def _mathml_presentation(self, printer: Any) -> Any:
        shown = TexSymbol._SHOWN.get(self.name)
        return printer._print(shown) if shown is not None else printer._print_Symbol(self)


def quadratic_scalar(e: Any) -> Any:
    """Scalar form of a 1×1 matrix-symbol product: ``coeff · [word]`` (bilinearity).

    ``[word]`` is a real symbol, positive for a Gram word ``XᵀX`` (``X != 0``).

    >>> import sympy as sp
    >>> n = sp.Symbol("n", integer=True, positive=True)
    >>> w = sp.MatrixSymbol("w", n, 1); c = sp.Symbol("c", positive=True)
    >>> quadratic_scalar((c * w).T * (c * w))
    c**2*[w.T*w]
    """
    e = e.doit()
    if isinstance(e, sp.MatrixBase):
        return e[0, 0]
    coeff, mm = e.as_coeff_mmul() if isinstance(e, MatMul) else (sp.Integer(1), e)
    mats = mm.atoms(sp.MatrixSymbol)
    scalars = mm.free_symbols - mats - set().union(*(m.free_symbols - {m} for m in mats))
    if scalars:  # a scalar left inside the word would be hidden in the symbol's name
        raise ValueError(f"quadratic_scalar: {sp.sstr(mm)} is not a product of matrix symbols (contains {scalars})")
    args: tuple[Any, ...] = mm.args if isinstance(mm, MatMul) else (mm,)
    gram = len(args) == 2 and isinstance(args[0], sp.Transpose) and args[0].arg == args[1]
    name, shown = f"[{sp.sstr(mm)}]", Form(mm)
    sym = TexSymbol(name, shown, positive=True) if gram else TexSymbol(name, shown, real=True)
    return coeff * sym


class Form(sp.Expr):
    """A ``1×1`` matrix expression read as a scalar, printed ``[…]``; ``doit()`` evaluates it
    (:func:`quadratic_scalar` for matrix symbols, the single entry for explicit matrices).

    >>> import sympy as sp
    >>> Form(matmul(sp.Matrix([[1, 2]]), sp.Matrix([3, 4]))).doit()
    11
    """

    is_commutative = True

    def __new__(cls, arg: Any) -> "Form":
        arg = _operand(arg)
        if getattr(arg, "shape", None) != (1, 1):
            raise ValueError(f"Form needs a 1x1 matrix expression, got shape {getattr(arg, 'shape', None)}")
        return sp.Expr.__new__(cls, arg)

    @property
    def arg(self) -> Any:
        return self.args[0]

    def doit(self, **hints: Any) -> Any:
        return quadratic_scalar(explicit_inverses(self.arg).doit(**hints))

    def _eval_is_real(self) -> bool:
        return True

    def _sympystr(self, printer: Any) -> str:
        return f"[{printer._print(self.arg)}]"

    def _latex(self, printer: Any) -> str:
        return rf"\left[{printer._print(self.arg)}\right]"

    def _mathml_presentation(self, printer: Any) -> Any:
        row = printer.dom.createElement("mrow")
        for part in ("[", self.arg, "]"):
            if isinstance(part, str):
                mo = printer.dom.createElement("mo")
                mo.appendChild(printer.dom.createTextNode(part))
                row.appendChild(mo)
            else:
                row.appendChild(printer._print(part))
        return row


class PseudoInverse(MatrixExpr):
    """Unevaluated Moore–Penrose pseudo-inverse ``X⁺``; ``doit()`` computes it for an explicit
    matrix (``Matrix.pinv``, exact on rationals).

    >>> import sympy as sp
    >>> P = PseudoInverse(sp.Matrix([[2, 0], [0, 0]]))
    >>> P.shape, P.doit()
    ((2, 2), Matrix([
    [1/2, 0],
    [  0, 0]]))
    """

    def __new__(cls, arg: Any) -> "PseudoInverse":
        return sp.Basic.__new__(cls, _operand(arg))

    @property
    def arg(self) -> Any:
        return self.args[0]

    @property
    def shape(self) -> tuple:
        return (self.arg.shape[1], self.arg.shape[0])

    def doit(self, **hints: Any) -> Any:
        a = explicit_inverses(self.arg).doit(**hints) if hints.get("deep", True) else self.arg
        if isinstance(a, MatrixExpr) and not a.has(sp.MatrixSymbol):
            a = a.as_explicit()
        if isinstance(a, sp.MatrixBase):
            return sp.ImmutableMatrix(sp.Matrix(a).pinv())
        return PseudoInverse(a)

    def _entry(self, i: Any, j: Any, **kwargs: Any) -> Any:
        return self.doit()[i, j]

    def _sympystr(self, printer: Any) -> str:
        return f"pinv({printer._print(self.arg)})"

    def _latex(self, printer: Any) -> str:
        return rf"\left({printer._print(self.arg)}\right)^{{+}}"


def explicit_inverses(e: Any) -> Any:
    """Replace ``Inverse(X)`` of explicit matrices by ``X.inv()`` (exact Gauss–Jordan; SymPy's
    ``Inverse.doit`` takes a much slower route for symbolic entries)."""
    if not e.has(sp.Inverse):
        return e

    def inv(x: Any) -> Any:
        a = x.arg.doit()
        a = a.as_explicit() if isinstance(a, MatrixExpr) else a
        return sp.ImmutableMatrix(sp.Matrix(a).inv())

    return e.replace(lambda x: isinstance(x, sp.Inverse) and not x.has(sp.MatrixSymbol), inv)
