"""Softmax cross-entropy and mean-squared error in arb: value, output gradient and output curvature.

``L = scale·Σ_n ℓ(f_n, y_n)`` with ``scale = 1/N`` (CrossEntropyLoss, mean), ``1/(N·C)`` (MSELoss, mean)
or 1 (sum). The output Hessian of sample ``n`` is ``S_n = diag(p) − ppᵀ`` (cross-entropy, ``p`` the
softmax, with rigorous exp and log) or ``2I`` (squared error), factored as ``S_n = A_nᵀA_n`` with
``A_n ḟ = √p ⊙ (ḟ − pᵀḟ)`` or ``√2·ḟ``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from flint import arb, arb_mat
from torch import nn

from coupled_curvature.errors import InvalidInputError
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
    """The loss of outputs ``f`` (``N × C`` arb_mat) against targets ``y`` (a tensor)."""

    def __init__(self, loss_fn: nn.Module, f: arb_mat, y: torch.Tensor):
        self.kind = check_loss(loss_fn)
        self.N, self.C = f.nrows(), f.ncols()
        mean = loss_reduction(loss_fn) == "mean"
        fe = f.entries()
        rows = [fe[n * self.C:(n + 1) * self.C] for n in range(self.N)]
        if self.kind == "ce":
            labels = [int(v) for v in y.reshape(-1).tolist()]
            if len(labels) != self.N or any(not 0 <= c < self.C for c in labels):
                raise InvalidInputError(f"CrossEntropyLoss targets must be {self.N} labels in 0..{self.C - 1}")
            self.scale = arb(1) / self.N if mean else arb(1)
            self.p, total, grad = [], arb(0), []
            for row, c in zip(rows, labels):
                m = arb(max(v.mid() for v in row))  # exact shift: exp(f − m) cannot overflow
                e = [(v - m).exp() for v in row]
                z = sum(e, arb(0))
                p = [v / z for v in e]
                self.p.append(p)
                total += z.log() + m - row[c]
                grad.extend((pc - (1 if k == c else 0)) * self.scale for k, pc in enumerate(p))
            self.value = total * self.scale
            self.root_p = [[v.sqrt() for v in p] for p in self.p]
        else:
            t = y.double().reshape(self.N, -1).tolist()
            if len(t[0]) != self.C:
                raise InvalidInputError(f"MSELoss targets must have the outputs' shape ({self.N}, {self.C})")
            self.scale = arb(1) / (self.N * self.C) if mean else arb(1)
            diff = [v - arb(tv) for row, trow in zip(rows, t) for v, tv in zip(row, trow)]
            self.value = sum((d * d for d in diff), arb(0)) * self.scale
            grad = [2 * d * self.scale for d in diff]
        self.grad = arb_mat(self.N, self.C, grad)

    def factor_rows(self, df: arb_mat) -> arb_mat:
        """``A_n ḟ`` for every direction and sample: ``(K·N·C) × 1``, so that ``ḟᵀ∇²ℓḟ = Σ (A_n ḟ)²``
        (``∇²ℓ`` without ``scale``)."""
        e, C, out = df.entries(), self.C, []
        two = arb(2).sqrt()
        for r in range(df.nrows()):
            d = e[r * C:(r + 1) * C]
            if self.kind == "ce":
                n = r % self.N
                pd = sum((pc * dc for pc, dc in zip(self.p[n], d)), arb(0))
                out.extend(s * (dc - pd) for s, dc in zip(self.root_p[n], d))
            else:
                out.extend(two * dc for dc in d)
        return arb_mat(len(out), 1, out)

    def curvature(self, df: arb_mat) -> list[arb]:
        """``Σ_n ḟ_nᵀ ∇²L ḟ_n`` per direction (``df`` is ``K·N × C``): the second derivative of ``L``
        along a direction in which the outputs move affinely."""
        rows = self.factor_rows(df).entries()
        per = self.N * self.C
        return [sum((v * v for v in rows[k * per:(k + 1) * per]), arb(0)) * self.scale
                for k in range(df.nrows() // self.N)]
