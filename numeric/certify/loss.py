"""Softmax cross-entropy and mean-squared error in arb: value, output gradient and output curvature.

``L = scale·Σ_n ℓ(f_n, y_n)`` with ``scale = 1/N`` (CrossEntropyLoss, mean), ``1/(N·C)`` (MSELoss, mean)
or 1 (sum). The output Hessian of sample ``n`` is ``S_n = diag(p) − ppᵀ`` (cross-entropy, ``p`` the
softmax, with rigorous exp and log) or ``2I`` (squared error), factored as ``S_n = A_nᵀA_n`` with
``A_n ḟ = √p ⊙ (ḟ − pᵀḟ)`` or ``√2·ḟ``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from flint import arb, arb_mat
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.certify.arrays import Rows, arr, as_array, as_mat
from coupled_curvature.numeric.core.inputs import loss_reduction

__all__ = ["ArbLoss", "check_loss"]


def check_loss(loss_fn: Callable) -> str:
    """``"ce"`` or ``"mse"``, or an ``InvalidInputError`` naming what certify takes.

    >>> check_loss(nn.MSELoss(reduction="sum"))
    'mse'
    """
    if isinstance(loss_fn, nn.CrossEntropyLoss):
        if loss_fn.weight is not None or loss_fn.label_smoothing != 0.0:
            raise InvalidInputError("certify takes CrossEntropyLoss without class weights or label smoothing")
        kind = "ce"
    elif isinstance(loss_fn, nn.MSELoss):
        kind = "mse"
    else:
        raise InvalidInputError(f"certify takes nn.CrossEntropyLoss or nn.MSELoss, got {type(loss_fn).__name__}; "
                                "its loss is computed in ball arithmetic and must be one it knows")
    loss_reduction(loss_fn)  # refuses reduction='none'
    return kind


class ArbLoss:
    """The loss of outputs ``f`` (``N × C`` arb_mat) against targets ``y`` (a tensor). Entry-wise steps
    run on object arrays of balls (:mod:`.arrays`): each entry is still one arb operation."""

    def __init__(self, loss_fn: nn.Module, f: arb_mat, y: torch.Tensor):
        self.kind = check_loss(loss_fn)
        self.N, self.C = f.nrows(), f.ncols()
        mean = loss_reduction(loss_fn) == "mean"
        F = as_array(f)
        if self.kind == "ce":
            labels = np.array([int(v) for v in y.reshape(-1).tolist()], dtype=np.int64)
            if len(labels) != self.N or ((labels < 0) | (labels >= self.C)).any():
                raise InvalidInputError(f"CrossEntropyLoss targets must be {self.N} labels in 0..{self.C - 1}")
            self.scale = arb(1) / self.N if mean else arb(1)
            # an exact shift per sample (any exact m gives log Σ exp(f) = m + log Σ exp(f − m)): no overflow
            shift = np.empty(self.N, dtype=object)
            shift[:] = [arb(max(v.mid() for v in row)) for row in F]
            E = _EXP(F - shift[:, None])
            z = E.sum(axis=1)
            self.P = E / z[:, None]
            picked = F[np.arange(self.N), labels]
            self.value = (_LOG(z) + shift - picked).sum() * self.scale
            onehot = np.zeros((self.N, self.C), dtype=object)  # Python ints 0 and 1: exact
            onehot[np.arange(self.N), labels] = 1
            grad = (self.P - onehot) * self.scale
            self._root_p: np.ndarray | None = None
        else:
            t = y.double().reshape(self.N, -1).tolist()
            if len(t[0]) != self.C:
                raise InvalidInputError(f"MSELoss targets must have the outputs' shape ({self.N}, {self.C})")
            self.scale = arb(1) / (self.N * self.C) if mean else arb(1)
            diff = F - as_array(arb_mat(t))
            self.value = (diff * diff).sum() * self.scale
            grad = diff * (2 * self.scale)
        self.grad = as_mat(grad)

    def factor_array(self, df: Rows) -> np.ndarray:
        """``A_n ḟ`` for every direction and sample as a ``(K, N, C)`` object array, so that
        ``ḟᵀ∇²ℓḟ = Σ_c (A_n ḟ)_c²`` (``∇²ℓ`` without ``scale``)."""
        D = arr(df).reshape(-1, self.N, self.C)
        if self.kind == "mse":
            return D * arb(2).sqrt()
        if self._root_p is None:
            self._root_p = _SQRT(self.P)
        pd = (D * self.P).sum(axis=2)
        return self._root_p * (D - pd[:, :, None])

    def factor_seed(self) -> np.ndarray:
        """The rows of ``A_n`` as output cotangents, ``(C·N) × C`` direction-major: row ``(c, n)`` is
        ``√p_c(e_c − p)`` (cross-entropy) or ``√2·e_c``, so that ``(A_nḟ)_c`` is its dot with ``ḟ_n``."""
        eye = np.zeros((self.C, 1, self.C), dtype=object)
        eye[np.arange(self.C), 0, np.arange(self.C)] = 1
        if self.kind == "mse":
            return np.broadcast_to(eye * arb(2).sqrt(), (self.C, self.N, self.C)).reshape(-1, self.C)
        if self._root_p is None:
            self._root_p = _SQRT(self.P)
        return (self._root_p.T[:, :, None] * (eye - self.P[None])).reshape(-1, self.C)

    def factor_rows(self, df: Rows) -> arb_mat:
        """``A_n ḟ`` for every direction and sample: ``(K·N·C) × 1`` (direction-major)."""
        rows = self.factor_array(df)
        return as_mat(rows, rows.size)

    def curvature(self, dfs: list[Rows]) -> list[arb]:
        """``Σ_n ḟ_nᵀ ∇²L ḟ_n`` per direction of each ``df`` in ``dfs`` (each ``K·N × C``): the second
        derivative of ``L`` along a direction in which the outputs move affinely; for cross-entropy
        ``Σ_c p_c(ḟ_c − pᵀḟ)²`` (no square roots)."""
        D = np.concatenate([arr(df).reshape(-1, self.N, self.C) for df in dfs])
        if self.kind == "mse":
            sq = D * D * 2
        else:
            Y = D - (D * self.P).sum(axis=2)[:, :, None]
            sq = Y * Y * self.P
        return [v * self.scale for v in sq.reshape(sq.shape[0], -1).sum(axis=1)]


_EXP = np.frompyfunc(lambda v: v.exp(), 1, 1)
_LOG = np.frompyfunc(lambda v: v.log(), 1, 1)
_SQRT = np.frompyfunc(lambda v: v.sqrt(), 1, 1)
