"""Exact SymPy derivations of T1–T14, witnesses and certificates (never imports torch).

Public API
----------
``derive_all() -> dict[str, Derivation]``
    every theorem ``"T1"`` … ``"T14"``; ``Derivation.ok`` is true only when every step passed.
``derive(theorem_id: str) -> Derivation``
    one theorem (``InvalidInputError`` for an unknown id).
``witness(A: sympy.Matrix) -> Witness | None``
    ``None`` iff ``AᵀA = c²I``; otherwise exact rational ``(w, g, H)`` and
    ``factor = D'/D != 1`` where ``D = (wᵀHw/wᵀw)/‖g‖²``, ``w' = Aw``, ``g' = A⁻ᵀg``,
    ``H' = A⁻ᵀHA⁻¹``.
``certificate(n: int) -> dict``
    plain-data T4 certificate (``(wᵀMw)(gᵀNg) = (wᵀw)(gᵀg)`` forces ``M = c²I``).
``check_witness(data) -> bool``, ``check_certificate(data) -> bool``, ``check_pinv_witness(data) -> bool``
    the independent ``fractions.Fraction`` checker (:mod:`.checker`).
``Derivation``, ``Step``, ``Witness``
    data classes (:mod:`.derivation`).  A step's left side is the computation as performed, left
    unevaluated (quotients, products, derivatives, substitutions: :mod:`.unevaluated`); the exact
    test evaluates it before comparing, so the display never stands in for the mathematics.

>>> import sympy as sp
>>> W = witness(sp.Matrix([[1, 0], [0, 2]]))
>>> W.factor, check_witness(W.to_data())
(4, True)
"""
from __future__ import annotations

import importlib

from coupled_curvature import theorems as _registry
from coupled_curvature.symbolic.checker import check_certificate, check_pinv_witness, check_witness
from coupled_curvature.symbolic.derivation import Derivation, Step, Witness
from coupled_curvature.symbolic.group import certificate
from coupled_curvature.symbolic.witness import coupled_D, is_conformal, transform, witness

__all__ = [
    "derive_all", "derive", "THEOREMS", "witness", "certificate", "check_witness", "check_certificate",
    "check_pinv_witness", "Derivation", "Step", "Witness", "coupled_D", "transform", "is_conformal",
]

#: the theorem registry (:mod:`coupled_curvature.theorems`); ``THEOREMS[t].derivation`` is the
#: ``(module, function)`` producing the :class:`Derivation` of theorem ``t``
THEOREMS = _registry.THEOREMS


def derive(theorem_id: str) -> Derivation:
    """Build the derivation of one theorem, e.g. ``derive("T4").ok``.

    >>> derive("T1").ok
    True
    """
    mod, fn = _registry.get(theorem_id).derivation
    return getattr(importlib.import_module(f"coupled_curvature.symbolic.{mod}"), fn)()


def derive_all() -> dict[str, Derivation]:
    """All derivations keyed ``"T1"`` … ``"T14"`` (each records ``elapsed`` seconds).

    Returns:
        dict[str, Derivation]: ``{"T1": Derivation, …, "T14": Derivation}``, each derivation's steps, with their
        evidence and the instance
        checked; a step that fails is recorded (``Derivation.ok`` is then false), not raised.

    See also:
        :func:`~coupled_curvature.symbolic.witness.witness` (a map's witness against ``D``), ``ccurv check``.

    >>> ds = derive_all()            # doctest: +SKIP
    >>> all(d.ok for d in ds.values())  # doctest: +SKIP
    True
    """
    return {t: derive(t) for t in THEOREMS}
