"""Exact parsing of user numbers and matrices: nothing a user passes is ever sympified.

``sympy.Matrix([["__import__('os')...", "0"]])`` evaluates its strings, so user input is
converted entry by entry with :class:`fractions.Fraction` (which parses, never evaluates)
**before** any SymPy object is built. Accepted entries: ``int``, ``fractions.Fraction``, SymPy
rationals, and strings that are plain numbers (``"3"``, ``"-2/7"``, ``"0.125"``, ``"1e-3"``).
Floats are refused: their binary value is rarely the number meant.

>>> exact_number("-2/7")
-2/7
>>> exact_matrix([[1, "1/2"], [0, 2]])
Matrix([
[1, 1/2],
[0,   2]])
"""
from __future__ import annotations

import numbers
import re
from fractions import Fraction
from typing import Any

import sympy as sp

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["exact_number", "exact_matrix", "exact_vector"]

#: a plain decimal or fraction literal; nothing else reaches Fraction()
_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,4})?(\s*/\s*[+-]?\d+)?\s*\Z")
_FIX = ("pass ints, fractions.Fraction, sympy.Rational, or strings such as '3', '-2/7', '0.125'; "
        "convert a float exactly with fractions.Fraction(x)")


def exact_number(x: Any, name: str = "value") -> sp.Rational:
    """``x`` as an exact ``sympy.Rational``, or ``InvalidInputError`` (strings are parsed, never evaluated).

    >>> exact_number(3), exact_number("0.25"), exact_number(Fraction(1, 3))
    (3, 1/4, 1/3)
    """
    if isinstance(x, bool):
        raise InvalidInputError(f"{name} must be a number, got the bool {x!r}; {_FIX}")
    if isinstance(x, sp.Basic):
        if x.is_Rational:
            return x
        raise InvalidInputError(f"{name} must be an exact rational, got the SymPy object {x!r}; {_FIX}")
    if isinstance(x, str):
        if len(x) > 200 or not _NUMBER.match(x):
            raise InvalidInputError(f"{name} must be a plain number, got the string {x[:60]!r}; {_FIX}")
        num, _, den = x.partition("/")
        try:
            q = Fraction(num.strip()) / Fraction(den.strip()) if den else Fraction(num.strip())
        except ZeroDivisionError:
            raise InvalidInputError(f"{name} {x!r} divides by zero; {_FIX}") from None
        return sp.Rational(q.numerator, q.denominator)
    if isinstance(x, (numbers.Integral, Fraction)):  # int, numpy integers, Fraction
        q = Fraction(int(x)) if isinstance(x, numbers.Integral) else x
        return sp.Rational(q.numerator, q.denominator)
    raise InvalidInputError(f"{name} must be an exact rational, got {type(x).__name__} {x!r:.60}; {_FIX}")


def _rows(A: Any, name: str) -> list[list[Any]]:
    if isinstance(A, sp.MatrixBase):
        return [list(A.row(i)) for i in range(A.rows)]
    if hasattr(A, "tolist") and not isinstance(A, (str, bytes)):  # numpy arrays
        A = A.tolist()
    if isinstance(A, (str, bytes)) or not isinstance(A, (list, tuple)):
        raise InvalidInputError(f"{name} must be a matrix: a sympy.Matrix or a list of rows, got {type(A).__name__}")
    if all(isinstance(r, (list, tuple)) for r in A) and A:
        return [list(r) for r in A]
    raise InvalidInputError(f"{name} must be a list of rows (lists), e.g. [[1, 0], [0, 2]]; got {A!r:.80}")


def exact_matrix(A: Any, name: str = "A", *, square: bool = True, min_size: int = 2) -> sp.Matrix:
    """``A`` as a SymPy matrix of exact rationals, converted entry by entry before SymPy sees it.

    ``square`` requires an ``n x n`` matrix with ``n >= min_size``.

    >>> exact_matrix([["1", "0"], ["0", "2"]]).det()
    2
    """
    rows = _rows(A, name)
    if len({len(r) for r in rows}) != 1 or not rows[0]:
        raise InvalidInputError(f"{name} must have rows of one common, non-zero length; got lengths {[len(r) for r in rows]}")
    entries = [[exact_number(x, f"{name}[{i}][{j}]") for j, x in enumerate(r)] for i, r in enumerate(rows)]
    M = sp.Matrix(entries)
    if square and (M.rows != M.cols or M.rows < min_size):
        raise InvalidInputError(f"{name} must be square with n >= {min_size}, got shape {M.shape}; pass an n x n matrix")
    return M


def exact_vector(v: Any, name: str = "w") -> sp.Matrix:
    """A column vector of exact rationals from a flat list or a ``sympy.Matrix`` column.

    >>> exact_vector(["1", 0]).T
    Matrix([[1, 0]])
    """
    if isinstance(v, sp.MatrixBase):
        if v.cols != 1:
            raise InvalidInputError(f"{name} must be a column vector, got shape {v.shape}")
        v = list(v)
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)) or not v:
        raise InvalidInputError(f"{name} must be a non-empty list of numbers, got {type(v).__name__}")
    return sp.Matrix([exact_number(x, f"{name}[{i}]") for i, x in enumerate(v)])
