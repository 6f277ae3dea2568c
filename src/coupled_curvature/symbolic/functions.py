"""Undefined smooth functions whose derivatives are named functions (no ``Subs`` objects).

``smooth_function("ell", 2)`` returns a SymPy ``Function`` class ``ell`` with
``∂ell/∂y_i = ell_i`` and ``∂²ell/∂y_i∂y_j = ell_ij`` (``i <= j``: equality of mixed
partials is the C² hypothesis).  For one argument the names are ``f``, ``Df``, ``D2f``.
Derivatives of order above ``order`` are ordinary undefined-function derivatives.

>>> import sympy as sp
>>> x = sp.Symbol("x")
>>> ell = smooth_function("ell", 1)
>>> sp.diff(ell(x**2), x)
2*x*Dell(x**2)
"""
from __future__ import annotations

import sympy as sp

__all__ = ["smooth_function", "activation"]

_CACHE: dict[str, type] = {}


def _name(base: str, nargs: int, idx: tuple[int, ...]) -> str:
    if not idx:
        return base
    if nargs == 1:
        return ("D" if len(idx) == 1 else f"D{len(idx)}") + base
    return f"{base}_{''.join(str(i + 1) for i in idx)}"


def _make(base: str, nargs: int, idx: tuple[int, ...], order: int) -> type:
    name = _name(base, nargs, idx)
    key = f"{name}/{nargs}/{order}"
    if key in _CACHE:
        return _CACHE[key]
    if len(idx) >= order:
        cls = sp.Function(name, real=True)
    else:

        def fdiff(self, argindex=1):
            return _make(base, nargs, tuple(sorted(idx + (argindex - 1,))), order)(*self.args)

        cls = type(name, (sp.Function,), {"nargs": nargs, "fdiff": fdiff, "is_real": True})
    _CACHE[key] = cls
    return cls


def smooth_function(name: str, nargs: int = 1, order: int = 2) -> type:
    """A C^order function of ``nargs`` arguments with named partial derivatives.

    >>> import sympy as sp
    >>> y1, y2 = sp.symbols("y1 y2")
    >>> L = smooth_function("L", 2)
    >>> sp.diff(L(y1, y2), y2, y1)
    L_12(y1, y2)
    """
    return _make(name, nargs, (), order)


def activation(name: str = "sigma") -> tuple[type, type, type]:
    """``(σ, σ′, σ″)`` as named function classes, e.g. ``sigma, Dsigma, D2sigma``.

    >>> s, ds, dds = activation()
    >>> import sympy as sp; z = sp.Symbol("z")
    >>> sp.diff(s(3 * z), z, 2)
    9*D2sigma(3*z)
    """
    s = smooth_function(name, 1, 2)
    return s, _make(name, 1, (0,), 2), _make(name, 1, (0, 0), 2)
