"""The spectral profile of a block along its own weights: the measure behind ``D`` and ``D⁺``.

For block ``b`` with value ``w``, gradient ``g`` and Hessian block ``H = H_bb`` with eigenpairs
``(λ_i, u_i)`` and spectral radius ``ρ = max_i|λ_i|``::

    μ_w = Σ_i p_i δ(x_i),   x_i = λ_i / ρ,   p_i = (u_iᵀw)² / ‖w‖²,   together with   ρ / ‖g‖².

Under the conformal group (``w → cQw``, ``g → c⁻¹Qg``, ``H → c⁻²QHQᵀ``) the eigenvalues become
``c⁻²λ_i`` with eigenvectors ``Qu_i``, so every ``x_i``, every ``p_i`` and ``ρ/‖g‖²`` are
unchanged: the profile is exactly invariant, and the diagnostics are functionals of it::

    RQ / ρ = ∫ x dμ_w,    D = (ρ/‖g‖²)·∫ x dμ_w,    D⁺_τ = (ρ/‖g‖²)⁻¹·∫_{|x|>τ} x⁻¹ dμ_w,

with the cutoff of :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`: eigenvalues with
``|λ| > τ·max|λ|`` are kept. The scale is the spectral radius ``ρ = max|λ|`` (so ``x ∈ [−1, 1]``);
it is ``λ_max`` whenever ``H ⪰ 0`` (always on the Gram route, where ``H = BᵀB``); on an indefinite
block negative eigenvalues sit at ``x < 0`` and the most negative one may be the one at ``|x| = 1``.

Eigenvalues at rounding level (``|x| ≤ n·ε``, ``n`` the matrix size) cannot be told from 0 in
float64: their weight is placed at ``x = 0`` exactly, in one atom (the part of ``w`` in the null
space of ``H``). ``D⁺`` at a cutoff below ``n·ε`` therefore leaves them out, where ``diagnose``
would keep them and flag the noise.

Routes (:attr:`BlockProfile.route`): ``"gram"`` (the exact Gram route of
:mod:`~coupled_curvature.numeric.factors.gram`: with ``u = Bw`` and ``G = BBᵀ = Σ λ_i q_iq_iᵀ``
the eigenvalue ``λ_i`` of ``H = BᵀB`` carries ``p_i = (q_iᵀu)²/(λ_i‖w‖²)``, and ``1 − Σp_i``
sits at 0), ``"dense"`` (eigendecomposition of the dense block, up to ``max_dense``) and
``"krylov"`` (Gauss quadrature of Lanczos started at ``w/‖w‖``: nodes the Ritz values ``θ_j``,
weights the squared first components ``s_{1j}²``, ``ρ`` from the Ritz values and a random-start
probe; an approximation, ``exact=False``, with its product count and convergence verdict, which
certifies ``D⁺`` at the cutoff ``pinv_rtol`` the run was made for).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.by_block import ByBlock
from coupled_curvature.numeric.core.execution import execute
from coupled_curvature.numeric.core.options import run_options
from coupled_curvature.numeric.core.planning import plan
from coupled_curvature.numeric.core.progress import progress_bar
from coupled_curvature.numeric.core.routes import SpectralRoute
from coupled_curvature.numeric.factors.gram import GramForm
from coupled_curvature.numeric.linalg.krylov_quadrature import KrylovForm
from coupled_curvature.numeric.linalg.lanczos import tridiagonal_eig
from coupled_curvature.numeric.linalg.pinv import rounding_level
from coupled_curvature.base.run_settings import with_settings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BlockProfile", "SpectralProfile", "spectral_profile"]



@dataclass(frozen=True)
class BlockProfile:
    """One block's profile: atoms ``(rel_eigs[i], weights[i])`` of ``μ_w``, sorted by ``x``, and the scales.

    ``rel_eigs`` are ``x_i = λ_i/ρ`` (at most one atom at exactly 0), ``weights`` the ``p_i``
    (they sum to 1), ``radius`` is ``ρ = max|λ(H_bb)|``, ``g_sq = ‖g‖²``, ``w_sq = ‖w‖²``.
    ``route`` is ``"gram"``, ``"dense"`` or ``"krylov"``; ``exact`` is ``False`` on the Krylov route,
    which records its Hessian-vector products (``iterations``) and ``converged``. A block with
    ``w = 0`` has no profile: empty atoms, ``D()`` and ``dplus()`` are ``None`` (a note says so).
    """

    name: str
    params: tuple[str, ...]
    size: int
    rel_eigs: np.ndarray
    weights: np.ndarray
    radius: float
    g_sq: float
    w_sq: float
    route: str
    exact: bool
    iterations: int | None = None
    converged: bool | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def lambda_ratio(self) -> float | None:
        """``ρ/‖g‖²``, the invariant scale of the profile (``None`` when ``g = 0``)."""
        return None if self.g_sq == 0.0 else self.radius / self.g_sq

    def mean(self) -> float | None:
        """``∫ x dμ_w = RQ/ρ`` (``None`` when ``w = 0``)."""
        return None if self.w_sq == 0.0 else float(self.weights @ self.rel_eigs)

    def D(self) -> float | None:
        """``D = (ρ/‖g‖²)·∫ x dμ_w = (wᵀHw/wᵀw)/‖g‖²`` (``None`` when ``w = 0`` or ``g = 0``)."""
        m = self.mean()
        return None if m is None or self.g_sq == 0.0 else self.radius * m / self.g_sq

    def dplus(self, rtol: float = 1e-10) -> float | None:
        """``D⁺_τ = (‖g‖²/ρ)·∫_{|x|>τ} x⁻¹ dμ_w = (wᵀH⁺_τw/wᵀw)·‖g‖²`` at ``τ = rtol`` (``None`` when ``w = 0``)."""
        return None if self.w_sq == 0.0 else float(self.dplus_curve([rtol])[0])

    def dplus_curve(self, rtols: Sequence[float]) -> np.ndarray:
        """``D⁺_τ`` at every ``τ`` of ``rtols`` (a step function of ``τ`` that jumps at every ``|x_i|``
        with weight): the way to report ``D⁺``, since one cutoff hides how much it depends on it."""
        r = _checked_rtols(rtols)
        if self.w_sq == 0.0:
            return np.full(r.size, np.nan)
        live = self.rel_eigs != 0.0
        x, p = self.rel_eigs[live], self.weights[live]
        if self.radius == 0.0 or x.size == 0:
            return np.zeros(r.size)
        kept = np.abs(x)[None, :] > r[:, None]
        return (kept @ (p / x)) * (self.g_sq / self.radius)

    def cdf(self, x: float | Sequence[float] | np.ndarray) -> float | np.ndarray:
        """``μ_w((−∞, x])``: the weight of ``w`` on eigenvalues ``λ ≤ x·ρ`` (an array for an array)."""
        t = np.asarray(x, dtype=np.float64)
        cum = np.concatenate([[0.0], np.cumsum(self.weights)])
        out = cum[np.searchsorted(self.rel_eigs, t, side="right")]
        return float(out) if t.ndim == 0 else out

    def to_dict(self) -> dict:
        """Plain data (lists for the arrays)."""
        return {"name": self.name, "params": list(self.params), "size": self.size,
                "rel_eigs": self.rel_eigs.tolist(), "weights": self.weights.tolist(), "radius": self.radius,
                "g_sq": self.g_sq, "w_sq": self.w_sq, "lambda_ratio": self.lambda_ratio, "route": self.route,
                "exact": self.exact, "iterations": self.iterations, "converged": self.converged,
                "notes": list(self.notes)}


class SpectralProfile(ByBlock[BlockProfile]):
    """What :func:`spectral_profile` returns: a :class:`BlockProfile` per block, in partition order.

    ``D()``, ``dplus(rtol)``, ``dplus_curve(rtols)`` and ``cdf(x)`` give ``{block: value}``.
    """

    def __init__(self, blocks: Sequence[BlockProfile], meta: Mapping[str, object]):
        super().__init__(blocks)
        self.meta = dict(meta)

    def D(self) -> dict[str, float | None]:
        """``{block: D = (ρ/‖g‖²)·∫ x dμ_w}`` (:meth:`BlockProfile.D`)."""
        return {b.name: b.D() for b in self}

    def dplus(self, rtol: float = 1e-10) -> dict[str, float | None]:
        """``{block: D⁺_τ = (‖g‖²/ρ)·∫_{|x|>τ} x⁻¹ dμ_w}`` at ``τ = rtol`` (:meth:`BlockProfile.dplus`)."""
        return {b.name: b.dplus(rtol) for b in self}

    def dplus_curve(self, rtols: Sequence[float]) -> dict[str, np.ndarray]:
        """``{block: D⁺_τ for τ in rtols}`` (:meth:`BlockProfile.dplus_curve`)."""
        return {b.name: b.dplus_curve(rtols) for b in self}

    def cdf(self, x: float | Sequence[float] | np.ndarray) -> dict[str, float | np.ndarray]:
        """``{block: μ_w((−∞, x])}`` (:meth:`BlockProfile.cdf`)."""
        return {b.name: b.cdf(x) for b in self}

    def to_dict(self) -> dict:
        """Plain data: ``{"meta": {...}, "blocks": {name: BlockProfile.to_dict()}}``."""
        return {"meta": dict(self.meta), "blocks": {b.name: b.to_dict() for b in self}}

    def plot(self, title: str = "") -> Figure:
        """The cumulative profile per block (:func:`coupled_curvature.numeric.core.plots.profile_figure`)."""
        from coupled_curvature.numeric.core.plots import profile_figure

        return profile_figure(self.to_dict(), title)

    def __repr__(self) -> str:
        rows = [f"{b.name}: {b.route}, {b.rel_eigs.size} atoms, ρ/‖g‖² = {_fmt(b.lambda_ratio)}, "
                f"D = {_fmt(b.D())}" for b in self]
        return f"SpectralProfile({len(self)} blocks)\n" + "\n".join(rows)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.6e}"


@with_settings()
def spectral_profile(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    **settings: Any,
) -> SpectralProfile:
    """The profile ``μ_w = Σ_i ((u_iᵀw)²/‖w‖²) δ(λ_i/ρ)`` and ``ρ/‖g‖²`` (``ρ = max|λ_i|``) of every block of
    ``H_bb = ∇²_bb L`` in float64, so that ``D = (ρ/‖g‖²)∫x dμ_w`` and ``D⁺_τ = (‖g‖²/ρ)∫_{|x|>τ}x⁻¹dμ_w``.

    ``settings`` are ``diagnose``'s run settings (:data:`~coupled_curvature.base.run_settings.SETTINGS`), checked by
    the same :func:`~coupled_curvature.numeric.core.options.run_options`, and the curvature comes from the same
    engine; the model is copied to float64 and never modified. ``method``: ``"gram"`` (the default, as
    everywhere: the exact Gram route where the network is piecewise affine in the block, else dense up to
    ``max_dense``), ``"auto"`` (the same, else Krylov), ``"dense"`` or ``"krylov"`` (every block;
    ``pinv_rtol``, ``krylov_max_iter`` and ``krylov_tol`` are the run's target, as in ``diagnose``). A block that
    no allowed route takes raises ``InvalidInputError`` saying which method takes it.

    Args:
        model: the network whose blocks are profiled (a float64 copy), as for
            :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`.
        loss_fn: the scalar loss ``loss_fn(output, target)``, as for ``diagnose``.
        data: a batch or an iterable of batches, as for ``diagnose``.
        **settings: ``diagnose``'s run settings by keyword, each declared once in
            :data:`~coupled_curvature.base.run_settings.SETTINGS`: the blocks (``blocks``, ``frozen``, ``gauge``),
            the routes and their targets (``method``, ``max_dense``, ``pinv_rtol``, ``krylov_max_iter``, ``krylov_tol``,
            ``gram_memory``, ``inverse``), the data (``reduction``, ``output``, ``target``, ``allow_train_mode``) and
            the run (``process_group``, ``progress``, ``device``).

    Returns:
        SpectralProfile: per block the relative eigenvalues, the
        weights of ``w`` on them, ``ρ`` and ``‖g‖²``.

    Raises:
        InvalidInputError: a block that no allowed route takes (with the method that takes it), a setting out of
            range, or data the model cannot take.
        TrainModeError: the model is in training mode and ``allow_train_mode`` is off.

    See also:
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`,
        :func:`~coupled_curvature.numeric.studies.cutoff.cutoff_sensitivity`.

    >>> from coupled_curvature.numeric.core.diagnostics import diagnose
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> p = spectral_profile(net, nn.CrossEntropyLoss(), (X, y))
    >>> b = p["0.weight"]
    >>> b.route, round(float(b.weights.sum()), 12), float(b.rel_eigs.max())
    ('gram', 1.0, 1.0)
    >>> d = diagnose(net, nn.CrossEntropyLoss(), (X, y))["0.weight"]
    >>> abs(b.D() - d.coupled) < 1e-10 * d.coupled, abs(b.dplus(1e-10) - d.inverse_coupled) < 1e-9 * d.inverse_coupled
    (True, True)
    """
    o = run_options(**settings)
    p = plan(model, loss_fn, data, o, spectral_required=True)
    bar = progress_bar("spectral_profile", len(p.partition), o.progress)
    run = execute(p, bar)
    bar.close()
    records = []
    for c in run.blocks.values():
        if c.spectral is SpectralRoute.NONE:
            raise InvalidInputError(f"block {c.name!r}: {c.spectral_reason}; use method='auto' (Krylov there) "
                                    "or raise max_dense")
        refused = run.gram_refused.get(c.name)
        notes = [*c.notes, *([f"the Gram route does not apply: {refused}"] if refused else [])]
        head: dict[str, Any] = dict(name=c.name, params=tuple(c.members), size=c.size, g_sq=float(c.grad @ c.grad),
                    w_sq=float(c.w @ c.w))
        if head["w_sq"] == 0.0:
            records.append(BlockProfile(**head, rel_eigs=np.zeros(0), weights=np.zeros(0), radius=0.0,
                                        route=str(c.spectral), exact=c.spectral is not SpectralRoute.KRYLOV,
                                        notes=(*notes, "w = 0: the profile is undefined")))
        elif c.spectral is SpectralRoute.GRAM:
            assert c.gram is not None, "the Gram route leaves its form"
            records.append(_gram_profile(head, c.gram, notes))
        elif c.spectral is SpectralRoute.DENSE:
            assert c.spectrum is not None, "the dense route leaves its spectrum"
            lam, coeff = c.spectrum.evals, c.spectrum.weights
            x, p_, rho = _atoms(lam, coeff / head["w_sq"], lam.size)
            records.append(BlockProfile(**head, rel_eigs=x, weights=p_, radius=rho, route="dense", exact=True,
                                        notes=tuple(notes)))
        else:
            assert c.krylov is not None, "the Krylov route leaves its form"
            records.append(_krylov_profile(head, c.krylov, notes))
    meta = {"method": o.method, "blocks": o.blocks if isinstance(o.blocks, str) else "custom",
            "max_dense": o.max_dense, "pinv_rtol": o.pinv_rtol, "n_samples": run.n_samples, "n_batches": len(p.batches),
            "device": str(p.device), "routes": {c.name: c.spectral_reason for c in run.blocks.values()}}
    return SpectralProfile(records, meta)


def _atoms(lam: np.ndarray, p: np.ndarray, n: int, radius: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """``(x, p, ρ)``: atoms ``x = λ/ρ`` sorted, those at rounding level (``|x| ≤ n·ε``) merged into one at 0."""
    rho = float(np.abs(lam).max()) if radius is None and lam.size else float(radius or 0.0)
    if rho == 0.0:
        return np.zeros(1), np.array([float(p.sum())]), 0.0
    x = lam / rho
    zero = np.abs(x) <= rounding_level(n)
    x, q = x[~zero], p[~zero]
    if zero.any():
        x, q = np.append(x, 0.0), np.append(q, p[zero].sum())
    order = np.argsort(x, kind="stable")
    return x[order], q[order], rho


def _gram_profile(head: dict, form: GramForm, notes: list[str]) -> BlockProfile:
    """Factor side (``BᵀB``, ``c_i = (u_iᵀw)²``) as a dense spectrum; Gram side (``G = BBᵀ``, ``c_i = (q_iᵀu)²``):
    ``p_i = c_i/(λ_i‖w‖²)`` above rounding level, the rest of the weight at 0 (the null space of ``B``)."""
    lam, c, w_sq = form.evals, form.weights, head["w_sq"]
    if form.side == "factor":
        x, p, rho = _atoms(lam, c / w_sq, lam.size)
    else:
        top = float(lam.max()) if lam.size else 0.0
        live = lam > rounding_level(lam.size) * top
        p = c[live] / (lam[live] * w_sq)
        x, p, rho = _atoms(np.append(lam[live], 0.0), np.append(p, max(0.0, 1.0 - float(p.sum()))), lam.size,
                           radius=top)
        if p[x == 0.0].sum() == 0.0:
            x, p = x[x != 0.0], p[x != 0.0]
    note = f"exact Gram route ({'G = BBᵀ' if form.side == 'gram' else 'BᵀB'} from {form.rows} rows of B)"
    return BlockProfile(**head, rel_eigs=x, weights=p, radius=rho, route="gram", exact=True, notes=(*notes, note))


def _krylov_profile(head: dict, form: KrylovForm, notes: list[str]) -> BlockProfile:
    """Gauss quadrature of the ``w`` run: Ritz values ``θ_j`` with weights ``s_{1j}²``; ``ρ`` as the run's cutoff."""
    k = form.w_steps
    theta, S = tridiagonal_eig(np.asarray(form.alphas[:k]), np.asarray(form.betas[: k - 1]))
    x, p, rho = _atoms(theta, S[0] ** 2, form.n, radius=form.max_abs_eig)
    verdict = "converged" if form.converged else f"not converged (relative error of D⁺ up to {form.error_estimate:.1e})"
    note = (f"approximate: Lanczos quadrature from w/‖w‖, {k} nodes, {form.iterations} Hessian-vector products, "
            f"{verdict} at pinv_rtol = {form.rtol:g}")
    return BlockProfile(**head, rel_eigs=x, weights=p, radius=rho, route="krylov", exact=False,
                        iterations=form.iterations, converged=form.converged, notes=(*notes, note))


def _checked_rtols(rtols: Sequence[float]) -> np.ndarray:
    try:
        r = np.asarray([float(v) for v in rtols], dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"rtols must be a sequence of numbers in [0, 1), got {rtols!r}; pass e.g. "
                                "[1e-12, 1e-10, 1e-8]") from None
    if r.size == 0 or not (np.isfinite(r).all() and (r >= 0).all() and (r < 1).all()):
        raise InvalidInputError(f"rtols must be a non-empty sequence of numbers in [0, 1), got {rtols!r}; pass "
                                "e.g. [1e-12, 1e-10, 1e-8]")
    return r
