"""Lanczos (Gauss) quadrature for ``wᵀH⁺_τ w`` when the block ``H`` is only available as products.

Lanczos started at ``q₁ = w/‖w‖`` with full (twice-repeated Gram–Schmidt)
reorthogonalisation builds ``H V_k = V_k T_k + β_k q_{k+1} e_kᵀ`` with a float64
tridiagonal ``T_k``. With Ritz values ``θ_j`` and eigenvectors ``s_j`` of ``T_k``::

    wᵀH⁺_τ w ≈ ‖w‖² e₁ᵀ f(T_k) e₁ = ‖w‖² Σ_{|θ_j| > τ} s_{1j}² / θ_j,   τ = rtol·max_j|θ_j|

(``f(λ) = 1/λ`` above the cutoff, 0 below; valid for indefinite ``H``). The estimate is the
exact value for ``H − β_k(q_{k+1}q_kᵀ + q_k q_{k+1}ᵀ)``, so it is exact when ``β_k = 0``
(the Krylov space is invariant). ``wᵀHw = ‖w‖² α₁`` is exact from the first step.

Convergence is claimed only when all of these hold (see :func:`krylov_pinv_form`):

* the cutoff classification is robust: the weight ``‖w‖²s_{1j}²`` of Ritz values whose
  residual interval ``|θ_j| ± r_j`` (``r_j = β_k|s_{kj}|``) reaches the band within 1 % of
  ``τ`` (widened by the uncertainty of ``max|λ|``), plus the share ``(r_j/gap_j)²`` of the
  others that may lie across it, priced at ``1/τ``, is below ``tol·|value|``;
* the Galerkin residual bound ``(β_k‖w‖ e_kᵀT_k⁺e₁)² / τ`` (``‖H⁺_τ‖ ≤ 1/τ``) plus the rounding
  estimate ``Σ_kept ‖w‖²s_{1j}² δ/θ_j²`` (``δ = 2·eps·√k·max|θ|``) is ``≤ tol·|value|``;
* unless the space is invariant, the value moved by at most ``tol·|value|`` over the last
  ``4`` checks.

``max|λ|`` (hence ``τ``) comes from the ``w`` run's Ritz values and from a short probe run
(at most 64 products) from a random vector, done first: ``w`` may be nearly orthogonal to
the top eigenvector. The cutoff band is widened by the probe's residuals.

In practice the criterion certifies once the Krylov space of ``w`` is numerically invariant
(``β_k`` at rounding level: about as many steps as ``w`` has distinct eigen-components,
i.e. the rank of ``H`` restricted to it, plus one), or, for a large ``rtol``, once every
Ritz pair with weight has converged. Estimates taken earlier are often accurate but are not
certified: the price ``1/τ`` guards against eigenvalues just above the cutoff that Lanczos
has not found yet, which no stopping rule based on the estimate alone can see.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.lanczos import Lanczos, ritz, tridiagonal_eig
from coupled_curvature.numeric.linalg.scaled import Scaled, ScaledValue, safe_norm

STABLE_CHECKS = 4
CUTOFF_MARGIN = 0.01
_ROUNDING = 2.0  # Ritz values are trusted to _ROUNDING·eps·sqrt(k)·max|θ| at best
_PROBE_MAX = 64
_PROBE_RES = 1e-2
_EVERY_STEP_UNTIL = 50
_CHECKS_PER_DOUBLING = 25


@dataclass(frozen=True)
class KrylovForm(ScaledValue):
    """Result of :func:`krylov_pinv_form` (``value ≈ wᵀH⁺_τ w``; ``wHw`` exact).

    ``error_estimate`` is relative to ``|value|``; ``iterations`` counts all products
    (``w_steps`` of the ``w`` run plus ``probe_steps``); ``rank`` counts the kept Ritz
    values; ``invariant`` says the Krylov space of ``w`` was found to be invariant;
    ``probe_radius`` brackets ``max|λ|`` from the random-start probe. ``alphas``/``betas``
    hold the ``w`` run's tridiagonal (``betas[i]`` is the ``β`` after step ``i + 1``), so
    :func:`rethreshold` can re-cut it. ``scaled`` is ``value`` as a :class:`~.scaled.Scaled` (the
    quadrature runs on ``w/‖w‖`` and ``T/σ``, ``σ`` a power of two near ``max|λ|``, and the scales are put
    back exactly); ``value`` is ``None`` where it does not fit float64.
    """

    value: float | None
    wHw: float
    error_estimate: float
    iterations: int
    converged: bool
    ritz_min: float
    ritz_max: float
    rank: int
    cutoff: float
    max_abs_eig: float
    invariant: bool
    w_norm: float
    n: int
    w_steps: int
    probe_steps: int
    probe_radius: tuple[float, float]
    rtol: float
    tol: float
    alphas: tuple[float, ...] = ()
    betas: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    scaled: Scaled | None = None

    @property
    def ritz_extremes(self) -> tuple[float, float]:
        return (self.ritz_min, self.ritz_max)


def krylov_pinv_form(
    matvec: Callable[[Tensor], Tensor],
    w: Tensor,
    *,
    rtol: float = 1e-10,
    max_iter: int = 1000,
    tol: float = 1e-7,
    Hw: Tensor | None = None,
    seed: int = 0,
) -> KrylovForm:
    """``wᵀH⁺_τ w`` for symmetric ``H`` given by ``matvec``, ``τ = rtol·max|λ(H)|``, by Lanczos quadrature.

    ``‖w‖² e₁ᵀ f(T_k) e₁`` with ``f(λ) = 1/λ`` for ``|λ| > τ`` and 0 otherwise. ``max|λ|``
    comes from the Ritz values of the ``w`` run and of a short probe run from a random
    vector (at most 64 extra products). At most ``max_iter`` products in the ``w`` run
    (``Hw = H w``, when given, saves the first). ``converged`` is ``True`` only under the
    conservative criterion of the module docstring; otherwise ``value`` is the last
    estimate and ``error_estimate`` says how far it may be off (relative).

    >>> H = torch.diag(torch.tensor([4.0, -2.0, 1e-14, 0.0], dtype=torch.float64))
    >>> f = krylov_pinv_form(lambda v: H @ v, torch.ones(4, dtype=torch.float64))
    >>> round(f.value, 12), round(f.wHw, 12), f.converged, f.rank
    (-0.25, 2.0, True, 2)
    """
    run = LanczosRun(w, rtol=rtol, max_iter=max_iter, tol=tol, Hw=Hw, seed=seed)
    while run.vector is not None:
        run.feed(matvec(run.vector))
    return run.result()


def rethreshold(form: KrylovForm, rtol: float) -> KrylovForm:
    """The same Lanczos run cut at another ``rtol`` (no new products), re-assessed.

    >>> H = torch.diag(torch.tensor([1.0, 1e-3, 1e-6], dtype=torch.float64))
    >>> f = krylov_pinv_form(lambda v: H @ v, torch.ones(3, dtype=torch.float64))
    >>> round(f.value), round(rethreshold(f, 1e-4).value)
    (1001001, 1001)
    """
    _check_rtol(rtol)
    if form.w_norm == 0.0:
        return form
    run = _Tridiagonal(np.asarray(form.alphas), np.asarray(form.betas), form.n, form.invariant,
                       form.probe_radius)
    history = {k: run.assess(k, form.w_norm, rtol, form.tol, {}, False)[0]
               for k in _check_points(form.w_steps - 1)}
    return _form(run, form.w_norm, rtol, form.tol, history, form.probe_steps, form.ritz_extremes)


class LanczosRun:
    """A Lanczos quadrature run driven from outside: multiply :attr:`vector`, :meth:`feed` the product.

    First a short probe from a random vector (for ``max|λ|``), then the run from
    ``w/‖w‖``. Lets a caller advance several runs with one pass over the data per step.
    """

    def __init__(self, w: Tensor, *, rtol: float, max_iter: int, tol: float, Hw: Tensor | None = None,
                 seed: int = 0):
        if not isinstance(w, Tensor) or w.dim() != 1 or w.numel() == 0:
            raise InvalidInputError("w must be a non-empty 1-D tensor")
        if not bool(torch.isfinite(w).all()):
            raise InvalidInputError("w holds non-finite values")
        _check_rtol(rtol)
        if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
            raise InvalidInputError(f"max_iter must be a positive int, got {max_iter!r}")
        _check_tol(tol)
        w = w.detach().to(torch.float64).reshape(-1)
        self.n = w.numel()
        self.rtol, self.tol, self.max_iter = float(rtol), float(tol), max_iter
        self.w_norm = safe_norm(w)
        self._history: dict[int, float] = {}
        self._done = self.w_norm == 0.0
        self._in_probe = not self._done
        self._probe_radius = (0.0, 0.0)
        self._probe_extremes: tuple[float, float] | None = None
        self._probe_steps = 0
        self._invariant = False
        self._Hw = None if Hw is None or self._done else Hw.detach().to(torch.float64).reshape(-1) / self.w_norm
        self._w = w
        if self._in_probe:
            gen = torch.Generator().manual_seed(seed)
            start = torch.randn(self.n, generator=gen, dtype=torch.float64)  # drawn on the CPU: the same on any device
            self._lz = Lanczos(start.to(w.device), min(_PROBE_MAX, self.n))
        else:
            self._lz = Lanczos(w, 1)

    @property
    def vector(self) -> Tensor | None:
        """The next Lanczos vector to multiply by ``H``; ``None`` when the run is over."""
        return None if self._done else self._lz.vector

    def feed(self, Hq: Tensor) -> None:
        """Take ``H q`` for ``q = vector`` and advance one step."""
        if self._done:
            raise InvalidInputError("this Lanczos run is finished; no more products needed")
        Hq = Hq.detach().to(torch.float64).reshape(-1)
        if Hq.numel() != self.n:
            raise InvalidInputError(f"the operator returned a product of the wrong size ({Hq.numel()} entries for a "
                                    f"vector of {self.n}); pass an operator that keeps the size")
        if not bool(torch.isfinite(Hq).all()):
            raise InvalidInputError("the operator returned a product with non-finite values (a float64 overflow, e.g. "
                                    "weights rescaled by 1e160); use a model rescaled towards unit scale")
        broke = self._lz.step(Hq)
        steps = len(self._lz.alphas)
        if self._in_probe:
            if broke or steps >= self._lz.cap or (steps >= 3 and self._probe_settled()):
                self._end_probe()
            return
        budget_left = steps < self._lz.cap
        if broke or steps >= self.n:
            self._invariant, self._done = True, True
        elif not budget_left:
            self._done = True
        elif _is_check(steps):
            run = _Tridiagonal(np.asarray(self._lz.alphas), np.asarray(self._lz.betas), self.n, False,
                               self._probe_radius)
            value, _, converged, _ = run.assess(steps, self.w_norm, self.rtol, self.tol, self._history, False)
            self._history[steps] = value
            self._done = converged

    def result(self) -> KrylovForm:
        """The estimate and its assessment (the run must be over)."""
        if not self._done:
            raise InvalidInputError("the Lanczos run is not finished; keep feeding products")
        if self.w_norm == 0.0:
            return KrylovForm(0.0, 0.0, 0.0, 0, True, 0.0, 0.0, 0, 0.0, 0.0, True, 0.0, self.n, 0, 0,
                              (0.0, 0.0), self.rtol, self.tol, notes=("w = 0: wᵀH⁺w = 0",))
        run = _Tridiagonal(np.asarray(self._lz.alphas), np.asarray(self._lz.betas), self.n,
                           self._invariant, self._probe_radius)
        return _form(run, self.w_norm, self.rtol, self.tol, self._history, self._probe_steps,
                     self._probe_extremes)

    def _probe_settled(self) -> bool:
        """The probe's extreme Ritz values have residual ≤ 1 % of ``max|θ|``."""
        theta, res = ritz(self._lz)
        return bool(max(res[0], res[-1]) <= _PROBE_RES * max(float(np.abs(theta).max()), 1e-300))

    def _end_probe(self) -> None:
        theta, res = ritz(self._lz)
        if self._lz.broke:  # the probe's space is invariant: its Ritz values are eigenvalues
            res = np.zeros_like(res)
        lo = float(np.abs(theta).max())
        hi = max(abs(float(theta[0])) + float(res[0]), abs(float(theta[-1])) + float(res[-1]), lo)
        self._probe_radius, self._probe_steps = (lo, hi), len(self._lz.alphas)
        self._probe_extremes = (float(theta[0]), float(theta[-1]))
        self._in_probe, self._invariant = False, False
        self._lz = Lanczos(self._w, min(self.max_iter, self.n), scale=lo)
        if self._Hw is not None:
            self.feed(self._Hw)


class _Tridiagonal:
    """The ``w`` run's tridiagonal (``b[i]`` is the ``β`` after step ``i + 1``) and the probe's bracket.

    :meth:`assess` works on ``T/σ`` and ``w/‖w‖`` with ``σ = 2^e`` near the probe's ``max|λ|`` (exact
    scalings), so that neither ``‖w‖²`` nor ``1/θ`` overflows on a rescaled block; its values are in units
    of ``‖w‖²/σ`` (:meth:`unscaled` puts them back)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, n: int, invariant: bool, probe: tuple[float, float]):
        self.a, self.b, self.n, self.invariant, self.probe = a, b, n, invariant, probe
        self.w_steps = len(a)
        self.exp = math.frexp(probe[1])[1] if probe[1] > 0 and math.isfinite(probe[1]) else 0

    def unscaled(self, x: float, w_norm: float) -> Scaled:
        """A value of :meth:`assess` (units ``‖w‖²/σ``) in the units of ``wᵀH⁺w``."""
        return Scaled.of(x).times((w_norm, 2), (2.0, -self.exp))

    def radius_bounds(self, theta: np.ndarray, res: np.ndarray) -> tuple[float, float]:
        """``(lower, upper)`` estimates of ``max|λ(H)|/σ`` from the (scaled) Ritz values, residuals and probe."""
        i = int(np.argmax(np.abs(theta)))
        lo, hi = float(abs(theta[i])), float(abs(theta[i]) + res[i])
        return max(lo, math.ldexp(self.probe[0], -self.exp)), max(hi, math.ldexp(self.probe[1], -self.exp))

    def assess(self, k: int, w_norm: float, rtol: float, tol: float, history: dict[int, float],
               final: bool) -> tuple[float, float, bool, dict]:
        """Estimate after ``k`` steps of the ``w`` run, its relative error estimate and the verdict."""
        sigma_exp = self.exp
        a, b = np.ldexp(self.a[:k], -sigma_exp), np.ldexp(self.b[:k], -sigma_exp)
        theta, S = tridiagonal_eig(a, b[: k - 1])
        beta = float(b[k - 1])
        s1, sk = S[0], S[-1]
        invariant = final and self.invariant
        w_norm = 1.0  # values in units of ‖w‖²/σ
        rho, rho_hi = self.radius_bounds(theta, beta * np.abs(sk))
        delta = _ROUNDING * float(np.finfo(np.float64).eps) * math.sqrt(k) * rho
        tau = rtol * rho
        keep = np.abs(theta) > tau
        weights = w_norm**2 * s1**2
        value = float(np.sum(weights[keep] / theta[keep])) if keep.any() else 0.0
        err = 0.0
        if keep.any():
            mag = np.abs(theta[keep])
            # Galerkin residual r = β_k‖w‖(e_kᵀT⁺e₁) q_{k+1}: the kept part errs by rᵀH⁺_τ r ≤ ‖r‖²/τ,
            # a bound that also covers eigenvalues just above τ that Lanczos has not found yet
            resid = beta * w_norm * float(np.sum(sk[keep] * s1[keep] / theta[keep]))
            if resid != 0.0:
                err += resid**2 / (tau * (1 - CUTOFF_MARGIN)) if tau > 0 else math.inf
            # rounding: every kept Ritz value may be off by delta (first order in 1/θ)
            err += float(np.sum(weights[keep] * delta / (mag * np.maximum(mag - delta, 0.5 * mag))))
        if not (invariant and rho == 0.0):  # rho = 0 on an invariant space: w ∈ null(H), H⁺w = 0
            err += _cut_error(theta, weights, beta * np.abs(sk), delta, invariant, tau, rtol * rho_hi)
        if not invariant:
            earlier = [v for j, v in sorted(history.items()) if j < k][-STABLE_CHECKS:]
            err += max((abs(value - v) for v in earlier), default=math.inf) \
                if len(earlier) == STABLE_CHECKS else math.inf
        rel = err / abs(value) if value != 0.0 else (0.0 if err == 0.0 else math.inf)
        info = {"ritz_min": math.ldexp(float(theta.min()), sigma_exp),
                "ritz_max": math.ldexp(float(theta.max()), sigma_exp), "rank": int(keep.sum()),
                "cutoff": math.ldexp(tau, sigma_exp), "rho": math.ldexp(rho, sigma_exp)}
        return value, rel, bool(rel <= tol), info


def _cut_error(theta, weights, res, delta, invariant, tau, tau_hi) -> float:
    """Weight that may sit on the wrong side of the cutoff, priced at ``1/τ``.

    A Ritz pair with residual ``r`` has at most ``(r/gap)²`` of its mass on eigenvectors
    farther than ``gap`` from ``θ``; a Ritz value whose residual interval (at least the
    rounding level ``delta``) reaches the cutoff band counts in full. On an invariant
    space the residuals are rounding noise and only the band test applies.
    """
    lo_band, hi_band = tau * (1 - CUTOFF_MARGIN), tau_hi * (1 + CUTOFF_MARGIN)
    if lo_band <= 0.0:
        return 0.0 if not weights.any() else math.inf
    mag = np.abs(theta)
    gap = np.where(mag < lo_band, lo_band - mag, np.where(mag > hi_band, mag - hi_band, 0.0))
    leak = np.zeros_like(res) if invariant else res
    crossing = gap <= np.maximum(leak, delta)
    share = np.where(crossing, 1.0, np.minimum(1.0, (leak / np.where(gap > 0, gap, 1.0)) ** 2))
    return float(np.sum(weights * share)) / lo_band


def _form(run: _Tridiagonal, w_norm: float, rtol: float, tol: float, history: dict[int, float],
          probe_steps: int, probe_extremes: tuple[float, float] | None = None) -> KrylovForm:
    value, err, converged, info = run.assess(run.w_steps, w_norm, rtol, tol, history, True)
    ritz_min, ritz_max = info["ritz_min"], info["ritz_max"]
    if probe_extremes is not None:
        ritz_min, ritz_max = min(ritz_min, probe_extremes[0]), max(ritz_max, probe_extremes[1])
    iterations = run.w_steps + probe_steps
    notes = () if converged else (
        f"Lanczos did not converge in {iterations} products (estimated relative error {err:.1e})",)
    scaled = run.unscaled(value, w_norm)
    return KrylovForm(
        value=scaled.value, scaled=scaled, wHw=w_norm**2 * float(run.a[0]), error_estimate=err, iterations=iterations,
        converged=converged, ritz_min=ritz_min, ritz_max=ritz_max, rank=info["rank"],
        cutoff=info["cutoff"], max_abs_eig=info["rho"], invariant=run.invariant, w_norm=w_norm,
        n=run.n, w_steps=run.w_steps, probe_steps=probe_steps, probe_radius=run.probe, rtol=rtol,
        tol=tol, alphas=tuple(run.a.tolist()), betas=tuple(run.b.tolist()), notes=notes,
    )


def _is_check(steps: int) -> bool:
    """Assess every step up to 50, then about 25 times per doubling of the step count."""
    return steps <= _EVERY_STEP_UNTIL or steps % max(1, steps // _CHECKS_PER_DOUBLING) == 0


def _check_points(last: int) -> list[int]:
    return [k for k in range(1, last + 1) if _is_check(k)]


def _check_rtol(rtol: object) -> None:
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not (0.0 <= rtol < 1.0):
        raise InvalidInputError(f"rtol must be a number in [0, 1), got {rtol!r}")


def _check_tol(tol: object) -> None:
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0.0 < tol < 1.0):
        raise InvalidInputError(f"tol must be a number in (0, 1), got {tol!r}")
