"""The losses certify knows, in arb: value, output gradient and output curvature.

Only ``nn.CrossEntropyLoss`` and ``nn.MSELoss`` themselves (exact type: a subclass may compute
anything) are taken, with every option recomputed exactly (:func:`loss_terms`). Per sample::

    cross-entropy   ℓ_n = Σ_c t_nc·(log Σ_k exp f_nk − f_nc),   t_nc = a_n·[c = y_n] + b_n·w_c
    squared error   ℓ_n = scale·Σ_c (f_nc − y_nc)²

with ``a_n = β(1 − ε)·w_{y_n}/d``, ``b_n = β(ε/C)/d`` (``w`` the class weights, 1 without;
``ε`` the label smoothing; ``d`` the mean's divisor in the sample's batch, ``Σ w_{y_n}`` over its
kept samples, or 1 for a sum; ``β = n_batch/N`` for a mean, 1 for a sum, as ``prepare_batches``
weighs batches) and ``t_n = 0`` for a sample whose label is ``ignore_index``. The output Hessian of
sample ``n`` is ``m_n(diag(p) − ppᵀ)`` with ``m_n = Σ_c t_nc`` (``p`` the softmax, rigorous exp and
log) or ``2·scale·I``; certify writes it ``scale·S_n``, ``S_n = A_nᵀA_n`` with
``A_n ḟ = √(r_n p) ⊙ (ḟ − pᵀḟ)`` (``r_n = m_n/scale``) or ``√2·ḟ``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch
from flint import arb, arb_mat, fmpq
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.certify.arrays import Rows, arr, as_array, as_mat
from coupled_curvature.numeric.certify.ball import from_arb
from coupled_curvature.numeric.core.inputs import loss_reduction

__all__ = ["ArbLoss", "LossTerms", "check_loss", "check_value", "loss_terms"]

_KNOWN = "nn.CrossEntropyLoss (weight, ignore_index, label_smoothing; mean or sum) or nn.MSELoss (mean or sum)"


def check_loss(loss_fn: Callable) -> str:
    """``"ce"`` or ``"mse"`` for a loss certify can recompute exactly, else an ``InvalidInputError``
    that says why (checked before any work; the targets are checked by :func:`loss_terms`).

    >>> check_loss(nn.CrossEntropyLoss(ignore_index=1, label_smoothing=0.1))
    'ce'
    >>> class Scaled(nn.MSELoss): pass
    >>> check_loss(Scaled())
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: certify recomputes the loss in ball arithmetic and must know exactly what it computes; got Scaled (a subclass of MSELoss may compute anything); pass nn.CrossEntropyLoss (weight, ignore_index, label_smoothing; mean or sum) or nn.MSELoss (mean or sum) itself
    """
    if type(loss_fn) is not nn.CrossEntropyLoss and type(loss_fn) is not nn.MSELoss:
        what = type(loss_fn).__name__
        base = next((c.__name__ for c in (nn.CrossEntropyLoss, nn.MSELoss) if isinstance(loss_fn, c)), None)
        got = f"{what} (a subclass of {base} may compute anything)" if base else what
        raise InvalidInputError(f"certify recomputes the loss in ball arithmetic and must know exactly what it "
                                f"computes; got {got}; pass {_KNOWN} itself")
    if "forward" in vars(loss_fn) or loss_fn._forward_hooks or loss_fn._forward_pre_hooks:
        raise InvalidInputError(f"the {type(loss_fn).__name__} has a replaced forward or forward hooks, so what it "
                                "computes is not known; certify recomputes the loss in ball arithmetic and must "
                                "know exactly what it computes: pass a plain loss object")
    if loss_fn.reduction not in ("mean", "sum"):
        raise InvalidInputError(f"loss_fn.reduction is {loss_fn.reduction!r}; certify certifies a scalar loss: pass "
                                f"nn.{type(loss_fn).__name__}(reduction='mean') or reduction='sum'")
    if isinstance(loss_fn, nn.CrossEntropyLoss):
        eps = loss_fn.label_smoothing
        if not (isinstance(eps, (int, float)) and 0.0 <= eps <= 1.0):
            raise InvalidInputError(f"label_smoothing must be a number in [0, 1], got {eps!r}; pass one in [0, 1]")
        w = loss_fn.weight
        if w is not None and (w.dim() != 1 or not bool(torch.isfinite(w).all()) or bool((w < 0).any())):
            raise InvalidInputError("CrossEntropyLoss's class weights must be one finite value ≥ 0 per class "
                                    f"(got shape {tuple(w.shape)}); pass a 1-D weight tensor of non-negative numbers")
        return "ce"
    return "mse"


@dataclass(frozen=True)
class LossTerms:
    """The loss as exact coefficients (see the module's docstring): ``kind`` (``"ce"``/``"mse"``),
    ``scale``, and for cross-entropy ``labels`` (``-1``: ignored), ``a`` and ``b`` per sample and
    the class weights ``wc`` (all relative to ``scale``); ``batches`` the batch sizes; ``loss64`` a
    float64 copy of the loss for :func:`check_value`."""

    kind: str
    scale: Fraction
    labels: tuple[int, ...]
    a: tuple[Fraction, ...]
    b: tuple[Fraction, ...]
    wc: tuple[Fraction, ...]
    batches: tuple[int, ...]
    mean: bool
    loss64: nn.Module

    def masses(self) -> list[Fraction]:
        """``r_n = m_n/scale`` per sample: its total target mass, relative to ``scale`` (1 for MSE)."""
        if self.kind != "ce":
            return [Fraction(1)] * sum(self.batches)
        total = sum(self.wc)
        return [x + z * total for x, z in zip(self.a, self.b)]


def loss_terms(loss_fn: nn.Module, y: torch.Tensor, C: int, batches: tuple[int, ...]) -> LossTerms:
    """The exact coefficients of ``loss_fn`` (checked by :func:`check_loss`) on targets ``y`` (all
    batches, sizes ``batches``) for ``C`` outputs; a target torch would reject or certify cannot
    represent is an ``InvalidInputError``, before any ball arithmetic.

    >>> t = loss_terms(nn.CrossEntropyLoss(ignore_index=1), torch.tensor([0, 1, 2, 0]), 3, (4,))
    >>> t.scale, t.labels, [str(m) for m in t.masses()]
    (Fraction(1, 3), (0, -1, 2, 0), ['1', '0', '1', '1'])
    """
    kind, N = check_loss(loss_fn), sum(batches)
    mean = loss_reduction(loss_fn) == "mean"
    loss64 = copy.deepcopy(loss_fn).to(torch.float64)
    if kind == "mse":
        if not bool(torch.isfinite(y).all()):
            raise InvalidInputError("the MSELoss targets hold non-finite values (NaN or inf); remove or fix them")
        return LossTerms(kind, Fraction(1, N * C) if mean else Fraction(1), (), (), (), (), batches, mean, loss64)
    assert isinstance(loss_fn, nn.CrossEntropyLoss)  # check_loss took it as "ce"
    if y.dtype != torch.long or y.dim() != 1 or y.shape[0] != N:
        raise InvalidInputError(f"certify takes CrossEntropyLoss targets as {N} integer class labels (shape ({N},)), "
                                f"got {y.dtype} of shape {tuple(y.shape)}; class probabilities are not supported; pass y.long()")
    raw, ignore = [int(v) for v in y.tolist()], int(loss_fn.ignore_index)
    bad = [v for v in raw if v != ignore and not 0 <= v < C]
    if bad:
        raise InvalidInputError(f"CrossEntropyLoss targets hold label {bad[0]}, outside 0..{C - 1} (and not "
                                f"ignore_index={ignore}); pass labels in 0..{C - 1}")
    w = loss_fn.weight
    if w is not None and w.numel() != C:
        raise InvalidInputError(f"CrossEntropyLoss has {w.numel()} class weights but the model {C} outputs; "
                                f"pass one weight per output")
    wc = tuple(Fraction(float(v)) for v in w.double().tolist()) if w is not None else (Fraction(1),) * C
    eps = Fraction(float(loss_fn.label_smoothing))
    labels = tuple(-1 if v == ignore else v for v in raw)
    a, b, start = [], [], 0
    for i, size in enumerate(batches):
        part = labels[start:start + size]
        div = sum((wc[v] for v in part if v >= 0), Fraction(0)) if mean else Fraction(1)
        if div == 0:
            why = "every label is ignore_index" if all(v < 0 for v in part) else "the kept labels' class weights sum to 0"
            raise InvalidInputError(f"batch {i}: {why}, so the mean cross-entropy is 0/0 (torch gives nan); pass "
                                    "targets with a kept label of positive weight, or reduction='sum'")
        beta = Fraction(size, N) if mean else Fraction(1)
        a += [beta * (1 - eps) * wc[v] / div if v >= 0 else Fraction(0) for v in part]
        b += [beta * eps / C / div if v >= 0 else Fraction(0) for v in part]
        start += size
    total_w = sum(wc)
    masses = {x + z * total_w for x, z in zip(a, b)} - {0}
    scale = masses.pop() if len(masses) == 1 else Fraction(1)  # common mass: exact 0/1 coefficients
    return LossTerms(kind, scale, labels, tuple(x / scale for x in a), tuple(x / scale for x in b), wc, batches,
                     mean, loss64)


def _num(x: Fraction) -> int | arb:
    """A Fraction as an exact int when it is one, else its arb ball at the working precision."""
    return int(x) if x.denominator == 1 else arb(fmpq(x.numerator, x.denominator))


class ArbLoss:
    """The loss of outputs ``f`` (``N × C`` arb_mat) against targets ``y`` (a tensor), with the
    coefficients ``terms`` (:func:`loss_terms`). Entry-wise steps run on object arrays of balls
    (:mod:`.arrays`): each entry is still one arb operation."""

    def __init__(self, terms: LossTerms, f: arb_mat, y: torch.Tensor):
        self.terms, self.kind = terms, terms.kind
        self.N, self.C = f.nrows(), f.ncols()
        self.scale = arb(fmpq(terms.scale.numerator, terms.scale.denominator))
        self.F = F = as_array(f)
        self._root: np.ndarray | None = None
        if self.kind == "ce":
            # an exact shift per sample (any exact m gives log Σ exp(f) = m + log Σ exp(f − m)): no overflow
            shift = np.empty(self.N, dtype=object)
            shift[:] = [arb(max(v.mid() for v in row)) for row in F]
            E = _EXP(F - shift[:, None])
            z = E.sum(axis=1)
            self.P = E / z[:, None]
            self.masses = terms.masses()
            self.rel = np.empty(self.N, dtype=object)  # r_n = m_n/scale
            self.rel[:] = [_num(m) for m in self.masses]
            T = np.zeros((self.N, self.C), dtype=object)  # t_nc/scale (Python int 0: exact)
            for c, wc in enumerate(terms.wc):
                T[:, c] = [_num(bn * wc) for bn in terms.b] if any(terms.b) else 0
            for n, (v, an) in enumerate(zip(terms.labels, terms.a)):
                if v >= 0:
                    T[n, v] = T[n, v] + _num(an)
            self.value = ((_LOG(z) + shift) * self.rel).sum() * self.scale - (T * F).sum() * self.scale
            grad = (self.P * self.rel[:, None] - T) * self.scale
        else:
            t = y.double().reshape(self.N, -1).tolist()
            if len(t[0]) != self.C:
                raise InvalidInputError(f"MSELoss targets must have the outputs' shape ({self.N}, {self.C})")
            self.target = as_array(arb_mat(t))
            diff = F - self.target
            self.value = (diff * diff).sum() * self.scale
            grad = diff * (2 * self.scale)
        self.grad = as_mat(grad)

    def _root_p(self) -> np.ndarray:
        """``√(r_n p_nc)``: the factor's weights (0 for an ignored sample)."""
        if self._root is None:
            self._root = _SQRT(self.P * self.rel[:, None])
        return self._root

    def factor_array(self, df: Rows) -> np.ndarray:
        """``A_n ḟ`` for every direction and sample as a ``(K, N, C)`` object array, so that
        ``ḟᵀ∇²ℓḟ = Σ_c (A_n ḟ)_c²`` (``∇²ℓ`` without ``scale``)."""
        D = arr(df).reshape(-1, self.N, self.C)
        if self.kind == "mse":
            return D * arb(2).sqrt()
        pd = (D * self.P).sum(axis=2)
        return self._root_p() * (D - pd[:, :, None])

    def factor_seed(self) -> np.ndarray:
        """The rows of ``A_n`` as output cotangents, ``(C·N) × C`` direction-major: row ``(c, n)`` is
        ``√(r_n p_c)(e_c − p)`` (cross-entropy) or ``√2·e_c``, so that ``(A_nḟ)_c`` is its dot with ``ḟ_n``."""
        eye = np.zeros((self.C, 1, self.C), dtype=object)
        eye[np.arange(self.C), 0, np.arange(self.C)] = 1
        if self.kind == "mse":
            return np.broadcast_to(eye * arb(2).sqrt(), (self.C, self.N, self.C)).reshape(-1, self.C)
        return (self._root_p().T[:, :, None] * (eye - self.P[None])).reshape(-1, self.C)

    def factor_rows(self, df: Rows) -> arb_mat:
        """``A_n ḟ`` for every direction and sample: ``(K·N·C) × 1`` (direction-major)."""
        rows = self.factor_array(df)
        return as_mat(rows, rows.size)

    def curvature(self, dfs: list[Rows]) -> list[arb]:
        """``Σ_n ḟ_nᵀ ∇²L ḟ_n`` per direction of each ``df`` in ``dfs`` (each ``K·N × C``): the second
        derivative of ``L`` along a direction in which the outputs move affinely; for cross-entropy
        ``Σ_c r_n p_c(ḟ_c − pᵀḟ)²`` (no square roots)."""
        D = np.concatenate([arr(df).reshape(-1, self.N, self.C) for df in dfs])
        if self.kind == "mse":
            sq = D * D * 2
        else:
            Y = D - (D * self.P).sum(axis=2)[:, :, None]
            sq = Y * Y * (self.P * self.rel[:, None])
        return [v * self.scale for v in sq.reshape(sq.shape[0], -1).sum(axis=1)]


#: the float64 cross-check's tolerance, relative to the loss's magnitude (float64 rounding is ~2^-45 of it)
CHECK_RTOL = 2.0 ** -30


def check_value(loss: ArbLoss, y: torch.Tensor) -> None:
    """The loss torch computes (a float64 copy of the user's loss on the certified outputs rounded to
    float64, batch by batch) must lie within float64 rounding of the certified ball: an independent
    check that certify's formula is what torch computes. Otherwise an ``InvalidInputError``."""
    t = loss.terms
    F = torch.tensor(loss.F.astype(float), dtype=torch.float64)
    if not bool(torch.isfinite(F).all()):
        raise InvalidInputError("the model's outputs exceed the float64 range, so torch cannot compute this loss; "
                                "use smaller weights or inputs")
    total, start = 0.0, 0
    try:
        with torch.no_grad():
            for size in t.batches:
                part = float(t.loss64(F[start:start + size], y[start:start + size]))
                total += part * (size / sum(t.batches) if t.mean else 1.0)
                start += size
    except (RuntimeError, ValueError, IndexError) as e:
        raise InvalidInputError(f"torch's {type(t.loss64).__name__} fails on these outputs and targets "
                                f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); pass targets it accepts") from None
    Fa = F.abs()
    if t.kind == "ce":
        rows = 2 * Fa.max(dim=1).values + math.log(loss.C) + 1
        magnitude = float(t.scale) * math.fsum(float(m) * float(r) for m, r in zip(loss.masses, rows))
    else:
        Y = torch.as_tensor(loss.target.astype(float))
        magnitude = float(t.scale) * float(((Fa + Y.abs()) ** 2).sum())
    gap = arb(total) - loss.value if math.isfinite(total) else None
    if gap is None or not gap.abs_lower() <= CHECK_RTOL * magnitude:
        raise InvalidInputError(
            f"the loss torch computes on the model's outputs, {total!r}, is not the certified loss "
            f"{from_arb(loss.value)} (to float64 rounding): certify's formula for this "
            f"{type(t.loss64).__name__} does not match torch {torch.__version__}, so nothing is certified; "
            "use diagnose (float64) meanwhile, and report this with the loss's options")


_EXP = np.frompyfunc(lambda v: v.exp(), 1, 1)
_LOG = np.frompyfunc(lambda v: v.log(), 1, 1)
_SQRT = np.frompyfunc(lambda v: v.sqrt(), 1, 1)
