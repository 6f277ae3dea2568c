"""Validation and float64 preparation of user models, losses and data (private)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, TrainModeError, UnsupportedModelError
from coupled_curvature.numeric.core.calling import Inputs, forward_checked, n_samples
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET, check_target, dict_batch_parts
from coupled_curvature.numeric.layer_capabilities import train_mode_coupled

__all__ = ["Batch", "REDUCTIONS", "check_count", "check_flag", "check_increasing", "check_loss_fn", "check_positive",
           "check_targets", "checked_loss", "concatenated_inputs", "float64_copy", "forward_checked", "is_pair",
           "loss_reduction", "prepare_batches", "prepare_inputs", "refuse_train_mode", "tensor_inputs"]

REDUCTIONS = ("mean", "sum")
#: losses that take class-index targets (integers in 0..C-1, ``ignore_index`` allowed)
_CLASS_LOSSES = (nn.CrossEntropyLoss, nn.NLLLoss)
#: losses that compare outputs and targets element by element (same shape, float targets)
_ELEMENTWISE_LOSSES = (nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.BCELoss, nn.BCEWithLogitsLoss)


@dataclass(frozen=True)
class Batch:
    """One batch of inputs (a tensor, or a mapping of tensors passed as keyword arguments; floats in
    float64), targets and its weight in the total loss."""

    X: Inputs
    y: Tensor
    weight: float

    @property
    def n(self) -> int:
        """The number of samples (the first dimension of the inputs)."""
        return n_samples(self.X)


def refuse_train_mode(model: nn.Module, consequence: str) -> None:
    """Raise ``TrainModeError`` on the first module of
    :func:`~coupled_curvature.numeric.layer_capabilities.train_mode_coupled`, if any: ``module 'path' (Type) is in
    train mode`` and then ``consequence`` (what the mode changes, and what to do).

    >>> refuse_train_mode(nn.Sequential(nn.Dropout()).eval(), "")
    >>> refuse_train_mode(nn.Sequential(nn.Dropout()), ": put it in eval mode")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.TrainModeError: module '0' (Dropout) is in train mode: put it in eval mode
    """
    coupled = train_mode_coupled(model)
    if coupled:
        path, module = coupled[0]
        raise TrainModeError(f"module {path or type(module).__name__!r} ({type(module).__name__}) is in train mode"
                             + consequence)


def float64_copy(model: nn.Module, *, allow_train_mode: bool = False) -> nn.Module:
    """A float64 deep copy of ``model``; the user's model is never touched. Raises ``TrainModeError`` when the
    model is in train mode and holds a module whose output depends on the mode (BatchNorm, Dropout), unless
    ``allow_train_mode``."""
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_flag(allow_train_mode, "allow_train_mode")
    on_meta = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if on_meta:
        raise UnsupportedModelError(
            f"the model's tensors {', '.join(on_meta[:3])}{' …' if len(on_meta) > 3 else ''} are on the meta "
            "device, so they hold no values; materialize the model first (model.to_empty(device='cpu'), "
            "then load_state_dict with its weights)"
        )
    if not allow_train_mode:
        refuse_train_mode(model, ", so the loss depends on the mode and on the batch split. Call model.eval() first, "
                                 "or pass allow_train_mode=True if you mean it.")
    for name, p in model.named_parameters():
        if not p.is_floating_point() and not p.is_complex():
            continue
        if not bool(torch.isfinite(p.detach()).all()):
            raise InvalidInputError(
                f"parameter {name!r} holds non-finite values (NaN or inf); fix it, or load the "
                "saved weights again, before using the model"
            )
    clone = copy.deepcopy(model)
    return clone.to(torch.float64)


def _as_tensor(x: object, what: str) -> Tensor:
    import numpy as np

    if isinstance(x, Tensor):
        return x.detach()
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    raise InvalidInputError(
        f"{what} must be a torch.Tensor or numpy array, got {type(x).__name__}; pass e.g. torch.as_tensor(...)"
    )


def check_flag(value: object, name: str) -> None:
    """Refuse anything but ``True``/``False`` for an on/off option (``"no"`` is truthy)."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be True or False, got {value!r}; pass a bool")


def check_count(value: object, name: str, minimum: int = 0) -> None:
    """Refuse non-ints and bools (``True`` is an int in Python) for a count option."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name} must be an int ≥ {minimum}, got {value!r}; pass a whole number")


def check_positive(value: object, name: str, *, hint: str = "") -> float:
    """``value`` as a float if it is a finite real number > 0 (not a bool), else an error naming ``name``.

    >>> check_positive(0.5, "lr"), check_positive(2, "rho")
    (0.5, 2.0)
    """
    if isinstance(value, Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{name} must be a finite number > 0, got {value!r}{hint}")
    return float(value)


def check_increasing(values: object, name: str, *, integer: bool = False) -> tuple:
    """``values`` as a non-empty tuple of strictly increasing numbers > 0 (finite floats, or ints ≥ 1 with
    ``integer``); anything else is an :class:`InvalidInputError` naming ``name``.

    >>> check_increasing([2, 3], "orders", integer=True), check_increasing([0.01, 0.1], "radii")
    ((2, 3), (0.01, 0.1))
    """
    kind = "positive ints" if integer else "finite numbers > 0"
    try:
        if not isinstance(values, Iterable):
            raise TypeError
        seq = tuple(values)  # iterating can raise TypeError too (a 0-d tensor)
    except TypeError:
        raise InvalidInputError(f"{name} must be a sequence of {kind}, got {values!r}") from None
    ok = (lambda v: isinstance(v, int) and v >= 1) if integer else \
        (lambda v: isinstance(v, (int, float)) and math.isfinite(v) and v > 0)
    if not seq or any(isinstance(v, bool) or not ok(v) for v in seq):
        raise InvalidInputError(f"{name} must be {kind}, got {values!r}")
    if any(b <= a for a, b in zip(seq, seq[1:])):
        raise InvalidInputError(f"{name} must be strictly increasing, got {values!r}")
    return seq if integer else tuple(float(v) for v in seq)


def check_loss_fn(loss_fn: object) -> None:
    """``loss_fn`` must be callable as ``loss_fn(outputs, targets)``: an instance, not a loss class."""
    if isinstance(loss_fn, type):
        raise InvalidInputError(
            f"loss_fn is the class {loss_fn.__name__}, not a loss; pass an instance, e.g. {loss_fn.__name__}()"
        )
    if not callable(loss_fn):
        raise InvalidInputError("loss_fn must be callable as loss_fn(outputs, targets); pass e.g. nn.CrossEntropyLoss()")


def prepare_inputs(X: object, what: str) -> Inputs:
    """``X`` as a tensor (float inputs in float64), or a mapping of them, refusing NaN/inf and meta tensors.

    Integer inputs are kept (an ``nn.Embedding`` takes them); a model that cannot take them
    fails in :func:`forward_checked` with an error that says to pass float inputs.
    """
    if isinstance(X, Mapping):  # one level: an entry is a tensor (a nested mapping is refused as not an array)
        return {k: _finite_values(v, f"{what} (entry {k!r})") for k, v in X.items()}
    return _finite_values(X, what)


def _finite_values(x: object, what: str) -> Tensor:
    """:func:`_values`, refusing NaN/inf in float inputs."""
    x = _values(x, what)
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise InvalidInputError(f"{what} hold non-finite values (NaN or inf); remove or fix them")
    return x


def _values(x: object, what: str) -> Tensor:
    """``x`` as a tensor with values (not on the meta device), floats in float64."""
    x = _as_tensor(x, what)
    if x.is_meta:
        raise InvalidInputError(f"{what} are on the meta device (no values); pass real tensors")
    return x.to(torch.float64) if x.is_floating_point() else x


def _prepare_pair(X: object, y: object, index: int) -> tuple[Inputs, Tensor]:
    X = prepare_inputs(X, f"inputs of batch {index}")
    y = _values(y, f"targets of batch {index}")
    n = n_samples(X)
    if n == 0:
        raise InvalidInputError(f"batch {index} is empty; drop it or pass at least one sample")
    if y.dim() == 0 or y.shape[0] != n:
        raise InvalidInputError(
            f"batch {index}: {n} inputs but {y.shape[0] if y.dim() else 'a scalar with no sample dimension for'} "
            "targets; pass one target per input"
        )
    return X, y


def _prepare_item(item: object, index: int, target: str | Callable) -> tuple[Inputs, Tensor]:
    if isinstance(item, Mapping):
        X, y = dict_batch_parts(item, target, index)
        return _prepare_pair(X, y, index)
    if not is_pair(item):
        raise InvalidInputError(
            f"batch {index} is not an (inputs, targets) pair or a mapping batch; pass data as (X, y), a "
            "mapping such as {'input_ids': ..., 'labels': ...}, or an iterable of either"
        )
    return _prepare_pair(item[0], item[1], index)


def is_pair(data: object) -> TypeGuard[tuple[Any, ...] | list[Any]]:
    """Whether ``data`` is an ``(X, y)`` pair: a tuple or list of two array-likes (with a ``shape``)."""
    return (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and all(hasattr(d, "shape") for d in data)
    )


def loss_reduction(loss_fn: Callable, reduction: str | None = None) -> str:
    """``"sum"`` or ``"mean"``: ``reduction`` if given, else ``loss_fn.reduction`` (default ``"mean"``).

    >>> loss_reduction(nn.MSELoss(reduction="sum")), loss_reduction(lambda o, t: o.sum())
    ('sum', 'mean')
    """
    if reduction is not None:
        if not isinstance(reduction, str) or reduction not in REDUCTIONS:
            raise InvalidInputError(f"reduction must be 'mean' or 'sum', got {reduction!r}; pass one of them")
        own = getattr(loss_fn, "reduction", None)
        own = "mean" if own == "batchmean" else own
        if own is not None and own != reduction:
            raise InvalidInputError(
                f"reduction={reduction!r} but loss_fn.reduction is {own!r}; drop reduction= (the loss's own "
                "is used) or pass a loss with the reduction you mean"
            )
        return reduction
    reduction = getattr(loss_fn, "reduction", "mean")
    if reduction == "batchmean":  # KLDivLoss: the sum divided by the batch size, a mean over samples
        return "mean"
    if reduction == "none":
        raise InvalidInputError(
            "loss_fn.reduction is 'none': the loss is one value per element, not a scalar; construct it with "
            "reduction='mean' or 'sum'"
        )
    if reduction not in REDUCTIONS:
        raise InvalidInputError(
            f"loss_fn.reduction is {reduction!r}; diagnose knows 'mean', 'sum' and KLDivLoss's 'batchmean' (a "
            "mean over samples); construct the loss with one of them, or pass a plain function and reduction="
        )
    return reduction


def prepare_batches(data: object, loss_fn: Callable, reduction: str | None = None, *,
                    target: str | Callable = DEFAULT_TARGET, tensors_only: str | None = None) -> list[Batch]:
    """Float64 batches with weights so that ``L = Σ weight·loss_fn(batch)``.

    ``data`` is an ``(X, y)`` pair, a mapping batch (the targets its ``target`` entry, the inputs the
    others: :mod:`.dict_batches`) or an iterable of either. Mean-reduction losses are weighted by
    ``n_batch / N`` (an uneven split gives the same ``L`` as one full batch); sum-reduction losses by 1.
    ``reduction`` overrides ``loss_fn.reduction`` (for plain functions, which have none; see
    :func:`loss_reduction`). ``tensors_only`` names a caller that takes tensor inputs only: mapping batches
    are then refused, naming it.

    >>> b = prepare_batches({"x": torch.ones(3, 2), "labels": torch.zeros(3)}, nn.MSELoss())[0]
    >>> b.X["x"].dtype, b.n, b.weight
    (torch.float64, 3, 1.0)
    """
    check_target(target)
    if is_pair(data) or isinstance(data, Mapping):
        pairs = [_prepare_item(data, 0, target)]
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, Tensor)):
        pairs = [_prepare_item(item, i, target) for i, item in enumerate(data)]
    else:
        raise InvalidInputError(
            "data must be an (X, y) pair of tensors, a mapping batch or an iterable of either, got "
            f"{type(data).__name__}"
        )
    if not pairs:
        raise InvalidInputError("data holds no batches")
    if tensors_only and isinstance(pairs[0][0], Mapping):
        raise InvalidInputError(f"{tensors_only} takes tensor batches only, not mapping batches; pass data as (X, y) "
                                "or a list of (X, y) pairs, or use diagnose, which takes mapping batches")
    kinds = {isinstance(X, Mapping) and frozenset(X) for X, _ in pairs}
    if len(kinds) > 1:
        raise InvalidInputError("the batches mix tensor inputs and mapping inputs, or mappings with different "
                                "keys; pass batches of one kind with the same entries")
    n_total = sum(n_samples(X) for X, _ in pairs)
    mean = loss_reduction(loss_fn, reduction) == "mean"
    return [Batch(X, y, n_samples(X) / n_total if mean else 1.0) for X, y in pairs]


def tensor_inputs(batches: Sequence[Batch], caller: str) -> list[Tensor]:
    """The tensor inputs of ``batches``, one per batch. Mapping inputs are refused naming ``caller`` (one
    that passed ``tensors_only=`` to :func:`prepare_batches` never has them)."""
    inputs = []
    for b in batches:
        if isinstance(b.X, Mapping):
            raise InvalidInputError(f"{caller} takes tensor batches only, not mapping batches; pass data as (X, y) "
                                    "or a list of (X, y) pairs")
        inputs.append(b.X)
    return inputs


def concatenated_inputs(batches: Sequence[Batch], caller: str) -> Tensor:
    """The tensor inputs of all ``batches`` along the sample dimension (:func:`tensor_inputs`, joined).

    >>> concatenated_inputs(prepare_batches([(torch.ones(2, 1), torch.ones(2))] * 2, nn.MSELoss()), "f").shape
    torch.Size([4, 1])
    """
    return torch.cat(tensor_inputs(batches, caller))


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


def check_targets(loss_fn: Callable, out_shape: tuple, y: Tensor, index: int) -> None:
    """Targets that ``loss_fn`` would reject or misread, for the torch losses whose rules are known.

    Class-index losses (CrossEntropy, NLL) need integer labels in ``0..C-1`` (or ``ignore_index``);
    element-wise losses (MSE, L1, BCE, …) need float targets of the outputs' shape ``out_shape``
    (a different shape is silently broadcast by torch).

    >>> check_targets(nn.CrossEntropyLoss(), (4, 3), torch.tensor([0, 2, 1, 3]), 0)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: targets of batch 0 hold label 3, outside 0..2 (the model has 3 outputs); pass labels in 0..2, or a model with more outputs
    """
    where = f"targets of batch {index}"
    out_shape = tuple(out_shape)
    if isinstance(loss_fn, _CLASS_LOSSES) and len(out_shape) >= 2 and tuple(y.shape) != out_shape:
        if y.is_floating_point():
            raise InvalidInputError(
                f"{where} are {y.dtype} class indices for {type(loss_fn).__name__}; pass integer labels, e.g. y.long()"
            )
        if y.dtype not in (torch.long, torch.uint8):
            raise InvalidInputError(
                f"{where} have dtype {y.dtype}, which {type(loss_fn).__name__} does not take; pass y.long()"
            )
        classes = out_shape[1]
        labels = y[y != loss_fn.ignore_index] if y.dtype == torch.long else y
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= classes):
            bad = int(labels.min()) if int(labels.min()) < 0 else int(labels.max())
            raise InvalidInputError(
                f"{where} hold label {bad}, outside 0..{classes - 1} (the model has {classes} outputs); pass "
                f"labels in 0..{classes - 1}, or a model with more outputs"
            )
    elif isinstance(loss_fn, _ELEMENTWISE_LOSSES):
        if tuple(y.shape) != out_shape:
            hint = f", e.g. y.reshape{out_shape}" if y.numel() == math.prod(out_shape) else ""
            raise InvalidInputError(
                f"{where} have shape {tuple(y.shape)} but the outputs {out_shape}, and "
                f"{type(loss_fn).__name__} would broadcast them; pass targets of the outputs' shape{hint}"
            )
        if not y.is_floating_point():
            raise InvalidInputError(f"{where} are {y.dtype}; {type(loss_fn).__name__} needs float targets: pass y.double()")
