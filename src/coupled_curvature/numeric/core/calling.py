"""How the engine calls a model: the inputs it passes and the tensor it takes from the output.

**Inputs.** A batch's inputs ``X`` are a tensor, passed as ``model(X)``, or a mapping of tensors (a
``{"input_ids", "attention_mask"}`` batch of a ``transformers`` data loader, the targets taken out),
passed as keyword arguments ``model(**X)``. Either way the first dimension of every tensor is the
sample dimension: :func:`n_samples`, :func:`take_samples` and :func:`map_inputs` read and slice it.

**Outputs.** The loss receives one tensor, chosen from whatever the model returns by one rule:

- a tensor is used as is;
- a mapping (a ``transformers`` ``ModelOutput``, a dict) gives its ``"logits"`` entry; one without
  that key is refused, naming its keys;
- a tuple or list gives its first element when that is a tensor (the convention of torch and of
  ``transformers`` with ``return_dict=False``).

``output=`` overrides the rule: a key (``str``), an index (``int``) or a callable ``output(out) ->
Tensor``. :class:`ModelCall` carries that choice; every place the engine runs the model goes through
its :meth:`~ModelCall.module` or :meth:`~ModelCall.functional`, so no call site can apply another rule.

>>> import torch
>>> from torch import nn
>>> class Pair(nn.Module):
...     def __init__(self):
...         super().__init__(); self.lin = nn.Linear(2, 3)
...     def forward(self, x):
...         return {"hidden": x, "logits": self.lin(x)}
>>> net, X = Pair(), torch.randn(4, 2)
>>> tuple(ModelCall().module(net, X).shape), tuple(ModelCall("hidden").module(net, X).shape)
((4, 3), (4, 2))
>>> ModelCall(output=0).module(net, X)
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: output=0 is an index, but the model returns a dict with keys 'hidden', 'logits'; pass output= one of these keys
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Union

import torch
from torch import Tensor, nn
from torch.func import functional_call

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["CALL_ERRORS", "Inputs", "ModelCall", "describe_inputs", "forward_checked", "map_inputs", "n_samples",
           "selected_checked", "structure", "take_samples"]

#: a batch's inputs: one tensor (``model(X)``) or a mapping of tensors (``model(**X)``)
Inputs = Union[Tensor, Mapping[str, Tensor]]
#: what a model's forward or a loss may raise on inputs it cannot take (caught only around those calls)
CALL_ERRORS = (RuntimeError, TypeError, ValueError, IndexError, KeyError, AttributeError)


def n_samples(X: Inputs) -> int:
    """The number of samples of ``X``: the first dimension of its tensor, or of its mapping's tensors.

    >>> n_samples(torch.zeros(3, 2)), n_samples({"ids": torch.zeros(5, 7, dtype=torch.long)})
    (3, 5)
    """
    if isinstance(X, Mapping):
        return int(next(iter(X.values())).shape[0])
    return int(X.shape[0])


def map_inputs(X: Inputs, fn: Callable[[Tensor], Tensor]) -> Inputs:
    """``fn`` applied to the tensor ``X`` or to every tensor of the mapping ``X`` (a dict, same keys).

    >>> map_inputs({"a": torch.ones(2, 1)}, lambda t: 2 * t)
    {'a': tensor([[2.],
            [2.]])}
    """
    if isinstance(X, Mapping):
        return {k: fn(v) for k, v in X.items()}
    return fn(X)


def take_samples(X: Inputs, index: slice | int) -> Inputs:
    """The samples ``index`` of ``X`` (a slice keeps the sample dimension, an int drops it).

    >>> take_samples({"a": torch.arange(6).reshape(3, 2)}, slice(1, 2))
    {'a': tensor([[2, 3]])}
    """
    return map_inputs(X, lambda t: t[index])


def describe_inputs(X: Inputs) -> str:
    """``X``'s shapes and dtypes, for messages.

    >>> describe_inputs({"ids": torch.zeros(2, 3, dtype=torch.long)})
    "inputs {'ids': (2, 3) torch.int64}"
    """
    if isinstance(X, Mapping):
        return "inputs {" + ", ".join(f"{k!r}: {tuple(v.shape)} {v.dtype}" for k, v in X.items()) + "}"
    return f"inputs of shape {tuple(X.shape)}, {X.dtype}"


def structure(out: object) -> str:
    """A short description of a model's non-tensor output, e.g. ``a tuple (Tensor (16, 3), Tensor (16, 4))``.

    >>> structure((torch.zeros(2, 3), {"a": torch.zeros(2)}))
    'a tuple (Tensor (2, 3), dict)'
    """
    def one(v: object) -> str:
        return f"Tensor {tuple(v.shape)}" if isinstance(v, Tensor) else type(v).__name__
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} ({', '.join(one(v) for v in out[:4])}{', …' if len(out) > 4 else ''})"
    if isinstance(out, Mapping):
        return f"a {type(out).__name__} with keys {_keys(out)}"
    return f"a {type(out).__name__}"


def _keys(out: Mapping) -> str:
    keys = list(out)
    return ", ".join(map(repr, keys[:8])) + (", …" if len(keys) > 8 else "")


@dataclass(frozen=True)
class ModelCall:
    """How to call a model and which tensor of its output the loss receives (see the module docstring).

    ``output``: ``None`` (the rule), a key, an index or a callable ``output(out) -> Tensor``.

    >>> ModelCall(output=1.5)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: output must be None, a key (str), an index (int) or a callable output(out) -> Tensor, got 1.5
    """

    output: str | int | Callable[[object], Tensor] | None = None

    def __post_init__(self) -> None:
        o = self.output
        if not (o is None or isinstance(o, str) or (isinstance(o, int) and not isinstance(o, bool)) or callable(o)):
            raise InvalidInputError("output must be None, a key (str), an index (int) or a callable "
                                    f"output(out) -> Tensor, got {o!r}")

    def select(self, out: object) -> Tensor:
        """The tensor the loss receives from the model's output ``out``; our error when there is none."""
        o = self.output
        if o is None:
            return _by_rule(out)
        if callable(o) and not isinstance(o, (str, int)):
            got = o(out)
            if not isinstance(got, Tensor):
                raise InvalidInputError(f"output(out) returned {structure(got)}, not a tensor (the model returns "
                                        f"{_what(out)}); return the tensor the loss takes, e.g. lambda out: out.logits")
            return got
        if isinstance(o, str):
            if not isinstance(out, Mapping):
                raise InvalidInputError(f"output={o!r} is a key, but the model returns {_what(out)}; "
                                        f"{_fix(out)}")
            if o not in out:
                raise InvalidInputError(f"output={o!r} is not a key of the model's output ({structure(out)}); "
                                        "pass output= one of these keys")
            got = out[o]
        else:
            if not isinstance(out, (tuple, list)):
                raise InvalidInputError(f"output={o} is an index, but the model returns {_what(out)}; {_fix(out)}")
            if not -len(out) <= o < len(out):
                raise InvalidInputError(f"output={o} is out of range: the model returns {structure(out)}, "
                                        f"{len(out)} element(s); pass an index in 0..{len(out) - 1}")
            got = out[o]
        if not isinstance(got, Tensor):
            raise InvalidInputError(f"output={o!r} selects {structure(got)}, not a tensor, from the model's output "
                                    f"({structure(out)}); pass output= the entry holding the tensor the loss takes, "
                                    "or a callable")
        return got

    def module(self, model: nn.Module, X: Inputs) -> Tensor:
        """The selected output of ``model(X)`` (``model(**X)`` for a mapping)."""
        out = model(**X) if isinstance(X, Mapping) else model(X)
        return self.select(out)

    def functional(self, model: nn.Module, tensors: Mapping[str, Tensor], X: Inputs) -> Tensor:
        """The selected output of ``model`` run with its parameters and buffers replaced by ``tensors``."""
        if isinstance(X, Mapping):
            out = functional_call(model, dict(tensors), (), dict(X))
        else:
            out = functional_call(model, dict(tensors), (X,))
        return self.select(out)


def _what(out: object) -> str:
    return f"a Tensor {tuple(out.shape)}" if isinstance(out, Tensor) else structure(out)


def _fix(out: object) -> str:
    if isinstance(out, Tensor):
        return "drop output= (a tensor output is used as is)"
    if isinstance(out, Mapping):
        return "pass output= one of these keys"
    if isinstance(out, (tuple, list)):
        return f"pass output= an index in 0..{len(out) - 1}"
    return "pass a callable output(out) -> Tensor"


def _by_rule(out: object) -> Tensor:
    if isinstance(out, Tensor):
        return out
    if isinstance(out, Mapping):
        if "logits" in out and isinstance(out["logits"], Tensor):
            return out["logits"]
        raise InvalidInputError(f"the model returns {structure(out)} and no tensor 'logits'; pass output= the key "
                                "of the tensor the loss takes (or a callable output(out) -> Tensor)")
    if isinstance(out, (tuple, list)):
        if out and isinstance(out[0], Tensor):
            return out[0]
        raise InvalidInputError(f"the model returns {structure(out)}, whose first element is not a tensor; pass "
                                "output= the index of the tensor the loss takes (or a callable output(out) -> Tensor)")
    raise InvalidInputError(f"the model returns {structure(out)}, not a tensor; pass output= a callable "
                            "output(out) -> Tensor that picks the tensor the loss takes")


def forward_checked(model: nn.Module, X: Inputs, where: str, first_shape: tuple | None = None) -> object:
    """``model(X)`` (``model(**X)`` for a mapping) with no gradient, its output as the model returns it; a
    failure becomes an ``InvalidInputError`` that names ``where``.

    The forward can only fail at run time (shapes and dtypes are the model's business), so
    this is the one place that catches it, narrowly, and says what to pass instead.

    >>> forward_checked(nn.Linear(2, 1), torch.zeros(3, 5), "batch 0")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: model(X) failed on batch 0 (inputs of shape (3, 5), torch.float32): mat1 and mat2 shapes cannot be multiplied (3x5 and 2x1); pass inputs of the shape and dtype the model takes
    """
    try:
        with torch.no_grad():
            return model(**X) if isinstance(X, Mapping) else model(X)
    except CALL_ERRORS as e:
        if isinstance(X, Mapping):
            fix = "pass a batch whose entries (the targets taken out) are the keyword arguments the model takes"
        elif not (X.is_floating_point() or X.is_complex()):
            fix = f"the inputs are integers ({X.dtype}); pass float inputs, e.g. X.double()"
        elif first_shape is not None and tuple(X.shape[1:]) != first_shape:
            fix = f"batch 0 has per-sample shape {first_shape}; pass batches of the shape the model takes"
        else:
            fix = "pass inputs of the shape and dtype the model takes"
        head = "model(**X)" if isinstance(X, Mapping) else "model(X)"
        raise InvalidInputError(
            f"{head} failed on {where} ({describe_inputs(X)}): "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}; {fix}"
        ) from None


def selected_checked(call: ModelCall, out: object, where: str) -> Tensor:
    """``call.select(out)``; our error naming ``where`` when there is no tensor to select or a callable
    ``output=`` fails on ``out``.

    >>> selected_checked(ModelCall(), {"h": torch.zeros(1)}, "batch 0")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: batch 0: the model returns a dict with keys 'h' and no tensor 'logits'; pass output= the key of the tensor the loss takes (or a callable output(out) -> Tensor)
    """
    try:
        return call.select(out)
    except InvalidInputError as e:
        raise InvalidInputError(f"{where}: {e}") from None
    except CALL_ERRORS as e:  # a callable output= that fails on this output
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InvalidInputError(f"{where}: output(out) failed on {structure(out)} ({why}); pass a callable that "
                                "returns the tensor the loss takes") from None
