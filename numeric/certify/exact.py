"""A model's float64 parameters and a data set's inputs as exact arb matrices (every float64 is dyadic)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from flint import arb_mat
from torch import Tensor, nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches

__all__ = ["as_arb", "exact_data", "exact_params", "MIN_PREC", "MAX_PREC", "check_prec"]

MIN_PREC, MAX_PREC = 53, 100_000


def check_prec(prec: object) -> int:
    """``prec`` as bits of working precision: an int in ``[53, 100000]``.

    >>> check_prec(40)
    Traceback (most recent call last):
    ...
    coupled_curvature.errors.InvalidInputError: prec must be an int in [53, 100000] (bits), got 40; pass e.g. prec=256
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


def exact_data(model: nn.Module, loss_fn: Callable, data: object) -> tuple[nn.Module, Tensor, Tensor]:
    """The float64 copy of ``model`` (finite weights, eval mode checked) and all batches of ``data``
    concatenated (``L`` is the same: mean losses are weighted by batch size, sums add)."""
    model64 = float64_copy(model)
    batches = prepare_batches(data, loss_fn)
    X = torch.cat([b.X for b in batches])
    y = torch.cat([b.y for b in batches])
    if not X.is_floating_point():
        raise InvalidInputError(f"the inputs are {X.dtype}; certify needs float inputs: pass X.double()")
    return model64, X, y
