"""Curvature Rate Regularization (CRR): a differentiable penalty on the input derivatives that λ measures.

``penalty = scale · mean_{n ∈ orders} mean_i |d_n(x_i)|``, ``d_n = ∂ⁿ/∂tⁿ ℓ(model(x_i + t·u_i), y_i)`` at
``t = 0`` along a unit input direction ``u_i`` per sample. The derivatives are the λ measure's own
(:func:`~coupled_curvature.numeric.measures.curvature_rate.directional_derivatives`, kept on the graph),
so the penalty's gradient with respect to the parameters is exact autograd.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import check_increasing, refuse_train_mode
from coupled_curvature.numeric.measures.curvature_rate import (directional_derivatives, piecewise_affine_in_input,
                                                              unit_directions)

__all__ = ["CRRPenalty", "PIECEWISE_LINEAR_NOTE", "check_orders", "check_scale", "check_trainable", "crr_details",
           "crr_penalty", "no_double_backward"]

PIECEWISE_LINEAR_NOTE = ("the network is piecewise linear in its input, so every input derivative of order ≥ 2 "
                         "comes from the loss alone (the net contributes only its local Jacobian): λ and CRR "
                         "measure the loss's curvature along the net's linear pieces there")


@dataclass(frozen=True)
class CRRPenalty:
    """The penalty (a differentiable 0-d tensor), its per-order batch means and what they mean.

    ``per_order[n] = mean_i |d_n(x_i)|`` (detached floats); ``piecewise_linear``: the outputs are
    piecewise affine in the input (read off the autograd graph), so orders ≥ 2 come from the loss only.
    """

    penalty: Tensor
    per_order: dict[int, float]
    points: int
    piecewise_linear: bool
    note: str | None


def check_orders(orders: object) -> tuple[int, ...]:
    """``orders`` as a tuple of strictly increasing positive ints, or :class:`InvalidInputError`.

    >>> check_orders([2, 3])
    (2, 3)
    """
    return check_increasing(orders, "orders (derivative orders)", integer=True)


def check_scale(scale: object, name: str = "scale") -> float:
    """``scale`` as a finite float ``≥ 0``, or :class:`InvalidInputError`.

    >>> check_scale(1e-3)
    0.001
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale < 0:
        raise InvalidInputError(f"{name} must be a finite number ≥ 0, got {scale!r}")
    return float(scale)


def check_trainable(model: object, what: str) -> None:
    """Refuse, before any work, what autograd would refuse later with its own words: a ``model`` that is not
    an ``nn.Module``, a call under ``torch.no_grad()``/``torch.inference_mode()``, or a model with no
    parameter that requires a gradient (``what`` names the caller).

    >>> check_trainable(nn.Linear(2, 1), "crr_penalty")
    >>> with torch.no_grad():
    ...     check_trainable(nn.Linear(2, 1), "crr_penalty")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: crr_penalty needs gradients, but it runs with gradients disabled ...
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not torch.is_grad_enabled():
        raise InvalidInputError(f"{what} needs gradients, but it runs with gradients disabled (inside torch.no_grad() "
                                "or torch.inference_mode()); call it outside that block")
    if not any(p.requires_grad for p in model.parameters()):
        raise InvalidInputError(f"{what} needs a parameter to train, but no parameter of the model requires a gradient "
                                "(all frozen: requires_grad=False); call requires_grad_(True) on the ones to train")


def _stream(generator: torch.Generator | int | None) -> torch.Generator:
    if generator is None:
        return torch.Generator().manual_seed(0)
    if isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        return torch.Generator().manual_seed(generator)
    raise InvalidInputError(f"generator must be a torch.Generator, an int seed or None, got {generator!r}")



@dataclass(frozen=True)
class _Facts:
    """What CRR needs to know about a model once: its leaf modules (the cache key), the first one without
    double backward, and whether the outputs are piecewise affine in the input."""

    key: tuple[int, ...]
    culprit: tuple[str, str] | None  # (name, class name)
    affine: bool


_FACTS: weakref.WeakKeyDictionary[nn.Module, _Facts] = weakref.WeakKeyDictionary()


def _twice_differentiable(module: nn.Module, x: Tensor, gen: torch.Generator) -> bool:
    """Whether autograd differentiates ``module``'s vector-Jacobian product ``Jᵀv`` again (in ``v``).

    ``Jᵀv`` is linear in ``v`` for every module whose output depends on its input, so its derivative in
    ``v`` exists; a backward marked ``once_differentiable`` (or a custom backward computed outside
    autograd) leaves it unconnected or raises. Checked in ``v`` because ``∂(Jᵀv)/∂x`` may legitimately
    be absent (ReLU).
    """
    x = x.clone().requires_grad_(True)
    try:
        out = module(x)
        if not isinstance(out, Tensor) or not out.requires_grad:
            return True
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype).requires_grad_(True)
        (g,) = torch.autograd.grad((out * v).sum(), x, create_graph=True, allow_unused=True)
        if g is None:
            return True  # the output does not depend on the input
        if not g.requires_grad:
            return False
        w = torch.randn(g.shape, generator=gen, dtype=g.dtype)
        (h,) = torch.autograd.grad((g * w).sum(), v, allow_unused=True)
        return h is not None
    except RuntimeError:
        return False


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n or type(m).__name__, m) for n, m in model.named_modules() if not list(m.children())]


def no_double_backward(model: nn.Module, X: Tensor) -> tuple[str, str] | None:
    """``(name, class name)`` of the first leaf module whose input derivative autograd cannot differentiate
    again (probed on the inputs it sees for ``X``), or ``None``.

    >>> no_double_backward(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), torch.ones(1, 2)) is None
    True
    """
    leaves = _leaves(model)
    seen: dict[str, Tensor] = {}

    def record(name: str) -> Callable:
        def hook(module: nn.Module, inputs: tuple, output: object) -> None:
            if inputs and isinstance(inputs[0], Tensor):
                seen.setdefault(name, inputs[0].detach())
        return hook

    hooks = [m.register_forward_hook(record(n)) for n, m in leaves]
    try:
        with torch.no_grad():
            model(X)
    finally:
        for h in hooks:
            h.remove()
    gen = torch.Generator().manual_seed(0)
    return next(((n, type(m).__name__) for n, m in leaves if n in seen and seen[n].is_floating_point()
                 and not _twice_differentiable(m, seen[n], gen)), None)


def _facts(model: nn.Module, X: Tensor, U: Tensor) -> _Facts:
    """:class:`_Facts` of ``model``, computed on the first batch and kept while its leaf modules stay the same."""
    key = tuple(id(m) for _, m in _leaves(model))
    hit = _FACTS.get(model)
    if hit is not None and hit.key == key:
        return hit
    culprit = no_double_backward(model, X)
    facts = _Facts(key, culprit, culprit is None and piecewise_affine_in_input(model, X, U))
    _FACTS[model] = facts
    return facts


def crr_details(model: nn.Module, loss_fn: Callable, X: Tensor, y: Tensor, *, orders: Sequence[int] = (2, 3),
                scale: float = 1e-3, points: int | None = None,
                generator: torch.Generator | int | None = None) -> CRRPenalty:
    """:func:`crr_penalty` with its per-order means and whether the net is piecewise linear in its input.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1])
    >>> r = crr_details(net, nn.CrossEntropyLoss(), X, y)
    >>> r.piecewise_linear, sorted(r.per_order)
    (True, [2, 3])
    """
    orders = check_orders(orders)
    scale = check_scale(scale)
    check_trainable(model, "crr_penalty")
    if not isinstance(X, Tensor) or not X.is_floating_point() or X.dim() < 2 or X.shape[0] < 1:
        raise InvalidInputError("X must be a floating tensor of shape (N, ...) with N ≥ 1")
    if points is not None and (isinstance(points, bool) or not isinstance(points, int) or points < 1):
        raise InvalidInputError(f"points must be an int ≥ 1 or None (the whole batch), got {points!r}")
    refuse_train_mode(model, ": batch statistics couple the samples' input derivatives and dropout would draw from "
                             "the global RNG; put it in eval mode for the penalty term")
    gen = _stream(generator)
    if points is not None and points < X.shape[0]:
        idx = torch.randperm(X.shape[0], generator=gen)[:points]
        X, y = X[idx], y[idx]
    U = unit_directions(X.shape, gen, dtype=torch.float64).to(X.dtype)
    facts = _facts(model, X, U)
    if facts.culprit is not None:
        name, kind = facts.culprit
        raise UnsupportedModelError(
            f"module {name!r} ({kind}) has no double backward (its backward is not itself differentiable by "
            "autograd), so autograd cannot give the higher input derivatives that CRR penalises; use a "
            "twice-differentiable module instead")
    d = directional_derivatives(model, loss_fn, X, y, U, orders[-1], create_graph=True)
    terms = torch.stack([d[:, n - 1].abs().mean() for n in orders])
    affine = facts.affine
    return CRRPenalty(scale * terms.mean(), {n: float(v) for n, v in zip(orders, terms.detach())}, int(X.shape[0]),
                      affine, PIECEWISE_LINEAR_NOTE if affine else None)


def crr_penalty(model: nn.Module, loss_fn: Callable, X: Tensor, y: Tensor, *, orders: Sequence[int] = (2, 3),
                scale: float = 1e-3, points: int | None = None,
                generator: torch.Generator | int | None = None) -> Tensor:
    """``scale · mean_{n ∈ orders} mean_i |∂ⁿ/∂tⁿ ℓ(model(x_i + t u_i), y_i)|_{t=0}|``, differentiable in θ.

    ``u_i``: unit input directions drawn from ``generator`` (a ``torch.Generator`` advanced in place, an
    int seed, or ``None`` for seed 0), never from torch's global RNG. ``points``: a random subset of the
    batch of that size (from the same stream); ``None`` uses every sample. ``loss_fn`` must be a torch
    loss with a ``reduction`` attribute (per-sample losses are taken). The model may be in train mode
    unless it holds BatchNorm or dropout. Refused: orders not strictly increasing positive ints, a
    negative or non-finite scale, a module without double backward (named), a call under ``torch.no_grad()``
    and a model whose parameters are all frozen (:func:`check_trainable`). On a piecewise-linear net
    orders ≥ 2 come from the loss alone: :func:`crr_details` says so.

    Args:
        model: the network being trained (its parameters receive the penalty's gradient).
        loss_fn: a torch loss with a ``reduction`` attribute (per-sample losses are taken).
        X: the batch's inputs.
        y: the batch's targets.
        orders: the derivative orders ``n``, strictly increasing positive ints.
        scale: the penalty's weight, finite and at least 0.
        points: a random subset of the batch of this size (``None``: every sample).
        generator: a ``torch.Generator`` (advanced in place), an int seed, or ``None`` for seed 0.

    Returns:
        A scalar tensor, differentiable in the model's parameters.

    Raises:
        InvalidInputError: bad orders or scale, a call under ``torch.no_grad()``, or a model with every parameter
            frozen.
        TrainModeError: a model in training mode that holds BatchNorm or dropout.
        UnsupportedModelError: a module without a double backward (named).

    See also:
        :func:`~coupled_curvature.numeric.training.step.training_step` (one update with the penalty),
        :func:`crr_details`.

    >>> net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2)).double()
    >>> X, y = torch.randn(16, 2, dtype=torch.float64), torch.randint(0, 2, (16,))
    >>> p = crr_penalty(net, nn.CrossEntropyLoss(), X, y, scale=1e-2)
    >>> p.backward(); net[0].weight.grad.shape
    torch.Size([8, 2])
    """
    return crr_details(model, loss_fn, X, y, orders=orders, scale=scale, points=points,
                       generator=generator).penalty
