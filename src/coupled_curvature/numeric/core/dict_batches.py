"""Batches given as mappings (``{"input_ids", "attention_mask", "labels"}``, as ``transformers`` data loaders
yield them): which entry holds the targets, and which entries are the model's keyword inputs.

The targets are ``batch[target]`` (``target="labels"`` by default) and the inputs every other entry; a
callable ``target(batch) -> Tensor`` computes the targets instead, and the inputs are then every entry
(a causal language model's targets are often its ``input_ids``). Every entry must be a tensor (or numpy
array) whose first dimension is the sample dimension, the same for all of them.

>>> import torch
>>> b = {"input_ids": torch.zeros(2, 5, dtype=torch.long), "labels": torch.tensor([0, 1])}
>>> X, y = dict_batch_parts(b, "labels", 0)
>>> sorted(X), y.tolist()
(['input_ids'], [0, 1])
>>> dict_batch_parts(b, "label", 0)
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: batch 0 has no entry 'label' (its keys: 'input_ids', 'labels'); pass target= the key of the targets, or a callable target(batch) -> Tensor
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["DEFAULT_TARGET", "check_target", "dict_batch_parts"]

#: the key of the targets in a mapping batch unless ``target=`` names another
DEFAULT_TARGET = "labels"


def check_target(target: object) -> None:
    """``target`` must be a key (``str``) or a callable ``target(batch) -> Tensor``.

    >>> check_target(3)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: target must be the key of the targets in a mapping batch (a str, 'labels' by default) or a callable target(batch) -> Tensor, got 3
    """
    if not (isinstance(target, str) or callable(target)):
        raise InvalidInputError("target must be the key of the targets in a mapping batch (a str, 'labels' by "
                                f"default) or a callable target(batch) -> Tensor, got {target!r}")


def _keys(batch: Mapping) -> str:
    return ", ".join(map(repr, list(batch)[:8])) + (", …" if len(batch) > 8 else "")


def dict_batch_parts(batch: Mapping, target: str | Callable[[Mapping], object], index: int) -> tuple[dict, object]:
    """``(inputs, targets)`` of the mapping batch number ``index``, as given (converted by the caller);
    our error when the targets are missing, an entry is not an array, or no input is left."""
    if not all(isinstance(k, str) for k in batch):
        raise InvalidInputError(f"batch {index} has keys that are not strings ({_keys(batch)}); its entries go to "
                                "the model as keyword arguments, so key them by argument name")
    if isinstance(target, str):
        if target not in batch:
            raise InvalidInputError(f"batch {index} has no entry {target!r} (its keys: {_keys(batch)}); pass "
                                    "target= the key of the targets, or a callable target(batch) -> Tensor")
        inputs, y = {k: v for k, v in batch.items() if k != target}, batch[target]
    else:
        inputs, y = dict(batch), target(batch)
    for k, v in inputs.items():
        if not hasattr(v, "shape") or len(v.shape) == 0:
            what = type(v).__name__ if not hasattr(v, "shape") else "a tensor with no sample dimension"
            raise InvalidInputError(f"batch {index}'s entry {k!r} is {what}, not an array of samples; every entry "
                                    "goes to the model, so drop the entries it does not take, or make them tensors "
                                    "with the samples along dimension 0")
    if not inputs:
        raise InvalidInputError(f"batch {index} holds the targets only (keys: {_keys(batch)}); pass the model's "
                                "inputs as the other entries")
    counts = {k: int(v.shape[0]) for k, v in inputs.items()}
    if len(set(counts.values())) > 1:
        raise InvalidInputError(f"batch {index}'s entries have different sample counts ("
                                f"{', '.join(f'{k!r}: {n}' for k, n in counts.items())}); every entry needs the "
                                "samples along dimension 0, the same number in each")
    return inputs, y
