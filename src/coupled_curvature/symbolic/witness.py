"""Witness generator for T4: exact rational ``(w, g, H)`` with ``D'/D != 1`` for ``A ∉ CO(n)``.

Action (T1): ``w' = A w``, ``g' = A⁻ᵀ g``, ``H' = A⁻ᵀ H A⁻¹``; ``D = (wᵀHw / wᵀw) / ‖g‖²``.
Construction, ``M = AᵀA``:

* some ``e_i`` is not an eigenvector of ``M``: ``w = g = e_i``, ``H = e_i e_iᵀ``, factor
  ``1 / (M_ii (M⁻¹)_ii) < 1``;
* else ``M`` is diagonal and non-scalar: ``w = e_i``, ``g = e_j`` with ``M_ii != M_jj``,
  ``H = e_i e_iᵀ``, factor ``M_jj / M_ii``.

>>> import sympy as sp
>>> W = witness(sp.Matrix([[1, 0], [0, 2]]))
>>> W.factor
4
>>> witness(sp.Matrix([[3, -4], [4, 3]])) is None
True
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from coupled_curvature.base.errors import CoupledCurvatureError, InvalidInputError
from coupled_curvature.symbolic.checker import check_witness
from coupled_curvature.symbolic.derivation import Derivation, Step, Witness, exact_equal
from coupled_curvature.symbolic.exact import exact_matrix, exact_vector
from coupled_curvature.symbolic.methods import MethodKind, StepMethod
from coupled_curvature.symbolic.unevaluated import frac

__all__ = ["witness", "witness_step", "coupled_D", "transform", "is_conformal"]


def _mat(A: Any, name: str) -> sp.Matrix:
    """A SymPy matrix as given (symbolic entries allowed); anything else through the exact parser."""
    return A if isinstance(A, sp.MatrixBase) else exact_matrix(A, name, min_size=1)


def _vec(v: Any, name: str) -> sp.Matrix:
    return v if isinstance(v, sp.MatrixBase) else exact_vector(v, name)


def coupled_D(w: sp.Matrix, g: sp.Matrix, H: sp.Matrix) -> Any:
    """``D = (wᵀHw / wᵀw) / (gᵀg)`` exactly.

    >>> import sympy as sp
    >>> coupled_D(sp.Matrix([1, 1]), sp.Matrix([0, 2]), sp.eye(2))
    1/4
    """
    w, g, H = _vec(w, "w"), _vec(g, "g"), _mat(H, "H")
    return (w.T * H * w)[0, 0] / (w.T * w)[0, 0] / (g.T * g)[0, 0]


def transform(A: sp.Matrix, w: sp.Matrix, g: sp.Matrix, H: sp.Matrix) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """``(A w, A⁻ᵀ g, A⁻ᵀ H A⁻¹)`` (T1 block action).

    >>> import sympy as sp
    >>> transform(sp.diag(2, 1), sp.Matrix([1, 0]), sp.Matrix([1, 0]), sp.eye(2))[1].T
    Matrix([[1/2, 0]])
    """
    A, w, g, H = _mat(A, "A"), _vec(w, "w"), _vec(g, "g"), _mat(H, "H")
    Ai = A.inv()
    return A * w, Ai.T * g, Ai.T * H * Ai


def is_conformal(A: sp.Matrix) -> bool:
    """Exact test ``AᵀA = c² I`` (``c² = (AᵀA)_11``).

    >>> import sympy as sp
    >>> is_conformal(sp.Matrix([[3, 4], [-4, 3]])), is_conformal(sp.diag(1, 2))
    (True, False)
    """
    A = _mat(A, "A")
    M = A.T * A
    return M == M[0, 0] * sp.eye(A.rows)


def witness(A: Any) -> Witness | None:
    """``None`` iff ``AᵀA = c² I``; otherwise a :class:`Witness` with ``factor = D'/D != 1``.

    ``A``: square (``n >= 2``), invertible, exact rational entries: a ``sympy.Matrix`` or a list of
    rows of ints, ``Fraction``s or number strings (parsed by :mod:`.exact`, never evaluated).

    Args:
        A: a square invertible matrix with exact rational entries: a SymPy ``Matrix`` or a list of rows of ints,
            ``Fraction``s or number strings (parsed, never evaluated).

    Returns:
        Witness | None: ``None`` when ``A`` is conformal (``AᵀA = c²I``); otherwise a witness, ``w``, ``g`` and ``H``
        where
        ``D`` moves under ``w ↦ Aw``, with ``factor = D'/D ≠ 1``.

    Raises:
        InvalidInputError: a matrix that is not square (``n ≥ 2``), not invertible, or not exact.

    See also:
        :func:`derive_all` (T5 and T6, which it makes concrete).

    >>> import sympy as sp
    >>> W = witness(sp.Matrix([[1, 1], [0, 1]]))   # a shear
    >>> W.w.T, W.g.T, W.factor                      # 1/(M_11 (M⁻¹)_11)
    (Matrix([[1, 0]]), Matrix([[1, 0]]), 1/2)
    """
    A = exact_matrix(A)
    if A.det() == 0:
        raise InvalidInputError("A must be invertible (det A = 0); witnesses are for A in GL(n)")
    n = A.rows
    if is_conformal(A):
        return None
    M = A.T * A
    e = lambda i: sp.Matrix([int(t == i) for t in range(n)])
    i = next((i for i in range(n) if any(M[j, i] != 0 for j in range(n) if j != i)), None)
    if i is not None:
        w = g = e(i)
        note = f"e_{i + 1} is not an eigenvector of AᵀA; factor = 1/(M_ii (M⁻¹)_ii)"
    else:
        j = next(j for j in range(1, n) if M[j, j] != M[0, 0])
        i = 0
        w, g = e(0), e(j)
        note = f"AᵀA diagonal, non-scalar: w = e_1, g = e_{j + 1}; factor = M_jj/M_ii"
    H = e(i) * e(i).T
    w2, g2, H2 = transform(A, w, g, H)
    factor = sp.Rational(coupled_D(w2, g2, H2) / coupled_D(w, g, H))
    if factor == 1:  # pragma: no cover - excluded by T4
        raise CoupledCurvatureError(f"internal error: no witness found for non-conformal {A}")
    return Witness(A, w, g, H, factor, note)


def witness_step(d: Derivation, desc: str, M: sp.MatrixBase) -> None:
    """A certificate step of ``d`` for the non-conformal ``M``: ``witness(M)`` exists (it joins ``d.witnesses``),
    the independent checker accepts it, and ``D'/D`` computed here is its factor; the step reads
    ``"{desc}: not conformal, witness w = …, g = …, H = …: D'/D = … (checker)"``.

    >>> import sympy as sp
    >>> d = Derivation.for_theorem("T4")
    >>> witness_step(d, "shear", sp.Matrix([[1, 1], [0, 1]]))
    >>> d.steps[-1].description, d.steps[-1].outcome, len(d.witnesses)
    ("shear: not conformal, witness w = [1, 0], g = [1, 0], H = [[1, 0], [0, 0]]: D'/D = 1/2 (checker)", True, 1)
    """
    W = witness(M)
    assert W is not None, "M is not conformal here, so it has a witness"
    d.witnesses.append(W)
    ratio = frac(coupled_D(*transform(W.A, W.w, W.g, W.H)), coupled_D(W.w, W.g, W.H))
    d.add(Step(f"{desc}: not conformal, witness w = {list(W.w)}, g = {list(W.g)}, H = {W.H.tolist()}: "
               f"D'/D = {W.factor} (checker)", ratio, W.factor, StepMethod.of(MethodKind.CERTIFICATE),
               (not is_conformal(M)) and check_witness(W.to_data()) and exact_equal(ratio, W.factor)))
