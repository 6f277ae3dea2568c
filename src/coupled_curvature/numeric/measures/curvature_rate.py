"""The input-space curvature rate λ: growth rate of directional input derivatives of the loss."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET
from coupled_curvature.numeric.core.inputs import concatenated_inputs, float64_copy, prepare_batches
from coupled_curvature.numeric.core.flat import per_sample_loss_fn
from coupled_curvature.numeric.factors.affinity import affine_outputs


@dataclass(frozen=True)
class CurvatureRate:
    """``value`` = mean over points of the least-squares slope of ``log|d_n|`` against ``n``."""

    value: float
    per_point: Tensor
    log_derivatives: Tensor  # (points, orders), nan where d_n = 0
    orders: int
    points: int
    #: the outputs are piecewise affine in the input (ReLU-type nets): every d_n with n ≥ 2 then comes from
    #: the loss alone, so λ measures the loss's curvature along the net's linear pieces
    piecewise_linear: bool = False


def unit_directions(shape: torch.Size | tuple[int, ...], generator: torch.Generator,
                    dtype: torch.dtype = torch.float64) -> Tensor:
    """``u_i = z_i / ‖z_i‖``, ``z_i ~ N(0, I)`` drawn from ``generator`` (one unit vector per row of ``shape``).

    >>> u = unit_directions((3, 2, 2), torch.Generator().manual_seed(0))
    >>> torch.allclose(u.reshape(3, -1).norm(dim=1), torch.ones(3, dtype=torch.float64))
    True
    """
    U = torch.randn(shape, generator=generator, dtype=dtype)
    return U / U.reshape(U.shape[0], -1).norm(dim=1).reshape((-1,) + (1,) * (U.dim() - 1))


def piecewise_affine_in_input(model: nn.Module, X: Tensor, U: Tensor, call: ModelCall = ModelCall()) -> bool:
    """Whether the outputs are piecewise affine in the input, read off the autograd graph of one forward pass
    at ``X`` along ``U`` (:func:`~coupled_curvature.numeric.factors.affinity.affine_outputs`).

    >>> X = torch.randn(3, 2, dtype=torch.float64)
    >>> relu = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> piecewise_affine_in_input(relu, X, X), piecewise_affine_in_input(relu.append(nn.Tanh()), X, X)
    (True, False)
    """
    t = torch.zeros(X.shape[0], dtype=X.dtype, requires_grad=True)
    z = X + t.reshape((-1,) + (1,) * (X.dim() - 1)) * U
    out = call.module(model, z)
    return isinstance(out, Tensor) and out.grad_fn is not None and \
        affine_outputs(out.grad_fn, {"input": z.grad_fn})["input"] is None


def directional_derivatives(model: nn.Module, loss_fn: Callable, X: Tensor, y: Tensor, U: Tensor, orders: int,
                            *, create_graph: bool = False, call: ModelCall = ModelCall()) -> Tensor:
    """``d[i, n-1] = ∂ⁿ/∂tⁿ ℓ(model(x_i + t u_i), y_i)`` at ``t = 0``, ``n = 1..orders``, by nested autograd.

    One scalar ``t_i`` (of ``X``'s dtype) per point; the summed loss is differentiated ``orders``
    times with ``create_graph=True``. Points are independent for eval-mode models, so the mixed
    terms vanish. By default the result is detached; with ``create_graph`` it keeps its graph, so
    it can be differentiated again with respect to the model's parameters (the CRR penalty).

    >>> net = nn.Sequential(nn.Linear(1, 1, bias=False))
    >>> with torch.no_grad(): _ = net.double()[0].weight.fill_(2.0)
    >>> X, U = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64)
    >>> directional_derivatives(net, nn.MSELoss(), X, torch.zeros(1, 1, dtype=torch.float64), U, 3)
    tensor([[8., 8., 0.]], dtype=torch.float64)
    """
    per = per_sample_loss_fn(loss_fn)
    t = torch.zeros(X.shape[0], dtype=X.dtype, requires_grad=True)
    shape = (-1,) + (1,) * (X.dim() - 1)
    out = call.module(model, X + t.reshape(shape) * U)
    values = per(out, y)
    f = values.reshape(values.shape[0], -1).sum()
    cols = []
    for n in range(orders):
        (d,) = torch.autograd.grad(f, t, create_graph=create_graph or n + 1 < orders, allow_unused=True)
        if d is None:
            d = torch.zeros_like(t)
            cols.extend([d.detach()] * (orders - n))
            break
        cols.append(d if create_graph else d.detach())
        f = d.sum()
        if not d.requires_grad:
            cols.extend([torch.zeros_like(t)] * (orders - n - 1))
            break
    return torch.stack(cols, dim=1)


def curvature_rate(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    orders: int = 6,
    points: int = 32,
    near_boundary: bool = False,
    seed: int = 0,
    allow_train_mode: bool = False,
    output: str | int | Callable | None = None,
    target: str | Callable = DEFAULT_TARGET,
) -> CurvatureRate:
    """``λ = mean_i slope_n log|∂ⁿ_u ℓ(x_i + t u_i)|``, ``n = 1..orders`` (least squares per point).

    Points: the first ``points`` inputs of the data (or, with ``near_boundary``, those with the
    smallest top-1 − top-2 logit margin); directions ``u_i``: fixed unit vectors drawn from
    ``seed``. λ depends only on the function, so every function-preserving reparameterization
    leaves it unchanged, and loss scaling ``ℓ -> sℓ`` shifts ``log|d_n|`` by ``log s`` and leaves
    the slope unchanged. It is **not** invariant to input scaling: ``x -> sx`` shifts λ by ``−log s``.
    Orders with ``d_n = 0`` are skipped; points with fewer than two non-zero orders are dropped.

    >>> net = nn.Sequential(nn.Linear(2, 3))
    >>> X, y = torch.randn(8, 2, dtype=torch.float64), torch.randint(0, 3, (8,))
    >>> r = curvature_rate(net, nn.CrossEntropyLoss(), (X, y), orders=4, points=4)
    >>> r.per_point.shape
    torch.Size([4])
    """
    if not isinstance(orders, int) or orders < 2:
        raise InvalidInputError(f"orders must be an int ≥ 2 (a slope needs two points), got {orders!r}")
    if not isinstance(points, int) or points < 1:
        raise InvalidInputError(f"points must be an int ≥ 1, got {points!r}")
    call = ModelCall(output)  # output=, target=: as diagnose takes them
    net = float64_copy(model, allow_train_mode=allow_train_mode)
    batches = prepare_batches(data, loss_fn, target=target)
    if isinstance(batches[0].X, Mapping) or not batches[0].X.is_floating_point():
        raise InvalidInputError("λ moves the inputs along x + t·u, so it needs float tensor inputs; these are "
                                f"{'a mapping batch' if isinstance(batches[0].X, Mapping) else batches[0].X.dtype} "
                                "(token ids cannot move): pass (X, y) with float X, or leave λ out")
    X = concatenated_inputs(batches, "curvature_rate")
    y = torch.cat([b.y for b in batches])
    if near_boundary:
        with torch.no_grad():
            logits = call.module(net, X)
        if logits.dim() != 2 or logits.shape[1] < 2:
            raise InvalidInputError("near_boundary needs class logits of shape (N, C ≥ 2)")
        top = logits.topk(2, dim=1).values
        order = torch.argsort(top[:, 0] - top[:, 1], stable=True)
        idx = order[:points]
    else:
        idx = torch.arange(min(points, X.shape[0]))
    Xs, ys = X[idx], y[idx]
    U = unit_directions(Xs.shape, torch.Generator().manual_seed(seed))
    d = directional_derivatives(net, loss_fn, Xs, ys, U, orders, call=call)
    logs = torch.where(d != 0, d.abs().log(), torch.full_like(d, float("nan")))
    n = torch.arange(1, orders + 1, dtype=torch.float64)
    slopes = []
    for row in logs:
        ok = ~torch.isnan(row)
        if int(ok.sum()) < 2:
            slopes.append(float("nan"))
            continue
        x, v = n[ok], row[ok]
        xc = x - x.mean()
        slopes.append(float((xc * (v - v.mean())).sum() / (xc * xc).sum()))
    s = torch.tensor(slopes, dtype=torch.float64)
    keep = ~torch.isnan(s)
    if not bool(keep.any()):
        raise InvalidInputError("every directional derivative vanished; λ is undefined for this model")
    return CurvatureRate(float(s[keep].mean()), s, logs, orders, int(keep.sum()),
                         piecewise_affine_in_input(net, Xs, U, call))
