"""The width sweep's measurements of one trained net: gaps, ``D`` and ``D⁺`` per block (exact factor
route or :func:`diagnose`) with their aggregates, and the baselines (see :mod:`.width`).
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.factors.forms import reproduces_wHw
from coupled_curvature.numeric.factors.relu_mlp import (
    FactorForm,
    factor_pinv_forms,
    relu_ce_factors,
    trace_from_factors,
)
from coupled_curvature.numeric.measures.registry import evaluate
from coupled_curvature.numeric.measures.sharpness import SharpnessResult, adaptive_average
from coupled_curvature.numeric.models.datasets import Dataset

if TYPE_CHECKING:
    from coupled_curvature.numeric.studies.width import WidthConfig

__all__ = ["antithetic_adaptive_average", "dplus_records", "loss_and_error", "measure_net"]


def loss_and_error(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """``(mean cross-entropy, top-1 error)`` of ``model`` on ``(X, y)``.

    >>> net = nn.Sequential(nn.Linear(1, 2, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.zero_()
    >>> loss, err = loss_and_error(net, torch.ones(2, 1), torch.tensor([0, 1]))
    >>> round(loss, 6), err  # equal logits: log 2; argmax picks class 0, so one of two is wrong
    (0.693147, 0.5)
    """
    with torch.no_grad():
        out = model(X)
        return float(nn.functional.cross_entropy(out, y)), float((out.argmax(dim=1) != y).double().mean())


def antithetic_adaptive_average(model: nn.Module, loss_fn: Callable, data: object, *, rho: float = 0.5,
                                samples: int = 64, seed: int = 0) -> SharpnessResult:
    """Average adaptive sharpness ``E_ε[L(θ + |θ|⊙ε)] − L(θ)``, ``ε`` uniform on ``‖ε‖ = ρ``, estimated
    with antithetic common random numbers: :func:`sharpness.adaptive_average` applied to
    ``L̄(t) = (L(t) + L(2θ − t))/2``, i.e. each draw ``ε`` is paired with ``−ε``. The expectation is
    the same (the sphere is symmetric) but the first-order term ``⟨∇L, |θ|⊙ε⟩``, which otherwise
    swamps the curvature term on wide nets, cancels exactly in every pair.

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net[0].weight.fill_(2.0)
    >>> r = antithetic_adaptive_average(net, nn.MSELoss(), (torch.ones(1, 1), torch.zeros(1, 1)), rho=0.1, samples=4)
    >>> round(r.value, 12), r.stderr < 1e-12  # L = w²: ((2.2)² + (1.8)²)/2 − 4 = 0.04 for every draw
    (0.04, True)
    """
    flat = FlatLoss(model, loss_fn, data)
    theta0 = flat.theta0
    return adaptive_average(lambda t: 0.5 * (flat.loss(t) + flat.loss(2.0 * theta0 - t)), theta0,
                            rho=rho, samples=samples, seed=seed)


def _diagnose_kwargs(cfg: WidthConfig) -> dict[str, Any]:
    """``method=`` (and the Krylov limits) for :func:`diagnose` when it accepts them."""
    params = inspect.signature(diagnose).parameters
    if "method" not in params:
        if cfg.dplus_route in ("krylov", "auto"):
            raise InvalidInputError(f"dplus_route={cfg.dplus_route!r} needs diagnose(method=...), "
                                    "which this version lacks; use 'factor' or 'dense'")
        return {}
    kw: dict[str, Any] = {"method": cfg.dplus_route}
    if "krylov_max_iter" in params:
        kw.update(krylov_max_iter=cfg.krylov_max_iter, krylov_tol=cfg.krylov_tol)
    return kw


def _aggregate(values: Sequence[float]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return sum(vals) / len(vals), statistics.median(vals)


def dplus_records(d: Diagnosis, forms: Mapping[str, FactorForm] | None) -> list[dict]:
    """Per block ``D`` and ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` with how ``D⁺`` was computed and whether it is trustworthy.

    Factor route: trustworthy when ``‖Bw‖²`` reproduces :func:`diagnose`'s ``wᵀHw`` (autograd) to
    ``1e-8`` relative, i.e. the factorisation ``H_bb = BᵀB`` holds for this net. Diagnose route:
    when ``D⁺`` was computed and, for Krylov blocks, converged.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.arange(6) % 2
    >>> d = diagnose(net, nn.CrossEntropyLoss(), (X, y), inverse=False)
    >>> forms = factor_pinv_forms(relu_ce_factors(net, X), dict(net.named_parameters()), 1e-10)
    >>> [r["Dplus_trusted"] for r in dplus_records(d, forms)]
    [True, True, True, True]
    """
    out = []
    for b in d:
        rec = {"block": b.name, "size": b.size, "D": b.coupled, "wHw": b.wHw}
        if forms is not None:
            f = forms.get(b.name)
            ok = f is not None and b.w_sq > 0.0 and reproduces_wHw(f.wHw, b.wHw)
            dplus = None if f is None or f.value is None or b.w_sq == 0.0 else f.value / b.w_sq * b.g_sq
            alt = None if f is None or f.value_alt is None or b.w_sq == 0.0 else f.value_alt / b.w_sq * b.g_sq
            rec.update(Dplus=dplus, Dplus_alt=alt, Dplus_rank_alt=None if f is None else f.rank_alt,
                       Dplus_route=None if f is None else f.route,
                       Dplus_rank=None if f is None else f.rank, Dplus_trusted=bool(ok and dplus is not None),
                       min_kept_rel_eig=None if f is None else f.min_kept_rel_eig,
                       factor_wHw=None if f is None else f.wHw)
        else:
            converged = getattr(b, "krylov_converged", None)
            method = getattr(b, "method", "dense") if b.inverse_coupled is not None else None
            ok = b.inverse_coupled is not None and math.isfinite(b.inverse_coupled) and converged is not False
            rec.update(Dplus=b.inverse_coupled, Dplus_route=method, Dplus_rank=b.rank, Dplus_trusted=bool(ok),
                       min_kept_rel_eig=b.min_kept_rel_eig, krylov_converged=converged,
                       krylov_iterations=getattr(b, "krylov_iterations", None))
        out.append(rec)
    return out


def measure_net(model: nn.Module, data: Dataset, cfg: WidthConfig) -> dict:
    """Gaps and every selected measure of one trained net (see the module docstring)."""
    want = set(cfg.measures)
    n = min(cfg.measure_samples, len(data.X_train))
    sample = (data.X_train[:n], data.y_train[:n])
    loss_fn = nn.CrossEntropyLoss()
    train_loss, train_err = loss_and_error(model, *data.train)
    test_loss, test_err = loss_and_error(model, *data.test)
    row: dict = {"train_loss": train_loss, "test_loss": test_loss, "train_err": train_err, "test_err": test_err,
                 "gap_loss": test_loss - train_loss, "gap_err": test_err - train_err, "measure_samples": n}
    timings: dict[str, float] = {}
    memo: dict = {}

    def timed(name, fn):
        t = time.perf_counter()
        value = fn()
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - t, 3)
        return value

    def factors():
        if "factors" not in memo:
            memo["factors"] = timed("factors", lambda: relu_ce_factors(model, sample[0]))
        return memo["factors"]

    want_dplus = bool(want & {"Dplus_mean", "Dplus_median"})
    if want_dplus or want & {"D_mean", "D_median"}:
        via_diagnose = want_dplus and cfg.dplus_route != "factor"
        d = timed("diagnose", lambda: diagnose(
            model, loss_fn, sample, inverse=via_diagnose, max_dense=cfg.max_dense, pinv_rtol=cfg.pinv_rtol,
            **(_diagnose_kwargs(cfg) if via_diagnose else {})))
        forms = None
        if want_dplus and not via_diagnose:
            values = dict(model.named_parameters())
            forms = timed("Dplus", lambda: factor_pinv_forms(factors(), values, cfg.pinv_rtol, cfg.pinv_rtol_alt))
        blocks = dplus_records(d, forms if want_dplus and not via_diagnose else None)
        if not want_dplus:
            blocks = [{k: b[k] for k in ("block", "size", "D", "wHw")} for b in blocks]
        row["blocks"] = blocks
        row["D_mean"], row["D_median"] = _aggregate([b["D"] for b in blocks])
        if want_dplus:
            trusted = [b["Dplus"] for b in blocks if b["Dplus_trusted"]]
            row["Dplus_mean"], row["Dplus_median"] = _aggregate(trusted)
            if forms is not None:
                alt = [b["Dplus_alt"] for b in blocks if b["Dplus_trusted"]]
                row["Dplus_mean_alt"], row["Dplus_median_alt"] = _aggregate(alt)
            row["Dplus_blocks"] = f"{len(trusted)}/{len(blocks)}"
            row["Dplus_untrusted"] = [b["block"] for b in blocks if not b["Dplus_trusted"]]
    shared: dict = {}
    if "top_eig" in want:
        r = timed("top_eig", lambda: evaluate("top_eig", model, loss_fn, sample, cache=shared,
                                              max_iter=cfg.lanczos_iter, tol=cfg.lanczos_tol, seed=0))
        row["top_eig"], row["top_eig_converged"] = r["value"], r["converged"]
    if "trace" in want:
        fs = factors()
        row["trace"] = timed("trace", lambda: trace_from_factors(fs))
    if "adaptive_avg" in want:
        r = timed("adaptive_avg", lambda: antithetic_adaptive_average(model, loss_fn, sample, rho=cfg.adaptive_rho,
                                                                      samples=cfg.adaptive_samples, seed=0))
        row["adaptive_avg"], row["adaptive_avg_stderr"] = r.value, r.stderr
    if "fisher_rao" in want:
        row["fisher_rao"] = timed("fisher_rao", lambda: evaluate("fisher_rao", model, loss_fn, sample,
                                                                 cache=shared)["value"])
    if "lambda" in want:
        row["lambda"] = timed("lambda", lambda: evaluate("lambda", model, loss_fn, sample, orders=cfg.lambda_orders,
                                                         points=cfg.lambda_points, seed=0)["value"])
    row["measure_timings"] = timings
    return row
