"""``CurvatureCallback``: the coupled diagnostic ``D`` per block, logged during a Hugging Face ``Trainer`` run.

The callback is glue around :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`
(:mod:`~coupled_curvature.integrations.schedule` says what it computes): it decides when (after every
``every``-th optimizer step, counted by ``state.global_step``) and where the records go.

* **when**: at the start of training (step 0, the initial model; the resumed step after a restart
  from a checkpoint, when it is a multiple of ``every``), after each optimizer step whose
  ``global_step`` is a multiple of ``every``, and after the last step (the final model, when its
  step was not already recorded): the last record is ``diagnose`` of the trained model;
* **what**: the model the ``Trainer`` passes to its callbacks (``transform``, e.g.
  ``lambda m: m.backbone``, picks a network inside it). ``loss_fn`` receives the tensor the engine's
  one rule picks from the model's output (:mod:`~coupled_curvature.numeric.core.calling`): a
  ``ModelOutput``'s or a dict's ``"logits"`` entry, a tuple's first element, or what ``output=`` names.
  The probe is an ``(X, y)`` pair (``X`` the first argument) or a mapping batch such as the
  ``Trainer``'s data collator yields (``{"input_ids", "attention_mask", "labels"}``: the entries other
  than ``target``, ``"labels"`` by default, go in as keyword arguments);
* **where**: the numeric values of each record (keys prefixed with ``curvature/``) go through
  ``trainer.log`` when the callback is given its ``trainer``, so they land in
  ``trainer.state.log_history`` and in every ``report_to`` integration (TensorBoard, W&B, MLflow,
  ...) like the trainer's own loss; without a trainer they are appended to ``state.log_history``
  only (a ``TrainerCallback`` sees no handle to the trainer's loggers). With ``log_dir`` the
  tracker's append-only ``log_dir/curvature.jsonl`` (readable by ``ccurv track``) gets every
  record as well; ``callback.history`` holds them in any case.

Like the tracker, the callback never changes the model, its gradients, the optimizer or any
random stream: the same seed trains bitwise the same weights with and without it. Only the process
of global rank 0 computes. Needs the ``hf`` extra (``pip install 'coupled-curvature[hf]'``);
without ``transformers`` the constructor raises :class:`~coupled_curvature.base.errors.MissingExtraError`.

A run (the SKIP lines need ``transformers``; ``model`` returns logits, or a ``ModelOutput``
holding them, for the probe's ``X``)::

    >>> args = TrainingArguments("out", max_steps=500, report_to=["tensorboard"])        # doctest: +SKIP
    >>> trainer = Trainer(model=model, args=args, train_dataset=ds)                       # doctest: +SKIP
    >>> cb = CurvatureCallback(torch.nn.CrossEntropyLoss(), (X, y), every=50, trainer=trainer)  # doctest: +SKIP
    >>> trainer.add_callback(cb)                                                          # doctest: +SKIP
    >>> _ = trainer.train()                                                               # doctest: +SKIP
    >>> logged = [e for e in trainer.state.log_history if PREFIX + "D/classifier.weight" in e]  # doctest: +SKIP
    >>> [e["step"] for e in logged][-3:]                                                  # doctest: +SKIP
    [400, 450, 500]
    >>> cb.history[-1]["step"] == trainer.state.global_step                               # doctest: +SKIP
    True

The keys in ``log_history`` and the integrations are the record's, prefixed:

>>> PREFIX + "D/classifier.weight"
'curvature/D/classifier.weight'

Options are checked when the callback is made, the model and probe when training starts (before
the first step):

>>> import torch
>>> CurvatureCallback(torch.nn.CrossEntropyLoss(), (torch.randn(4, 2), torch.tensor([0, 1, 0, 1])), every=0)
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: every must be an int ≥ 1 (compute every that many steps), got 0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.integrations.schedule import PREFIX, ScheduledCallback, framework_base, logged_values

_Callback: Any = framework_base("transformers", "TrainerCallback")

__all__ = ["CurvatureCallback", "PREFIX"]


class CurvatureCallback(ScheduledCallback, _Callback):
    """Log ``D = (wᵀHw/wᵀw)/‖g‖²`` per block on the fixed ``probe`` every ``every`` optimizer steps.

    The options other than ``trainer`` (the signature's, with their defaults) mean what they mean for
    :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`, which the callback
    builds on the ``Trainer``'s model when training starts. ``trainer`` (a ``transformers.Trainer``)
    routes the records through ``trainer.log``; pass it and add the callback with
    ``trainer.add_callback(cb)``. ``tracker`` is the tracker (``None`` before training), ``history``
    its records.
    """

    framework = ("transformers", "hf", _Callback is not object)

    def __init__(self, loss_fn: Callable, probe: object, *, every: int = 100, log_dir: str | None = None,
                 inverse: bool = False, blocks: str | Mapping[str, Sequence[str]] = "tensor",
                 measures: Sequence[str] = ("D",), strict: bool = False,
                 transform: Callable[[nn.Module], nn.Module] | None = None, trainer: Any = None,
                 output: str | int | Callable | None = None, target: str | Callable = "labels") -> None:
        super().__init__(loss_fn, probe, every=every, log_dir=log_dir, inverse=inverse, blocks=blocks,
                         measures=measures, strict=strict, transform=transform, output=output, target=target)
        if trainer is not None:
            from transformers import Trainer

            if not isinstance(trainer, Trainer):
                raise InvalidInputError(f"trainer must be a transformers.Trainer (or None), "
                                        f"got {type(trainer).__name__}")
        self.trainer = trainer
        self._state: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                       **kwargs: Any) -> None:
        """Build the tracker (a probe the model cannot take fails here, before the first step) and
        record the model before the first update (or at the resumed step)."""
        if not state.is_world_process_zero:
            return
        if self.trainer is not None and self.trainer.state is not state:
            raise InvalidInputError("this CurvatureCallback was given another Trainer than the one training; "
                                    "pass trainer= the Trainer it is added to")
        if not isinstance(model, nn.Module):
            raise InvalidInputError(f"the Trainer passed no torch.nn.Module to its callbacks, "
                                    f"got {type(model).__name__}")
        self._state = state
        self._schedule.start(model, [self._to_trainer])
        self._schedule.at(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """After an optimizer step whose ``global_step`` is a multiple of ``every``, and after the last one."""
        last = bool(control.should_training_stop) or (state.max_steps > 0 and state.global_step >= state.max_steps)
        self._schedule.at(state.global_step, always=last)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The final model, unless its step is already recorded (it is, unless training stopped early);
        then the tracker is closed."""
        self._schedule.at(state.global_step, always=True)
        self._schedule.close()

    def _to_trainer(self, record: dict[str, Any]) -> None:
        metrics = logged_values(record, PREFIX)
        if not metrics:
            return
        if self.trainer is not None:
            # log_history and every on_log (the report_to integrations, the printer); trainer.log marks
            # the step's logging done, which would drop the trainer's own loss line of this step
            control = self.trainer.control
            due = control.should_log
            try:
                self.trainer.log(metrics)
            finally:
                control.should_log = due
            return
        if self._state.epoch is not None:
            metrics["epoch"] = self._state.epoch
        self._state.log_history.append({**metrics, "step": int(record["step"])})  # as Trainer.log writes it

