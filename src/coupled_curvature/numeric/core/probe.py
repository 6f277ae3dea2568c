"""The probing forward pass of every batch, before any heavy work: the model takes the inputs, the selected
output suits the loss and the targets, and the loss is a finite scalar that depends on the outputs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import (
    CALL_ERRORS, ModelCall, describe_inputs, forward_checked, selected_checked, take_samples,
)
from coupled_curvature.numeric.core.inputs import Batch, check_targets, checked_loss

__all__ = ["PROBE_SAMPLES", "leaves_no_trace", "probe_batches"]

#: the probe runs the model on this many samples of each batch first (the whole batch only if they fail)
PROBE_SAMPLES = 4


def probe_batches(model: nn.Module, loss_fn: Callable, batches: list[Batch], call: ModelCall = ModelCall()) -> None:
    """A gradient-free forward per batch, before any heavy work: the model takes the inputs, ``call`` finds
    the tensor the loss receives in its output, the targets suit the loss, and the loss is a finite scalar
    that depends on the outputs.

    The forward runs on the first :data:`PROBE_SAMPLES` samples of a batch (the label checks see all
    of them); only if that fails is the whole batch run, and its outcome decides (a slice can fail
    where the batch works: batch statistics, masked losses). It runs on ``model`` (the float64
    copy) with its buffers restored and the RNG forked, so a train-mode BatchNorm or Dropout leaves
    no trace in the computation that follows.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> net = nn.Linear(2, 3).double()
    >>> batches = prepare_batches((torch.randn(4, 2), torch.randn(4, 2)), nn.MSELoss())
    >>> probe_batches(net, nn.MSELoss(), batches)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: targets of batch 0 have shape (4, 2) but the outputs (4, 3), and MSELoss would broadcast them; pass targets of the outputs' shape
    """
    X0 = batches[0].X
    first = None if isinstance(X0, Mapping) else tuple(X0.shape[1:])
    with leaves_no_trace(model):
        for i, batch in enumerate(batches):
            if batch.n > PROBE_SAMPLES:
                try:
                    _probe(model, loss_fn, batch, i, first, PROBE_SAMPLES, call)
                    continue
                except InvalidInputError:
                    pass
            _probe(model, loss_fn, batch, i, first, None, call)


@contextmanager
def leaves_no_trace(model: nn.Module) -> Iterator[None]:
    """Forward passes inside leave ``model`` and the RNG as they were: the buffers (BatchNorm running
    statistics) are restored afterwards, even on an error, and the CPU RNG is forked (Dropout's draws).

    >>> bn = nn.BatchNorm1d(2).double()
    >>> with leaves_no_trace(bn):
    ...     _ = bn(torch.randn(8, 2, dtype=torch.float64) + 5)
    >>> bn.running_mean.tolist()
    [0.0, 0.0]
    """
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def _probe(model: nn.Module, loss_fn: Callable, batch: Batch, i: int, first: tuple | None, k: int | None,
           call: ModelCall) -> None:
    X, y = (batch.X, batch.y) if k is None else (take_samples(batch.X, slice(0, k)), batch.y[:k])
    out = selected_checked(call, forward_checked(model, X, f"batch {i}", first), f"batch {i}")
    check_targets(loss_fn, (batch.n, *out.shape[1:]), batch.y, i)
    leaf = out.detach().requires_grad_(True) if out.is_floating_point() else out
    try:
        with torch.enable_grad():
            value = loss_fn(leaf, y)
    except CALL_ERRORS as e:
        raise InvalidInputError(
            f"loss_fn(outputs, targets) failed on batch {i} (outputs {tuple(out.shape)} {out.dtype}, "
            f"targets {tuple(y.shape)} {y.dtype}; {describe_inputs(X)}): "
            f"{str(e).splitlines()[0] if str(e) else e!r}; pass targets that loss_fn accepts with these outputs "
            "(output= chooses the model's output the loss receives)"
        ) from None
    value = checked_loss(value, i)
    if not value.requires_grad:
        raise InvalidInputError(
            f"the loss does not depend on the model's outputs on batch {i} (no gradient flows from "
            "it to them), so every derivative is 0; pass a loss_fn that is computed from its first "
            "argument, the outputs"
        )
