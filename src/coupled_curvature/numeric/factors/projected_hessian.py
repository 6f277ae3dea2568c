"""A per-head attention block's Hessian kept in the row space of its projection input: ``H_bb = P M Pᵀ``, exact.

A projection is affine in its own weights, so a q, k or v block's ``H_bb`` has its range in
``R^C ⊗ span(rows of X̃)`` (:mod:`~coupled_curvature.numeric.factors.head_hessians`); with ``V`` an orthonormal
basis of that row space (:func:`row_basis`) and ``P = I_C ⊗ V``, ``M = Pᵀ H_bb P`` holds all of it:
the non-zero spectrum of ``H_bb`` is ``M``'s and ``wᵀH⁺_τw = (Pᵀw)ᵀ M⁺_τ (Pᵀw)`` at the same ``τ``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.numeric.factors.forms import FactorSpectrum
from coupled_curvature.numeric.linalg.pinv import symmetric_spectrum

__all__ = ["ProjectedHessian", "row_basis"]


@dataclass(frozen=True)
class ProjectedHessian:
    """A block ``H_bb = P M Pᵀ`` (exact) with ``P = Π (I_C ⊗ V)`` orthonormal columns: ``core`` is ``M``
    (``C·r × C·r``, ``c`` major), ``basis`` is ``V`` (``F × r``, orthonormal columns: the row space of the
    projection inputs, :func:`row_basis`), ``order[k]`` the ``c``-major position (``c·F + i``) of the block's
    entry ``k``. ``M`` is what gets eigendecomposed; ``full()`` is ``H_bb`` itself.

    >>> V = torch.tensor([[1.0], [0.0]], dtype=torch.float64)
    >>> ph = ProjectedHessian(torch.diag(torch.tensor([2.0, 4.0], dtype=torch.float64)), V, torch.tensor([0, 2, 1, 3]))
    >>> ph.full()
    tensor([[2., 0., 0., 0.],
            [0., 4., 0., 0.],
            [0., 0., 0., 0.],
            [0., 0., 0., 0.]], dtype=torch.float64)
    >>> w = torch.ones(4, dtype=torch.float64)
    >>> ph.matvec(w), ph.spectrum(w).form(1e-10).value  # 1/2 + 1/4; (0, 0) of w sits at λ = 0
    (tensor([2., 4., 0., 0.], dtype=torch.float64), 0.75)
    """

    core: Tensor
    basis: Tensor
    order: Tensor

    @property
    def size(self) -> int:
        """Rows of ``H_bb`` (the block's entries)."""
        return self.order.numel()

    @property
    def outputs(self) -> int:
        """``C``: the block's output columns."""
        return self.core.shape[0] // self.basis.shape[1]

    def restrict(self, v: Tensor) -> Tensor:
        """``Pᵀv`` (``v`` in the block's entry order)."""
        u = torch.empty(self.outputs * self.basis.shape[0], dtype=v.dtype, device=v.device)
        u[self.order] = v
        return (u.reshape(self.outputs, -1) @ self.basis).reshape(-1)

    def extend(self, y: Tensor) -> Tensor:
        """``Py`` (in the block's entry order)."""
        return (y.reshape(self.outputs, -1) @ self.basis.T).reshape(-1)[self.order]

    def matvec(self, v: Tensor) -> Tensor:
        """``H_bb v = P M Pᵀ v``."""
        return self.extend(self.core @ self.restrict(v))

    def full(self) -> Tensor:
        """``H_bb`` (``size × size``, the block's entry order)."""
        C, (F, r) = self.outputs, self.basis.shape
        H = torch.einsum("ia,cadb,jb->cidj", self.basis, self.core.reshape(C, r, C, r), self.basis)
        return H.reshape(C * F, C * F)[self.order][:, self.order]

    def plus(self, other: ProjectedHessian) -> ProjectedHessian:
        """The sum of two batches' ``H_bb`` of the same block, in a basis of both row spaces (:func:`row_basis`)."""
        V = _orthonormal(torch.cat([self.basis, other.basis], dim=1))
        return ProjectedHessian(self._in(V) + other._in(V), V, self.order)

    def _in(self, V: Tensor) -> Tensor:
        """``M`` in the basis ``V`` (whose span holds ``basis``'s): ``(I ⊗ R) M (I ⊗ R)ᵀ``, ``R = Vᵀ basis``."""
        C, r, k = self.outputs, self.basis.shape[1], V.shape[1]
        R = V.T @ self.basis
        return torch.einsum("ai,cidj,bj->cadb", R, self.core.reshape(C, r, C, r), R).reshape(C * k, C * k)

    def spectrum(self, w: Tensor) -> FactorSpectrum:
        """``(λ_i, (u_iᵀw)²)`` of ``H_bb``: ``M``'s eigenvalues with ``(u_iᵀPᵀw)²``, and ``λ = 0`` with the part of
        ``w`` outside ``P`` (``‖w − PPᵀw‖²``), so the weights sum to ``‖w‖²`` as a dense spectrum's do."""
        u = self.restrict(w)
        lam, c = symmetric_spectrum(self.core, u)
        null = float(((w - self.extend(u)) ** 2).sum())
        return FactorSpectrum(np.append(lam, 0.0), np.append(c, null), 1)


def row_basis(X: Tensor) -> Tensor | None:
    """Orthonormal columns ``V`` (``F × r``) spanning the rows of ``X`` (``rows × F``), or ``None`` when they span
    all of ``R^F`` (nothing to gain). Singular values at or below ``max(rows, F)·ε·σ_max`` (the rank tolerance of
    ``numpy.linalg.matrix_rank``: what float64 cannot tell from 0 in ``X`` itself) are dropped, and only they; with
    fewer rows than ``F`` the span of the rows is kept whole.

    >>> X = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    >>> V = row_basis(X)
    >>> V.shape, bool(torch.allclose(X @ V @ V.T, X))
    (torch.Size([3, 2]), True)
    >>> row_basis(torch.eye(3, dtype=torch.float64)) is None
    True
    """
    V = _orthonormal(X.T)
    return None if V.shape[1] == X.shape[1] else V


def _orthonormal(A: Tensor) -> Tensor:
    """Left singular vectors of ``A`` above ``max(A.shape)·ε·σ_max``: an orthonormal basis of its column space."""
    U, S, _ = torch.linalg.svd(A, full_matrices=False)
    if not S.numel() or float(S[0]) == 0.0:
        return U[:, :0]
    keep = S > max(A.shape) * torch.finfo(A.dtype).eps * S[0]
    return U[:, keep].contiguous()
