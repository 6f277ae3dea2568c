"""A model's float64 parameters and a data set's inputs as exact arb matrices (every float64 is dyadic)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from flint import arb_mat
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import concatenated_inputs, float64_copy, prepare_batches, refuse_train_mode

__all__ = ["as_arb", "check_model", "exact_data", "exact_params", "MIN_PREC", "MAX_PREC", "check_prec"]

MIN_PREC, MAX_PREC = 53, 100_000


def check_prec(prec: object) -> int:
    """``prec`` as bits of working precision: an int in ``[53, 100000]``.

    >>> check_prec(40)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: prec must be an int in [53, 100000] (bits), got 40; pass e.g. prec=256
    """
    if isinstance(prec, bool) or not isinstance(prec, int) or not MIN_PREC <= prec <= MAX_PREC:
        raise InvalidInputError(f"prec must be an int in [{MIN_PREC}, {MAX_PREC}] (bits), got {prec!r}; pass e.g. prec=256")
    return prec


def as_arb(t: Tensor) -> arb_mat:
    """A float64 tensor as an exact arb_mat: a vector as one row, else ``(shape[0], rest)``.

    >>> as_arb(torch.tensor([[0.5, 0.25]], dtype=torch.float64)).entries()[1].is_exact()
    True
    """
    t = t.detach().to(torch.float64)
    rows = 1 if t.dim() <= 1 else t.shape[0]
    return arb_mat(rows, t.numel() // max(rows, 1), t.reshape(-1).tolist())


def exact_params(model64: nn.Module) -> dict[str, arb_mat]:
    """Every parameter of the (float64, finite-checked) model, exactly, by name."""
    return {n: as_arb(p) for n, p in model64.named_parameters()}


def check_model(model: nn.Module) -> None:
    """What certify refuses in a model before copying it: modules in train mode whose output depends
    on the mode (certify has no train-mode option: it certifies the eval-mode function) and tied
    parameters (one tensor under several names: the output is not affine in such a block, and the
    blocks would not be the tensors that the model holds).

    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    >>> net[1].weight = net[0].weight
    >>> check_model(net)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.UnsupportedModelError: parameters '0.weight' and '1.weight' are one tensor (tied weights); certify takes untied parameters only (each used by one module, so that the output is affine in a block); untie them: use module.weight = nn.Parameter(module.weight.detach().clone()) on a copy of the model
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    refuse_train_mode(model, ", so its output depends on the batch; certify certifies the eval-mode function only: "
                             "call model.eval() first")
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    tied = next((n for n in names.values() if len(n) > 1), None)
    if tied:
        raise UnsupportedModelError(
            f"parameters {' and '.join(repr(n) for n in tied)} are one tensor (tied weights); certify takes untied "
            "parameters only (each used by one module, so that the output is affine in a block); untie them: use "
            "module.weight = nn.Parameter(module.weight.detach().clone()) on a copy of the model")


def exact_data(model: nn.Module, loss_fn: Callable, data: object) -> tuple[nn.Module, Tensor, Tensor, tuple[int, ...]]:
    """The float64 copy of ``model`` (checked by :func:`check_model`; finite weights), all batches of
    ``data`` concatenated, and the batch sizes (the loss weighs batches as ``prepare_batches`` does)."""
    check_model(model)
    model64 = float64_copy(model)
    batches = prepare_batches(data, loss_fn, tensors_only="certify")
    X = concatenated_inputs(batches, "certify")
    y = torch.cat([b.y for b in batches])
    if not X.is_floating_point():
        raise InvalidInputError(f"the inputs are {X.dtype}; certify needs float inputs: pass X.double()")
    return model64, X, y, tuple(b.n for b in batches)
