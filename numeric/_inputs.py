"""Validation and float64 preparation of user models, losses and data (private)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.errors import InvalidInputError, TrainModeError



@dataclass(frozen=True)
class Batch:
    """One batch of float64 inputs, targets and its weight in the total loss."""

    X: Tensor
    y: Tensor
    weight: float


def float64_copy(model: nn.Module, *, allow_train_mode: bool = False) -> nn.Module:
    """A float64 deep copy of ``model``; the user's model is never touched.

    Raises ``TrainModeError`` when the model is in train mode and holds a module whose
    output depends on the mode (BatchNorm, Dropout), unless ``allow_train_mode``.
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(
            f"model must be a torch.nn.Module, got {type(model).__name__}"
        )
    if not allow_train_mode:
        for name, module in model.named_modules():
            if module.training and isinstance(
                module, (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)
            ):
                raise TrainModeError(
                    f"module {name or type(module).__name__!r} ({type(module).__name__}) is in "
                    "train mode, so the loss depends on the mode and on the batch split. Call "
                    "model.eval() first, or pass allow_train_mode=True if you mean it."
                )
    for name, p in model.named_parameters():
        if not p.is_floating_point() and not p.is_complex():
            continue
        if not bool(torch.isfinite(p.detach()).all()):
            raise InvalidInputError(
                f"parameter {name!r} holds non-finite values (NaN or inf); fix or reload the "
                "model before diagnosing it"
            )
    clone = copy.deepcopy(model)
    return clone.to(torch.float64)


def _as_tensor(x: object, what: str) -> Tensor:
    if isinstance(x, Tensor):
        return x.detach()
    try:
        import numpy as np

        if isinstance(x, np.ndarray):
            return torch.from_numpy(x.copy())
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    raise InvalidInputError(f"{what} must be a torch.Tensor or numpy array, got {type(x).__name__}")


def _prepare_pair(X: object, y: object, index: int) -> tuple[Tensor, Tensor]:
    X = _as_tensor(X, f"inputs of batch {index}")
    y = _as_tensor(y, f"targets of batch {index}")
    if X.is_floating_point():
        X = X.to(torch.float64)
        if not bool(torch.isfinite(X).all()):
            raise InvalidInputError(f"inputs of batch {index} hold non-finite values")
    if y.is_floating_point():
        y = y.to(torch.float64)
    if X.shape[0] == 0:
        raise InvalidInputError(f"batch {index} is empty")
    if y.shape[0] != X.shape[0]:
        raise InvalidInputError(
            f"batch {index}: {X.shape[0]} inputs but {y.shape[0]} targets"
        )
    return X, y


def is_pair(data: object) -> bool:
    return (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and all(hasattr(d, "shape") for d in data)
    )


def loss_reduction(loss_fn: Callable) -> str:
    """``"sum"`` or ``"mean"``, read from ``loss_fn.reduction`` (default ``"mean"``)."""
    reduction = getattr(loss_fn, "reduction", "mean")
    if reduction not in ("mean", "sum"):
        raise InvalidInputError(
            f"loss_fn.reduction is {reduction!r}; it must be 'mean' or 'sum' so that the loss "
            "is a scalar"
        )
    return reduction


def prepare_batches(data: object, loss_fn: Callable) -> list[Batch]:
    """Float64 batches with weights so that ``L = Σ weight·loss_fn(batch)``.

    Mean-reduction losses are weighted by ``n_batch / N`` (an uneven split gives the
    same ``L`` as one full batch); sum-reduction losses by 1.
    """
    if is_pair(data):
        pairs = [_prepare_pair(data[0], data[1], 0)]
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, Tensor)):
        pairs = []
        for i, item in enumerate(data):
            if not is_pair(item):
                raise InvalidInputError(
                    f"batch {i} is not an (inputs, targets) pair; pass data as (X, y) or as an "
                    "iterable of (X, y) batches"
                )
            pairs.append(_prepare_pair(item[0], item[1], i))
    else:
        raise InvalidInputError(
            "data must be an (X, y) pair of tensors or an iterable of (X, y) batches, got "
            f"{type(data).__name__}"
        )
    if not pairs:
        raise InvalidInputError("data holds no batches")
    n_total = sum(X.shape[0] for X, _ in pairs)
    mean = loss_reduction(loss_fn) == "mean"
    return [Batch(X, y, X.shape[0] / n_total if mean else 1.0) for X, y in pairs]


def checked_loss(value: object, batch_index: int) -> Tensor:
    """The scalar loss of one batch, or a clear error if it is not a finite scalar."""
    if not isinstance(value, Tensor) or value.numel() != 1:
        raise InvalidInputError(
            f"loss_fn returned {type(value).__name__} of shape "
            f"{tuple(getattr(value, 'shape', ()))} on batch {batch_index}; it must return a "
            "scalar tensor (use reduction='mean' or 'sum')"
        )
    if not math.isfinite(float(value.detach())):
        raise InvalidInputError(
            f"the loss is non-finite ({float(value.detach())}) on batch {batch_index}; check the "
            "model's outputs and the targets"
        )
    return value.reshape(())
