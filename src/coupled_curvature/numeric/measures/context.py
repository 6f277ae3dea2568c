"""What the measures share for one (model, loss, data): the float64 flat view, the gradient, dense
Hessian blocks, :func:`diagnose` runs and verified per-sample factors, each built once.

A measure pops ``cache``, ``allow_train_mode``, ``output`` and ``target`` (which tensor of the model's output
the loss receives, which entry of a mapping batch holds the targets: :func:`diagnose`'s) with
:func:`measure_context`, its own options, then calls :func:`refuse_unknown_options` for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.linalg.tolerance import agrees
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET, check_target
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.core.hvp import CurvatureSums, block_curvature
from coupled_curvature.numeric.factors.gauss_newton import GaussNewton, gauss_newton
from coupled_curvature.numeric.factors.kronecker import LinearFactors, linear_factors
from coupled_curvature.numeric.factors.layers import linear_module_of
from coupled_curvature.base.run_settings import DEFAULTS

__all__ = ["MeasureContext", "measure_context", "refuse_unknown_options"]


class MeasureContext:
    """Everything the measures share for one (model, loss, data): built lazily, once."""

    def __init__(self, model: nn.Module, loss_fn: Callable, data: object, allow_train_mode: bool,
                 call: ModelCall = ModelCall(), target: str | Callable = DEFAULT_TARGET):
        self.model, self.loss_fn, self.data = model, loss_fn, data
        self.allow_train_mode, self.call, self.target = allow_train_mode, call, target
        self.flat = FlatLoss(model, loss_fn, data, allow_train_mode=allow_train_mode, call=call, target=target)
        self._dense: dict[frozenset, dict[str, CurvatureSums]] = {}
        self._diag: dict[tuple, Diagnosis] = {}
        self._factors: dict[str, LinearFactors] | None = None
        self._gn: dict[tuple, tuple[dict[str, GaussNewton], dict[str, str]]] = {}
        self._grad: Tensor | None = None

    @property
    def grad(self) -> Tensor:
        """``∇L(θ₀)`` (flat, cached)."""
        if self._grad is None:
            self._grad = self.flat.grad()
        return self._grad

    def _block_hvp(self, name: str, v: Tensor) -> Tensor:
        full = torch.zeros(self.flat.n, dtype=torch.float64)
        full[self.flat.block(name)] = v
        return self.flat.hvp(full)[self.flat.block(name)]

    def gauss_newton(self, names: Iterable[str], factor: bool = False) -> tuple[dict[str, GaussNewton], dict[str, str]]:
        """Verified per-sample Gauss–Newton sums (:func:`~coupled_curvature.numeric.factors.gauss_newton.gauss_newton`) of Linear/Conv tensors.

        A tensor is accepted only if ``Σ_n J_nᵀΛ_nJ_n`` times ``w_b`` and times a seeded Rademacher
        vector, and ``Σ_n J_nᵀe_n``, match exact Hessian-vector products and the gradient to
        ``1e-9`` relative (with ``factor``, also ``Bᵀ(Bw_b)`` and ``Bᵀs``). Returns the accepted sums
        and ``{name: reason}`` for the tensors that were tried and rejected.
        """
        names = [n for n in names if linear_module_of(self.flat.net, [n]) is not None]
        key = (frozenset(names), factor)
        for (have, fac), result in self._gn.items():
            if key[0] <= have and (fac or not factor):
                return ({n: g for n, g in result[0].items() if n in key[0]},
                        {n: r for n, r in result[1].items() if n in key[0]})
        if not names:
            return {}, {}
        gen = torch.Generator().manual_seed(0)
        probes = {}
        for n in names:
            size = self.flat.block(n).stop - self.flat.block(n).start
            z = torch.randint(0, 2, (size,), generator=gen).to(torch.float64) * 2 - 1
            probes[n] = torch.stack([self.flat.theta0[self.flat.block(n)], z], dim=1)
        sums = gauss_newton(self.flat.objective, {n: [n] for n in names}, probes=probes, factor=factor)
        accepted, rejected = {}, {}
        for n in names:
            gn = sums.get(n)
            if gn is None:
                rejected[n] = ("no per-sample factor (the loss couples samples, its output Hessian is indefinite or "
                               "the model has too many outputs)")
                continue
            exact = [self._block_hvp(n, probes[n][:, j]) for j in range(2)]
            g = self.grad[self.flat.block(n)]
            if not (all(agrees(gn.products[:, j], exact[j], rtol=1e-9) for j in range(2)) and agrees(gn.grad, g, rtol=1e-9)):
                rejected[n] = ("Σ J_nᵀΛ_nJ_n differs from exact Hessian-vector products: the network is not "
                               "piecewise linear above the layer, or samples interact")
            elif factor and (gn.B is None or gn.s is None):  # B and s are stacked together
                rejected[n] = "no per-sample factor Λ_n = C_nᵀC_n with e_n ∈ range(Λ_n)"
            elif factor and not (gn.B is not None and gn.s is not None  # (as the branch above checked)
                                 and agrees(gn.B.T @ (gn.B @ probes[n][:, 0]), exact[0], rtol=1e-9)
                                 and agrees(gn.B.T @ gn.s, g, rtol=1e-9)):
                rejected[n] = "BᵀB w ≠ H w or Bᵀs ≠ g"
            else:
                accepted[n] = gn
        self._gn[key] = (accepted, rejected)
        return accepted, rejected

    def factors(self) -> dict[str, LinearFactors]:
        """Verified per-sample factors of the plain ``nn.Linear`` layers, keyed by module path."""
        if self._factors is None:
            self._factors = linear_factors(self.flat)
        return self._factors

    def dense(self, blocks: Iterable[str]) -> dict[str, CurvatureSums]:
        """``g_b``, ``H_bb w_b`` and dense ``H_bb`` for the named tensor blocks (cached)."""
        want = frozenset(blocks)
        for have, result in self._dense.items():
            if want <= have:
                return result
        partition = {n: [n] for n in self.flat.names}
        result = block_curvature(self.flat.objective, partition, set(want))
        self._dense[want] = result
        return result

    def dense_hessians(self, blocks: Iterable[str]) -> dict[str, Tensor]:
        """Dense ``H_bb`` of the named tensor blocks (from :meth:`dense`, cached alike)."""
        names = list(blocks)
        sums = self.dense(names)
        out = {}
        for n in names:
            H = sums[n].hessian()
            assert H is not None, n  # block_curvature builds H_bb of every block it is asked for densely
            out[n] = H
        return out

    def small_blocks(self, max_dense: int) -> list[str]:
        return [n for n, s in zip(self.flat.names, self.flat.sizes) if s <= max_dense]

    def diagnosis(self, settings: Mapping[str, Any]) -> Diagnosis:
        """:func:`diagnose` once per run settings (:data:`~coupled_curvature.base.run_settings.SETTINGS`; ``output``,
        ``target`` and ``allow_train_mode`` are the context's). Without ``inverse`` a cached run whose settings
        differ only in what ``D⁺`` reads (cutoff, route, ``max_dense``, Krylov budget) serves: ``D`` needs no
        ``H⁺``."""
        inverse = bool(settings.get("inverse", DEFAULTS["inverse"]))
        shared = {k: v for k, v in settings.items() if k not in _DPLUS_ONLY}
        if not inverse:
            for (same, _), d in self._diag.items():
                if same == _key(shared):
                    return d
        key = (_key(shared), _key({k: v for k, v in settings.items() if k in _DPLUS_ONLY}) if inverse else ())
        if key not in self._diag:
            run = dict(settings) if inverse else {**shared, "inverse": False, "max_dense": 0}
            self._diag[key] = diagnose(self.model, self.loss_fn, self.data, allow_train_mode=self.allow_train_mode,
                                       output=self.call.output, target=self.target, **run)
        return self._diag[key]


#: the settings only D⁺ depends on
_DPLUS_ONLY = frozenset({"inverse", "pinv_rtol", "method", "max_dense", "krylov_max_iter", "krylov_tol", "gram_memory"})


def _key(settings: Mapping[str, object]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in settings.items()))


def measure_context(model, loss_fn, data, options: dict) -> MeasureContext:
    """The :class:`MeasureContext` of a measure call: popped from ``options`` are ``cache`` (a dict
    shared by measures on the same model, loss and data; the context is kept under ``"_context"``)
    and ``allow_train_mode``.

    >>> from torch import nn
    >>> net, cache = nn.Sequential(nn.Linear(1, 1)), {}
    >>> data = (torch.ones(2, 1), torch.zeros(2, 1))
    >>> measure_context(net, nn.MSELoss(), data, {"cache": cache}) is measure_context(net, nn.MSELoss(), data, {"cache": cache})
    True
    """
    cache = options.pop("cache", None)
    allow = bool(options.pop("allow_train_mode", False))
    call = ModelCall(options.pop("output", None))
    target = options.pop("target", DEFAULT_TARGET)
    check_target(target)
    if cache is None:
        return MeasureContext(model, loss_fn, data, allow, call, target)
    if not isinstance(cache, dict):
        raise InvalidInputError("cache must be a dict (one per model, loss and data)")
    ctx = cache.get("_context")
    if ctx is None:
        ctx = cache["_context"] = MeasureContext(model, loss_fn, data, allow, call, target)
    elif (ctx.call, ctx.target) != (call, target):
        raise InvalidInputError("this cache was built with other output=/target= options; pass a new cache (one per "
                                "model, loss, data and options)")
    return ctx


def refuse_unknown_options(name: str, options: dict) -> None:
    """Raise :class:`InvalidInputError` if ``options`` still holds anything once a measure took its own.

    >>> refuse_unknown_options("trace", {})
    >>> refuse_unknown_options("trace", {"prbes": 3})
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: measure 'trace' got unknown option(s): prbes
    """
    if options:
        raise InvalidInputError(f"measure {name!r} got unknown option(s): {', '.join(sorted(options))}")

