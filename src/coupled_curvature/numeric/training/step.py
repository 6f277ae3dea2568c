"""One training step for any of baseline, CRR, SAM and ASAM: glue only.

SAM and ASAM are ``pytorch_optimizer.SAM`` (``adaptive=False`` / ``True``), the extra
``coupled-curvature[train]``; CRR is :func:`~coupled_curvature.numeric.training.crr.crr_penalty` added to
the loss. SAM's ascent step is ``e = ρ g/‖g‖``; ASAM's is ``e = ρ w²⊙g/‖|w|⊙g‖`` (element-wise), so under
a function-preserving element-wise scaling ``w -> a⊙w`` (``g -> g/a``) ASAM's ``e`` maps to ``a⊙e``
(equivariant), SAM's does not. pytorch-optimizer 4.1.0 takes the global norm in float32 even for float64
weights, so the radius holds to ~1e-7 relative (measured 3e-8); the net and its twin get the same float32
norm, so the equivariance is unaffected (measured ≤ 2e-15 relative in float64).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric.core.inputs import check_positive
from coupled_curvature.numeric.training.crr import check_orders, check_scale, check_trainable, crr_details

if TYPE_CHECKING:  # the train extra (imported at run time by _sam_class, which names the extra when missing)
    from pytorch_optimizer import SAM

__all__ = ["METHODS", "StepResult", "ascent_perturbation", "make_optimizer", "training_step"]

#: the training objectives :func:`training_step` takes
METHODS = ("baseline", "crr", "sam", "asam")
#: default radius per method (SAM's ρ is absolute, ASAM's relative to each weight's magnitude)
DEFAULT_RHO = {"sam": 0.05, "asam": 0.5}


@dataclass(frozen=True)
class StepResult:
    """The loss before the update (``loss``: the data term, ``penalty``: CRR's term, else ``None``)."""

    method: str
    loss: float
    penalty: float | None
    note: str | None = None


def _method(method: object) -> str:
    if method not in METHODS:
        raise InvalidInputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return str(method)


def _sam_class() -> Any:
    mod = MissingExtraError.require("pytorch_optimizer", "SAM and ASAM training", "train",
                                    "baseline and CRR training work without it")
    return mod.SAM


def _rho(method: str, rho: float | None) -> float:
    return check_positive(DEFAULT_RHO[method] if rho is None else rho, "rho", hint=f"; pass e.g. SAM's "
                          f"default {DEFAULT_RHO['sam']} or ASAM's {DEFAULT_RHO['asam']}")


def make_optimizer(model: nn.Module, method: str, *, lr: float = 1e-2, rho: float | None = None,
                   base: type[torch.optim.Optimizer] = torch.optim.Adam, **base_options: Any) -> torch.optim.Optimizer:
    """``base(params, lr)`` for baseline and CRR; ``pytorch_optimizer.SAM(params, base, rho, adaptive)`` for
    SAM (``ρ = 0.05``) and ASAM (``adaptive=True``, ``ρ = 0.5``).

    Args:
        model: the network whose parameters it updates.
        method: ``"baseline"``, ``"crr"``, ``"sam"`` or ``"asam"``.
        lr: the learning rate.
        rho: SAM's radius (default 0.05, ASAM's 0.5).
        base: the base optimizer class.
        **base_options: more keyword options of ``base``.

    Returns:
        A ``torch.optim.Optimizer``.

    Raises:
        InvalidInputError: an unknown method, or a bad ``lr`` or ``rho``.
        MissingExtraError: SAM or ASAM without the ``train`` extra (pytorch-optimizer).

    See also:
        :func:`training_step`.

    >>> net = nn.Linear(2, 2)
    >>> type(make_optimizer(net, "crr")).__name__
    'Adam'
    """
    method = _method(method)
    check_positive(lr, "lr", hint="; pass e.g. 1e-2")
    if method in ("baseline", "crr"):
        if rho is not None:
            raise InvalidInputError(f"rho is SAM's and ASAM's radius; method {method!r} takes none")
        # an Optimizer subclass takes lr= (the base class's own __init__ takes a defaults dict instead)
        return cast(Callable[..., torch.optim.Optimizer], base)(model.parameters(), lr=lr, **base_options)
    return _sam(model, method, rho, base, lr=lr, **base_options)


def _sam(model: nn.Module, method: str, rho: float | None, base: type[torch.optim.Optimizer],
         **base_options: Any) -> SAM:
    """``pytorch_optimizer.SAM`` over ``model``'s parameters for ``method`` (``"sam"`` or ``"asam"``)."""
    return _sam_class()(model.parameters(), base, rho=_rho(method, rho), adaptive=method == "asam", **base_options)


def training_step(model: nn.Module, loss_fn: Callable, X: Tensor, y: Tensor, optimizer: torch.optim.Optimizer,
                  method: str, *, crr_scale: float = 1e-3, crr_orders: Sequence[int] = (2, 3),
                  crr_points: int | None = None, generator: torch.Generator | int | None = None) -> StepResult:
    """One update of ``model`` on the batch ``(X, y)`` by ``optimizer`` (from :func:`make_optimizer`).

    - baseline: ``L = ℓ(model(X), y)``, one gradient step;
    - crr: ``L + crr_penalty(model, loss_fn, X, y, orders=crr_orders, scale=crr_scale, points=crr_points,
      generator=generator)``; pass one ``torch.Generator`` across steps for a fixed direction stream;
    - sam / asam: the library's two passes (ascent to ``θ + e``, gradient there, base step from ``θ``).

    Refused before any work (:func:`~.crr.check_trainable`): a call under ``torch.no_grad()``, a model whose
    parameters are all frozen, an optimizer that is not one.

    Args:
        model: the network, updated in place.
        loss_fn: a torch loss with a ``reduction`` attribute.
        X: the batch's inputs.
        y: the batch's targets.
        optimizer: from :func:`make_optimizer` with the same ``method``.
        method: ``"baseline"``, ``"crr"``, ``"sam"`` or ``"asam"``.
        crr_scale: the penalty's weight (crr).
        crr_orders: the penalty's derivative orders (crr).
        crr_points: a random subset of the batch for the penalty (crr).
        generator: the penalty's random stream (crr).

    Returns:
        StepResult: the method, the loss before the update and
        CRR's penalty (``None`` for the other methods).

    Raises:
        InvalidInputError: an unknown method, an optimizer that is not one, a call under ``torch.no_grad()``, or a
            model with every parameter frozen.

    See also:
        :func:`~coupled_curvature.numeric.training.crr.crr_penalty`,
        :func:`~coupled_curvature.numeric.measures.sharpness_curve.sharpness_curve`.

    >>> net = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(8, 2, dtype=torch.float64), torch.randint(0, 2, (8,))
    >>> opt, gen = make_optimizer(net, "crr"), torch.Generator().manual_seed(0)
    >>> r = training_step(net, nn.CrossEntropyLoss(), X, y, opt, "crr", generator=gen)
    >>> r.method, r.penalty is not None
    ('crr', True)
    """
    method = _method(method)
    check_trainable(model, "training_step")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidInputError(f"optimizer must be a torch.optim.Optimizer (make_optimizer builds one), got "
                                f"{type(optimizer).__name__}")
    if method == "crr":
        check_orders(crr_orders)
        check_scale(crr_scale, "crr_scale")
    if method in ("sam", "asam"):
        sam = _sam_class()
        if not isinstance(optimizer, sam) or optimizer.param_groups[0].get("adaptive") != (method == "asam"):
            raise InvalidInputError(f"method {method!r} needs the optimizer make_optimizer(model, {method!r}) builds")

        def closure() -> Tensor:
            optimizer.zero_grad()
            value = loss_fn(model(X), y)
            value.backward()
            return value

        loss = closure()
        optimizer.step(closure)
        return StepResult(method, float(loss.detach()), None)
    optimizer.zero_grad()
    loss = loss_fn(model(X), y)
    total, penalty, note = loss, None, None
    if method == "crr":
        details = crr_details(model, loss_fn, X, y, orders=crr_orders, scale=crr_scale, points=crr_points,
                              generator=generator)
        total, penalty, note = loss + details.penalty, float(details.penalty.detach()), details.note
    total.backward()
    optimizer.step()
    return StepResult(method, float(loss.detach()), penalty, note)


def ascent_perturbation(model: nn.Module, loss_fn: Callable, X: Tensor, y: Tensor, method: str,
                        rho: float | None = None) -> dict[str, Tensor]:
    """``{name: e}``: the ascent perturbation that SAM / ASAM's ``first_step`` applies at the model's
    weights (on a copy; the model is untouched).

    >>> net = nn.Linear(2, 1).double()
    >>> X, y = torch.ones(3, 2, dtype=torch.float64), torch.zeros(3, 1, dtype=torch.float64)
    >>> e = ascent_perturbation(net, nn.MSELoss(), X, y, "sam", rho=0.1)
    >>> round(float(torch.cat([v.flatten() for v in e.values()]).norm()), 6)
    0.1
    """
    method = _method(method)
    if method not in ("sam", "asam"):
        raise InvalidInputError(f"only SAM and ASAM have an ascent perturbation, not {method!r}")
    twin = copy.deepcopy(model)
    opt = _sam(twin, method, rho, torch.optim.SGD, lr=1.0)
    opt.zero_grad()
    loss_fn(twin(X), y).backward()
    before = {n: p.detach().clone() for n, p in twin.named_parameters()}
    opt.first_step(zero_grad=True)
    return {n: p.detach() - before[n] for n, p in twin.named_parameters()}
