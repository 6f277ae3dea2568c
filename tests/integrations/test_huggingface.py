"""``CurvatureCallback`` in real Hugging Face ``Trainer`` runs (CPU, offline, a few steps): records at
the right steps, written to ``log_dir``, to ``trainer.state.log_history`` and through ``trainer.log``
to the ``on_log`` callbacks (where the ``report_to`` integrations listen), the last record equal to
``diagnose`` of the trained model, training bitwise the same with and without the callback, bad
input refused before the first step, and the missing extra named."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric import diagnose
from coupled_curvature.numeric.tracking import read_run

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed (the hf extra)")

X = torch.randn(48, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
Y = torch.randint(0, 3, (48,), generator=torch.Generator().manual_seed(2))
PROBE = (X[:24], Y[:24])
LOSS = torch.nn.CrossEntropyLoss()
BLOCKS = ["net.0.weight", "net.0.bias", "net.3.weight", "net.3.bias"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Nothing here may reach the network (no hub look-ups, no telemetry)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")


def _model():
    from transformers.modeling_outputs import SequenceClassifierOutput

    class Tiny(torch.nn.Module):
        """A ReLU net with dropout (a random stream the callback must not touch) that answers as a
        Hugging Face classifier does: ``forward(input, labels=None)`` gives a ``ModelOutput`` with
        ``logits`` and, given labels, ``loss``."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                           torch.nn.Linear(8, 3)).double()

        def forward(self, input: torch.Tensor, labels: torch.Tensor | None = None) -> SequenceClassifierOutput:
            logits = self.net(input)
            loss = None if labels is None else torch.nn.functional.cross_entropy(logits, labels)
            return SequenceClassifierOutput(loss=loss, logits=logits)

    return Tiny()


class _Rows(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return len(X)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input": X[i], "labels": Y[i]}


def _trainer(tmp_path, callbacks=(), steps: int = 7, report_to="none"):
    from transformers import Trainer, TrainingArguments, set_seed

    set_seed(0)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=report_to, use_cpu=True, seed=0,
                             max_steps=steps, logging_steps=2, save_strategy="no", disable_tqdm=True,
                             per_device_train_batch_size=8, learning_rate=0.1)
    return Trainer(model=_model(), args=args, train_dataset=_Rows(), callbacks=list(callbacks))


def _fit(tmp_path, callbacks=(), steps: int = 7):
    trainer = _trainer(tmp_path, callbacks, steps)
    trainer.train()
    return trainer


def _own(log_history: list[dict]) -> list[dict]:
    return [e for e in log_history if "loss" in e]


def _curvature(log_history: list[dict]) -> list[dict]:
    from coupled_curvature.integrations.huggingface import PREFIX

    return [e for e in log_history if any(k.startswith(PREFIX) for k in e)]


@needs_transformers
def test_records_at_the_right_steps_and_the_last_equals_diagnose(tmp_path, capsys):
    from coupled_curvature.integrations.huggingface import PREFIX, CurvatureCallback

    cb = CurvatureCallback(LOSS, PROBE, every=3, log_dir=str(tmp_path / "run"), measures=("RQ",))
    trainer = _fit(tmp_path, [cb])
    assert [r["step"] for r in cb.history] == [0, 3, 6, 7]  # start, every 3rd step, the final model
    head, records = read_run(tmp_path / "run")  # the tracker's log, as ccurv track reads it
    assert [r["step"] for r in records] == [0, 3, 6, 7] and head["every"] == 3
    final = diagnose(trainer.model.net.eval(), LOSS, PROBE, inverse=False)  # the logits, in eval mode
    for b in final:
        name = f"net.{b.name}"
        assert records[-1][f"D/{name}"] == b.coupled and records[-1][f"RQ/{name}"] == b.rayleigh
    assert records[-1]["loss"] == final.meta["loss"] and records[-1]["error"] is None
    # without a trainer handle the records still land in the trainer's log_history, as Trainer.log puts them
    logged = _curvature(trainer.state.log_history)
    assert [e["step"] for e in logged] == [0, 3, 6, 7]
    assert logged[-1][f"{PREFIX}D/net.3.weight"] == cb.history[-1]["D/net.3.weight"]
    assert logged[-1]["epoch"] == trainer.state.epoch
    assert "curvature/" not in capsys.readouterr().out  # not printed: it did not go through trainer.log


@needs_transformers
def test_records_through_trainer_log_reach_log_history_and_on_log(tmp_path):
    from transformers import TrainerCallback

    from coupled_curvature.integrations.huggingface import PREFIX, CurvatureCallback

    seen: list[dict] = []

    class Integration(TrainerCallback):
        """Stands for a report_to integration: they all listen on on_log."""

        def on_log(self, args, state, control, logs=None, **kwargs) -> None:
            seen.append(dict(logs))

    trainer = _trainer(tmp_path, [Integration()], steps=5)
    cb = CurvatureCallback(LOSS, PROBE, every=2, trainer=trainer)  # no log_dir: the trainer's log only
    trainer.add_callback(cb)
    trainer.train()
    logged = _curvature(trainer.state.log_history)
    assert [e["step"] for e in logged] == [0, 2, 4, 5]
    assert sorted(k for k in logged[-1] if k.startswith(f"{PREFIX}D/")) == sorted(f"{PREFIX}D/{b}" for b in BLOCKS)
    for entry, record in zip(logged, cb.history):
        assert all(entry[f"{PREFIX}{k}"] == v for k, v in record.items() if k.startswith("D/") or k == "loss")
    assert _curvature(seen) == [{k: v for k, v in e.items() if k != "step"} for e in logged]
    # the trainer's own log lines (loss, grad_norm, learning rate every 2 steps) are those of a run without it
    own = _own(trainer.state.log_history)
    assert [e["step"] for e in own] == [2, 4] and own == _own(_fit(tmp_path / "plain", steps=5).state.log_history)
    assert not list(tmp_path.rglob("curvature.jsonl"))


@needs_transformers
def test_a_run_stopped_early_records_its_final_model(tmp_path):
    from transformers import TrainerCallback

    from coupled_curvature.integrations.huggingface import PREFIX, CurvatureCallback

    class StopAt4(TrainerCallback):
        """Stops after the callback's own on_step_end, as EarlyStoppingCallback does from on_evaluate."""

        def on_step_end(self, args, state, control, **kwargs) -> None:
            control.should_training_stop = state.global_step == 4

    trainer = _trainer(tmp_path)
    cb = CurvatureCallback(LOSS, PROBE, every=3, trainer=trainer)
    trainer.add_callback(cb)
    trainer.add_callback(StopAt4())
    trainer.train()
    assert trainer.state.global_step == 4 and [r["step"] for r in cb.history] == [0, 3, 4]
    assert [e["step"] for e in _curvature(trainer.state.log_history)] == [0, 3, 4]
    final = diagnose(trainer.model.net.eval(), LOSS, PROBE, inverse=False)
    assert all(cb.history[-1][f"D/net.{b.name}"] == b.coupled for b in final)
    assert _curvature(trainer.state.log_history)[-1][f"{PREFIX}loss"] == final.meta["loss"]


@needs_transformers
@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard is not installed")
def test_records_reach_the_tensorboard_integration(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from coupled_curvature.integrations.huggingface import PREFIX, CurvatureCallback

    trainer = _trainer(tmp_path, steps=4, report_to=["tensorboard"])  # event files in output_dir/runs/
    cb = CurvatureCallback(LOSS, PROBE, every=2, trainer=trainer)
    trainer.add_callback(cb)
    trainer.train()
    (events,) = {p.parent for p in (tmp_path / "out").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(events)).Reload()
    scalars = acc.Scalars(f"train/{PREFIX}D/net.0.weight")  # the integration's prefix
    assert [s.step for s in scalars] == [0, 2, 4]
    assert scalars[-1].value == pytest.approx(cb.history[-1]["D/net.0.weight"], rel=1e-6)  # stored as float32


@needs_transformers
def test_training_is_bitwise_unchanged_by_the_callback(tmp_path):
    from transformers import TrainerCallback

    from coupled_curvature.integrations.huggingface import CurvatureCallback

    plain = _fit(tmp_path / "a").model.state_dict()
    trainer = _trainer(tmp_path / "b")
    cb = CurvatureCallback(LOSS, PROBE, every=2, log_dir=str(tmp_path / "run"), inverse=True, trainer=trainer)
    trainer.add_callback(cb)
    trainer.train()
    assert len(cb.history) == 5  # steps 0, 2, 4, 6 and the final 7: the callback did run
    tracked = trainer.model.state_dict()
    assert plain.keys() == tracked.keys() and all(torch.equal(plain[k], tracked[k]) for k in plain)
    # negative control: a callback that draws one random number per step changes the dropout masks,
    # and so the trained weights: the comparison above can fail

    class Draws(TrainerCallback):
        def on_step_end(self, *args, **kwargs) -> None:
            torch.rand(1)

    drawn = _fit(tmp_path / "c", [Draws()]).model.state_dict()
    assert not all(torch.equal(plain[k], drawn[k]) for k in plain)


@needs_transformers
def test_bad_input_before_training(tmp_path):
    from transformers import TrainerCallback

    from coupled_curvature.integrations.huggingface import CurvatureCallback

    with pytest.raises(InvalidInputError, match="every must be an int ≥ 1"):
        CurvatureCallback(LOSS, PROBE, every=-1)
    with pytest.raises(InvalidInputError, match="measure"):
        CurvatureCallback(LOSS, PROBE, measures=("Hmax",))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidInputError, match="is a file"):
        CurvatureCallback(LOSS, PROBE, log_dir=str(tmp_path / "afile"))
    with pytest.raises(InvalidInputError, match="trainer must be a transformers.Trainer"):
        CurvatureCallback(LOSS, PROBE, trainer="trainer")
    steps: list[int] = []

    class Count(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs) -> None:
            steps.append(state.global_step)

    bad_probe = (torch.randn(5, 7, dtype=torch.float64), torch.zeros(5, dtype=torch.long))  # 7 features, not 4
    with pytest.raises(InvalidInputError, match=r"model\(X\) failed"):
        _fit(tmp_path, [Count(), CurvatureCallback(LOSS, bad_probe, every=1)])
    other = _trainer(tmp_path / "other")
    with pytest.raises(InvalidInputError, match="another Trainer"):
        _fit(tmp_path, [Count(), CurvatureCallback(LOSS, PROBE, every=1, trainer=other)])
    assert steps == []  # refused when training starts, before the first batch


def test_without_transformers_the_extra_is_named(monkeypatch):
    """The module imports without transformers (its class documents itself); making one says what to install."""
    path = importlib.util.find_spec("coupled_curvature.integrations.huggingface").origin
    monkeypatch.setitem(sys.modules, "transformers", None)  # importing it fails, as when not installed
    spec = importlib.util.spec_from_file_location("_ccurv_hf_missing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(MissingExtraError, match=r"pip install 'coupled-curvature\[hf\]'"):
        module.CurvatureCallback(LOSS, PROBE, every=10)
    with pytest.raises(InvalidInputError):  # options are still checked first
        module.CurvatureCallback(LOSS, PROBE, every=0)
