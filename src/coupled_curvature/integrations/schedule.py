"""What the framework callbacks share: a :class:`TrackerSchedule` checks the tracker's options when the
callback is made, builds the :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker` when
training starts, and records at each multiple of ``every`` and at a forced (final) step, never twice at
one step; :class:`ScheduledCallback` is the part of a callback that is the same in every framework (the
schedule it holds, its options, its tracker and records); :func:`framework_base` imports a framework's callback
class when it is installed; :func:`logged_values` turns a record into the flat metrics a framework's loggers take.

A callback (``integrations.huggingface``, ``integrations.lightning``) is glue around the tracker: the
tracker computes, checks and writes the records; the callback decides when (after every ``every``-th
optimizer step) and where they go. For block ``b`` with value ``w``, gradient ``g`` and Hessian block
``H`` of the loss on the fixed probe batch::

    D = (wᵀHw / wᵀw) / ‖g‖²

>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 2)).double()
>>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.tensor([0, 1] * 4)
>>> s = TrackerSchedule(torch.nn.CrossEntropyLoss(), (X, y), every=2)
>>> _ = s.start(net, sinks=[])
>>> for step in range(5):
...     s.at(step)
>>> s.at(4, always=True)  # already recorded: not again
>>> s.at(5, always=True)  # the final step
>>> [r["step"] for r in s.history]
[0, 2, 4, 5]
>>> sorted(logged_values(s.history[-1], "c/"))[:2]
['c/D/0.bias', 'c/D/0.weight']
>>> s.close()
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from coupled_curvature.base.errors import MissingExtraError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET, check_target
from coupled_curvature.numeric.tracking.sinks import check_log_dir
from coupled_curvature.numeric.tracking.tracker import CurvatureTracker, check_options

__all__ = ["PREFIX", "OPTIONS", "ScheduledCallback", "TrackerSchedule", "framework_base", "logged_values"]

#: what the keys of a record are prefixed with in a framework's log (its loggers, ``log_history``)
PREFIX = "curvature/"

#: the tracker's options a schedule passes on, with their defaults (those of the tracker)
OPTIONS: dict[str, Any] = {"inverse": False, "blocks": "tensor", "measures": ("D",), "strict": False, "transform": None,
                           "output": None, "target": DEFAULT_TARGET}


class TrackerSchedule:
    """The tracker a callback drives: ``TrackerSchedule(loss_fn, probe, *, every, log_dir, **options)`` with
    ``options`` those of :data:`OPTIONS` (``inverse``, ``blocks``, ``measures``, ``strict``, ``transform``,
    ``output``, ``target``: as for :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`),
    checked here (before training)."""

    def __init__(self, loss_fn: Callable, probe: object, *, every: int = 100, log_dir: str | None = None,
                 **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"TrackerSchedule got unexpected option(s) {', '.join(unknown)}; it takes "
                            f"{', '.join(OPTIONS)}")
        o = {**OPTIONS, **options}
        check_options(every=every, inverse=o["inverse"], strict=o["strict"], measures=o["measures"],
                      transform=o["transform"])
        ModelCall(o["output"])
        check_target(o["target"])
        self.loss_fn, self.probe, self.every, self.strict = loss_fn, probe, every, o["strict"]
        self.log_dir = None if log_dir is None else check_log_dir(log_dir)
        self._options: dict[str, Any] = {**o, "measures": tuple(o["measures"])}
        self.tracker: CurvatureTracker | None = None
        self._last: int | None = None
        self._open = False

    @property
    def history(self) -> list[dict[str, Any]]:
        """The records so far (an earlier run's first, when ``log_dir`` held one)."""
        return [] if self.tracker is None else self.tracker.history

    def start(self, model: nn.Module, sinks: Sequence[Any]) -> CurvatureTracker:
        """A new tracker on ``model`` (the previous one closed), writing to ``log_dir`` and ``sinks``."""
        self.close()
        self._last = None
        named: list[Any] = ["jsonl"] if self.log_dir is not None else []
        self.tracker = CurvatureTracker(model, self.loss_fn, self.probe, every=self.every, log_dir=self.log_dir,
                                        sinks=[*named, *sinks], **self._options)
        self._open = True
        return self.tracker

    def at(self, step: int, *, always: bool = False) -> None:
        """Record at ``step`` when it is a multiple of ``every`` (any step with ``always``), once per step."""
        if self.tracker is None or not self._open or step == self._last:
            return
        if always:
            self.tracker.record(step)
        elif self.tracker.step(step) is None:
            return
        self._last = step

    def close(self) -> None:
        """Close the tracker's sinks (idempotent); later :meth:`at` calls do nothing."""
        self._open = False
        if self.tracker is not None:
            self.tracker.close()


class ScheduledCallback:
    """The part of a framework's ``CurvatureCallback`` that is not the framework's: made with the tracker's
    options, it holds their :class:`TrackerSchedule` (the options checked first, so a bad option is said before
    a missing extra) and keeps ``loss_fn``, ``probe``, ``every``, ``strict`` and ``log_dir`` as given; ``tracker``
    and ``history`` read through the schedule. A subclass names its framework in ``framework``: the package,
    the extra that installs it, and whether it is installed (its base is not :func:`framework_base`'s ``object``)."""

    framework: tuple[str, str, bool]

    def __init__(self, loss_fn: Callable, probe: object, *, every: int = 100, log_dir: str | None = None,
                 inverse: bool = False, blocks: str | Mapping[str, Sequence[str]] = "tensor",
                 measures: Sequence[str] = ("D",), strict: bool = False,
                 transform: Callable[[nn.Module], nn.Module] | None = None,
                 output: str | int | Callable | None = None, target: str | Callable = "labels") -> None:
        schedule = TrackerSchedule(loss_fn, probe, every=every, log_dir=log_dir, inverse=inverse, blocks=blocks,
                                   measures=measures, strict=strict, transform=transform, output=output, target=target)
        package, extra, installed = self.framework
        if not installed:
            MissingExtraError.require(package, "CurvatureCallback", extra,
                                      "in a hand-written loop, CurvatureTracker(...).step(step) does the same")
        self._schedule = schedule
        self.loss_fn, self.probe = schedule.loss_fn, schedule.probe
        self.every, self.strict = schedule.every, schedule.strict
        self.log_dir = schedule.log_dir
        super().__init__()

    @property
    def tracker(self) -> CurvatureTracker | None:
        """The tracker (``None`` before training starts)."""
        return self._schedule.tracker

    @property
    def history(self) -> list[dict[str, Any]]:
        """The records so far (an earlier run's first, when ``log_dir`` held one)."""
        return self._schedule.history


def framework_base(module: str, name: str) -> Any:
    """The framework's callback class ``module.name``, or ``object`` when the framework is not installed (the
    callback still exists and documents itself; making one says what to install).

    >>> framework_base("collections", "OrderedDict").__name__, framework_base("no_such_framework.callbacks", "Callback")
    ('OrderedDict', <class 'object'>)
    """
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return object


def logged_values(record: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """The record's finite numbers (not its step or wall time), keys prefixed: what loggers take.

    >>> logged_values({"step": 3, "wall_time": 1.0, "loss": 0.5, "D/w": None, "error": None}, "c/")
    {'c/loss': 0.5}
    """
    return {prefix + k: float(v) for k, v in record.items()
            if k not in ("step", "wall_time") and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)}
