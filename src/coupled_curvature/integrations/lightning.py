"""``CurvatureCallback``: the coupled diagnostic ``D`` per block, logged during a Lightning run.

The callback is glue around :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`
(:mod:`~coupled_curvature.integrations.schedule` says what it computes): it decides when (after every
``every``-th optimizer step, counted by ``trainer.global_step``) and where the records go.

* **when**: at the start of training (step 0, the initial model), after each optimizer step whose
  ``global_step`` is a multiple of ``every``, and at the end of training (the final model, when
  its step was not already recorded): the last record is ``diagnose`` of the trained model;
* **where**: through every logger of the trainer (``logger.log_metrics``, keys prefixed with
  ``curvature/``, the numeric values only) when the trainer has one, and to
  ``log_dir/curvature.jsonl`` (the tracker's append-only log, readable by ``ccurv track``) when
  ``log_dir`` is given; ``callback.history`` holds the records in any case.

Like the tracker, the callback never changes the model, its gradients, the optimizer or any
random stream: the same seed trains bitwise the same weights with and without it. Only the process
of global rank 0 computes. Needs the ``lightning`` extra (``pip install
'coupled-curvature[lightning]'``); without it the constructor raises
:class:`~coupled_curvature.base.errors.MissingExtraError`.

A run (the SKIP lines need Lightning; ``module`` is a ``LightningModule`` whose ``forward`` maps
the probe's ``X`` to the logits that ``loss_fn`` takes)::

    >>> cb = CurvatureCallback(torch.nn.CrossEntropyLoss(), (X, y), every=50, log_dir="runs/a")  # doctest: +SKIP
    >>> lightning.Trainer(max_steps=500, callbacks=[cb]).fit(module, loader)                   # doctest: +SKIP
    >>> cb.history[-1]["step"]                                                                  # doctest: +SKIP
    500

Options are checked when the callback is made, the model and probe when training starts (before
the first step):

>>> import torch
>>> CurvatureCallback(torch.nn.CrossEntropyLoss(), (torch.randn(4, 2), torch.tensor([0, 1])), measures=("Q",))
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: unknown measure(s) ['Q']; choose among D, Dplus, RQ, sqnorm_grad
"""

from __future__ import annotations

from typing import Any

from torch import nn

from coupled_curvature.integrations.schedule import PREFIX, ScheduledCallback, framework_base, logged_values

_Callback: Any = framework_base("lightning.pytorch.callbacks", "Callback")

__all__ = ["CurvatureCallback", "PREFIX"]


class CurvatureCallback(ScheduledCallback, _Callback):
    """Log ``D = (wᵀHw/wᵀw)/‖g‖²`` per block on the fixed ``probe`` every ``every`` optimizer steps.

    The options (the signature's, with their defaults) mean what they mean for
    :class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`, which the callback builds
    on the ``LightningModule`` when fitting starts (``transform``, e.g. ``lambda m: m.net``, picks
    the network inside it). ``tracker`` is that tracker (``None`` before fitting), ``history`` its
    records.
    """

    framework = ("lightning", "lightning", _Callback is not object)
    _trainer: Any = None

    def setup(self, trainer: Any, pl_module: nn.Module, stage: str) -> None:
        """Build the tracker when fitting starts; a probe the model cannot take fails here."""
        if stage != "fit" or not trainer.is_global_zero:
            return
        self._trainer = trainer
        self._schedule.start(pl_module, [self._to_loggers] if trainer.loggers else [])

    def _to_loggers(self, record: dict[str, Any]) -> None:
        metrics = logged_values(record, PREFIX)
        for logger in self._trainer.loggers:
            logger.log_metrics(metrics, step=int(record["step"]))

    def on_train_start(self, trainer: Any, pl_module: nn.Module) -> None:
        """The model before the first update (or at the resumed step)."""
        self._schedule.at(trainer.global_step)

    def on_train_batch_end(self, trainer: Any, pl_module: nn.Module, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """After an optimizer step whose ``global_step`` is a multiple of ``every``."""
        self._schedule.at(trainer.global_step)

    def on_train_end(self, trainer: Any, pl_module: nn.Module) -> None:
        """The final model, unless its step is already recorded; then the tracker is closed."""
        self._schedule.at(trainer.global_step, always=True)
        self._schedule.close()

    def teardown(self, trainer: Any, pl_module: nn.Module, stage: str) -> None:
        """Close the tracker's sinks (also after an exception)."""
        if stage == "fit":
            self._schedule.close()
