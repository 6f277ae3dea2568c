"""arb matrices as numpy object arrays: entry-wise ball arithmetic runs in numpy's C loops (each entry
still an arb ball, each operation arb's) instead of Python-level loops over entries."""

from __future__ import annotations

import numpy as np
from flint import arb, arb_mat

__all__ = ["ZERO", "Rows", "arr", "as_array", "as_mat", "mat"]

ZERO = arb(0)

#: activations and tangents in flight: an arb_mat, or its entries as a 2-D object array (element-wise
#: layers keep the array and products convert, so a chain of element-wise steps converts once)
Rows = arb_mat | np.ndarray


def as_array(m: arb_mat) -> np.ndarray:
    """The entries of ``m`` as a ``(rows, cols)`` object array of arb balls.

    >>> as_array(arb_mat([[1, 2]])).shape
    (1, 2)
    """
    out = np.empty(m.nrows() * m.ncols(), dtype=object)
    out[:] = m.entries()
    return out.reshape(m.nrows(), m.ncols())


def as_mat(a: np.ndarray, rows: int | None = None) -> arb_mat:
    """An object array of arb balls (or ints) as an arb_mat of ``rows`` rows (default ``a.shape[0]``).

    >>> as_mat(as_array(arb_mat([[1, 2], [3, 4]])).T).entries()[1]
    3.00000000000000
    """
    rows = a.shape[0] if rows is None else rows
    return arb_mat(rows, a.size // max(rows, 1), a.ravel().tolist())


def arr(x: Rows) -> np.ndarray:
    """``x`` as a 2-D object array (no copy when it is one)."""
    return x if isinstance(x, np.ndarray) else as_array(x)


def mat(x: Rows) -> arb_mat:
    """``x`` as an arb_mat (no copy when it is one).

    >>> mat(arr(arb_mat([[1, 2]]))).ncols()
    2
    """
    return x if isinstance(x, arb_mat) else as_mat(x)
