"""The loss of a model as a function of one flat float64 parameter vector (shared by the measures)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.core.objective import Objective


def per_sample_loss_fn(loss_fn: Callable) -> Callable:
    """A copy of ``loss_fn`` with ``reduction="none"`` (one loss per sample)."""
    if not hasattr(loss_fn, "reduction"):
        raise InvalidInputError(
            "this measure needs per-sample losses: pass a torch loss module with a 'reduction' "
            "attribute (e.g. nn.CrossEntropyLoss())"
        )
    clone = copy.deepcopy(loss_fn)
    clone.reduction = "none"
    return clone


class FlatLoss:
    """``L(θ) = Σ_batches weight·loss_fn(model(X; θ), y)`` for a flat ``θ`` (float64 copy of the model);
    ``call`` and ``target`` are :func:`~.options.run_options`'s ``output`` and ``target``.

    >>> net = nn.Sequential(nn.Linear(2, 1))
    >>> f = FlatLoss(net, nn.MSELoss(), (torch.randn(4, 2), torch.randn(4, 1)))
    >>> f.theta0.shape
    torch.Size([3])
    """

    def __init__(self, model: nn.Module, loss_fn: Callable, data: object, *, allow_train_mode: bool = False,
                 call: ModelCall = ModelCall(), target: str | Callable = DEFAULT_TARGET):
        self.net = float64_copy(model, allow_train_mode=allow_train_mode)
        self.loss_fn = loss_fn
        self.batches = prepare_batches(data, loss_fn, target=target)
        self.objective = Objective(self.net, loss_fn, self.batches, call=call)
        if not self.objective.names:
            raise InvalidInputError("the model has no parameters")
        self.names = list(self.objective.names)
        self.shapes = [self.objective.values[n].shape for n in self.names]
        self.sizes = [self.objective.values[n].numel() for n in self.names]
        self.offsets = dict(zip(self.names, torch.tensor([0] + self.sizes).cumsum(0).tolist()))
        self.theta0 = torch.cat([self.objective.values[n].reshape(-1) for n in self.names])
        self._graph: tuple[Tensor, Tensor] | None = None

    @property
    def n(self) -> int:
        return self.theta0.numel()

    def block(self, name: str) -> slice:
        start = self.offsets[name]
        return slice(start, start + self.objective.values[name].numel())

    def params(self, theta: Tensor) -> dict[str, Tensor]:
        parts = torch.split(theta, self.sizes)
        return {n: p.reshape(s) for n, p, s in zip(self.names, parts, self.shapes)}

    def loss(self, theta: Tensor) -> Tensor:
        p = self.params(theta)
        total = sum(self.objective.batch_loss(i, p) for i in range(len(self.batches)))
        assert isinstance(total, Tensor), "an objective has at least one batch"
        return total

    def value(self, theta: Tensor | None = None) -> float:
        with torch.no_grad():
            return float(self.loss(self.theta0 if theta is None else theta))

    def grad(self, theta: Tensor | None = None) -> Tensor:
        t = (self.theta0 if theta is None else theta).detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss(t), t, allow_unused=True)
        return torch.zeros_like(t) if g is None else g

    def hvp(self, v: Tensor) -> Tensor:
        """``∇²L(θ₀) v`` through one retained gradient graph."""
        if self._graph is None:
            t = self.theta0.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(t), t, create_graph=True)
            self._graph = (t, g)
        t, g = self._graph
        if not g.requires_grad:
            return torch.zeros_like(v)
        (hv,) = torch.autograd.grad(g, t, grad_outputs=v, retain_graph=True, allow_unused=True)
        return torch.zeros_like(v) if hv is None else hv

    def per_sample_directional(self, direction: Tensor) -> Tensor:
        """``(dᵀ∇_θ ℓ_n(θ₀))_n`` for every sample, by two reverse passes."""
        per = per_sample_loss_fn(self.loss_fn)
        out = []
        for batch in self.batches:
            t = self.theta0.clone().requires_grad_(True)
            values = per(self.objective.forward(self.params(t), batch.X), batch.y)
            values = values.reshape(values.shape[0], -1).sum(dim=1)
            u = torch.zeros_like(values, requires_grad=True)
            (gt,) = torch.autograd.grad((u * values).sum(), t, create_graph=True)
            (r,) = torch.autograd.grad(gt @ direction, u, allow_unused=True)
            out.append(torch.zeros_like(values) if r is None else r.detach())
        return torch.cat(out)
