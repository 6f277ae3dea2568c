"""The engine's vocabulary: the routes (:class:`WHwRoute`, :class:`SpectralRoute`), a block's plan,
the :class:`Plan`, and what execution returns per block (:class:`BlockCurvature`).

>>> SpectralRoute.GRAM == "gram", WHwRoute("tangent")
(True, <WHwRoute.TANGENT: 'tangent'>)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import Batch
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.options import RunOptions
from coupled_curvature.numeric.factors.forms import FactorSpectrum
from coupled_curvature.numeric.factors.gram import GramForm
from coupled_curvature.numeric.factors.projected_hessian import ProjectedHessian
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm, rethreshold
from coupled_curvature.numeric.linalg.pinv import PinvForm

__all__ = ["BlockCurvature", "BlockPlan", "Execution", "Plan", "SpectralRoute", "WHwRoute", "spectrum_of_dense",
           "spectrum_of_gram"]


class _Route(str, Enum):
    """A route: a ``str`` enum that prints, formats and compares as its value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class WHwRoute(_Route):
    """Where ``wᵀHw`` comes from."""

    TANGENT = "tangent"  #: ``Σ_n ‖A_nJ_nw‖²`` from one backward pass per output-factor row (affine block)
    HVP = "hvp"  #: ``wᵀ(H_bb w)``, a Hessian-vector product on the retained gradient graph
    EXTERNAL = "external"  #: ``wᵀ(G w)`` from a curvature operator the caller passed (``diagnose(curvature=…)``)


class SpectralRoute(_Route):
    """How the spectral data behind ``wᵀH⁺w`` (and the profile) is computed."""

    GRAM = "gram"  #: exact: ``H_bb = BᵀB``, eigenproblem of the smaller of ``BᵀB`` and ``BBᵀ``
    DENSE = "dense"  #: exact: eigendecomposition of the assembled ``H_bb``
    KRYLOV = "krylov"  #: Lanczos quadrature from ``w/‖w‖`` (an approximation with a verdict)
    NONE = "none"  #: no spectral data (``D⁺`` not asked for, or no route could take the block)


@dataclass
class BlockPlan:
    """One block's planned routes and why; ``fallback`` is the spectral route if the Gram checks refuse."""

    name: str
    members: list[str]
    size: int
    wHw: WHwRoute
    wHw_reason: str
    spectral: SpectralRoute
    spectral_reason: str
    fallback: SpectralRoute = SpectralRoute.NONE
    fallback_reason: str = ""
    #: the size of the matrix a dense route eigendecomposes, where smaller than ``size`` (a per-head attention
    #: block's projected bound); ``None``: ``size``
    dense_size: int | None = None


@dataclass
class Plan:
    """What :func:`execute` runs: the float64 copy, its objective, the partition and each block's plan."""

    options: RunOptions
    objective: Objective
    batches: list[Batch]
    partition: dict[str, list[str]]
    blocks: dict[str, BlockPlan]
    notes: list[str]
    frozen: list[str]
    skipped: list[str]
    reduction: str
    reduction_source: str
    source_dtypes: list[str]
    device: torch.device
    rtol: float
    distributed: bool = False


@dataclass
class BlockCurvature:
    """One block's result: ``w``, ``g``, ``wᵀHw`` and the spectral data of the route that ran.

    ``spectrum`` (Gram or dense) gives ``wᵀH⁺_τw`` at any cutoff exactly; ``krylov`` is the Lanczos
    run (its value at its own cutoff, re-thresholded above it); ``gram`` keeps the Gram route's
    checks (side, rows, second derivative). ``Hw``/``dense`` are kept for callers that need them.
    """

    name: str
    members: list[str]
    w: Tensor
    grad: Tensor
    wHw: float
    wHw_route: WHwRoute
    wHw_reason: str
    spectral: SpectralRoute
    spectral_reason: str
    spectrum: FactorSpectrum | None = None
    krylov: KrylovForm | None = None
    gram: GramForm | None = None
    Hw: Tensor | None = None
    dense: Tensor | ProjectedHessian | None = None
    notes: list[str] = field(default_factory=list)
    g_rounding: float | None = None  #: the rounding level of ``g``, ``m·ε·‖Σ_b |J_bᵀ|r_b||‖`` (``None``: not computed)

    @property
    def size(self) -> int:
        return self.w.numel()

    def pinv_form(self, rtol: float) -> PinvForm | KrylovForm | None:
        """``wᵀH⁺_τw`` at ``τ = rtol·max|λ|`` from the spectral data (``None`` without any).

        On the Krylov route a cutoff below the run's own cannot be read off its Ritz values:
        that is an ``InvalidInputError``.
        """
        if self.spectrum is not None:
            return self.spectrum.form(rtol)
        if self.krylov is None:
            return None
        if rtol == self.krylov.rtol:
            return self.krylov
        if rtol < self.krylov.rtol:
            raise InvalidInputError(f"block {self.name!r} ran Lanczos at pinv_rtol = {self.krylov.rtol:g}; a cutoff "
                                    f"below it ({rtol:g}) needs a new run")
        return rethreshold(self.krylov, rtol)


@dataclass
class Execution:
    """What :func:`execute` returns: the blocks in partition order and the model-level facts."""

    plan: Plan
    blocks: dict[str, BlockCurvature]
    loss: float
    n_samples: int
    notes: list[str]
    gram_refused: dict[str, str]
    tangent_refused: dict[str, str]


def spectrum_of_dense(H: Tensor | ProjectedHessian, w: Tensor) -> FactorSpectrum:
    """The spectrum ``(λ_i, (u_iᵀw)²)`` of a dense symmetric block (:func:`symmetric_spectrum` refuses a
    non-finite one before LAPACK sees it); of a projected one (``H = PMPᵀ``), ``M``'s with ``(u_iᵀPᵀw)²`` and
    ``‖w − PPᵀw‖²`` at ``λ = 0`` (:meth:`~..factors.head_hessians.ProjectedHessian.spectrum`).

    >>> s = spectrum_of_dense(torch.diag(torch.tensor([4.0, -2.0, 0.0], dtype=torch.float64)),
    ...                       torch.ones(3, dtype=torch.float64))
    >>> s.form(1e-10).value
    -0.25
    """
    from coupled_curvature.numeric.linalg.pinv import symmetric_spectrum

    if isinstance(H, ProjectedHessian):
        return H.spectrum(w)
    return FactorSpectrum(*symmetric_spectrum(H, w), 1)


def spectrum_of_gram(form: GramForm) -> FactorSpectrum:
    """The Gram route's spectrum: eigenvalues of ``G = BBᵀ`` with ``(q_iᵀBw)²`` (power 2), or of ``BᵀB``
    with ``(v_iᵀw)²`` (power 1)."""
    return FactorSpectrum(np.asarray(form.evals), np.asarray(form.weights), 2 if form.side == "gram" else 1)
