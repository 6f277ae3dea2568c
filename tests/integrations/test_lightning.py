"""``CurvatureCallback`` in real Lightning runs (CPU, a few steps): records written to ``log_dir`` and
through the trainer's logger, the last record equal to ``diagnose`` of the trained model, training
bitwise the same with and without the callback, bad input refused before the first step, and the
missing extra named. Lightning's own warnings about this tiny setup are ignored here, by message."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric import diagnose
from coupled_curvature.numeric.tracking import read_run

HAVE_LIGHTNING = importlib.util.find_spec("lightning") is not None
needs_lightning = pytest.mark.skipif(not HAVE_LIGHTNING, reason="lightning is not installed (the lightning extra)")

# Lightning's warnings about a tiny CPU run, and one it raises about torch's pytree API: not ours
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:.*isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"),
    # said on machines with more than a few cores (the loader here is 48 rows in the main process)
    pytest.mark.filterwarnings("ignore:The '(train|val)_dataloader' does not have many workers:UserWarning"),
]

X = torch.randn(48, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
Y = torch.randint(0, 3, (48,), generator=torch.Generator().manual_seed(2))
PROBE = (X[:24], Y[:24])
LOSS = torch.nn.CrossEntropyLoss()


def _module():
    import lightning as L

    class Tiny(L.LightningModule):
        """A ReLU net with dropout (a random stream the callback must not touch), SGD with momentum."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                           torch.nn.Linear(8, 3)).double()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

    return Tiny()


def _fit(callbacks=(), logger=False, steps: int = 7):
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    L.seed_everything(0, verbose=False)
    module = _module()
    trainer = L.Trainer(max_steps=steps, logger=logger, callbacks=list(callbacks), accelerator="cpu", devices=1,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        log_every_n_steps=1)
    trainer.fit(module, DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True))
    return module


@needs_lightning
def test_records_to_log_dir_and_the_last_equals_diagnose(tmp_path):
    from coupled_curvature.integrations.lightning import CurvatureCallback

    cb = CurvatureCallback(LOSS, PROBE, every=3, log_dir=str(tmp_path / "run"), measures=("RQ",))
    module = _fit([cb])
    assert [r["step"] for r in cb.history] == [0, 3, 6, 7]  # start, every 3rd step, the final model
    head, records = read_run(tmp_path / "run")  # the tracker's log, as ccurv track reads it
    assert [r["step"] for r in records] == [0, 3, 6, 7] and head["every"] == 3
    final = diagnose(module.eval(), LOSS, PROBE, inverse=False)  # the tracker diagnoses in eval mode too
    assert final.names() == ["net.0.weight", "net.0.bias", "net.3.weight", "net.3.bias"]
    for b in final:
        assert records[-1][f"D/{b.name}"] == b.coupled and records[-1][f"RQ/{b.name}"] == b.rayleigh
    assert records[-1]["loss"] == final.meta["loss"] and records[-1]["error"] is None


@needs_lightning
def test_records_through_the_trainers_logger(tmp_path):
    import csv

    from lightning.pytorch.loggers import CSVLogger

    from coupled_curvature.integrations.lightning import PREFIX, CurvatureCallback

    cb = CurvatureCallback(LOSS, PROBE, every=2)  # no log_dir: the logger only
    _fit([cb], logger=CSVLogger(str(tmp_path), name="csv"), steps=5)
    (metrics,) = list(tmp_path.glob("csv/*/metrics.csv"))
    with metrics.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get(f"{PREFIX}D/net.0.weight")]
    assert [int(r["step"]) for r in rows] == [0, 2, 4, 5]
    assert float(rows[-1][f"{PREFIX}D/net.3.weight"]) == cb.history[-1]["D/net.3.weight"]
    assert not list(tmp_path.rglob("curvature.jsonl"))


@needs_lightning
def test_training_is_bitwise_unchanged_by_the_callback(tmp_path):
    from coupled_curvature.integrations.lightning import CurvatureCallback

    plain = _fit()
    cb = CurvatureCallback(LOSS, PROBE, every=2, log_dir=str(tmp_path / "run"), inverse=True)
    tracked = _fit([cb])
    assert len(cb.history) == 5  # steps 0, 2, 4, 6 and the final 7: the callback did run
    a, b = plain.state_dict(), tracked.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # negative control: a callback that draws one random number per step changes the dropout masks
    # and the shuffling, and so the trained weights: the comparison above can fail
    from lightning.pytorch.callbacks import Callback

    class Draws(Callback):
        def on_train_batch_end(self, *args) -> None:
            torch.rand(1)

    c = _fit([Draws()]).state_dict()
    assert not all(torch.equal(a[k], c[k]) for k in a)


@needs_lightning
def test_bad_input_before_training(tmp_path):
    from coupled_curvature.integrations.lightning import CurvatureCallback

    with pytest.raises(InvalidInputError, match="every must be an int ≥ 1"):
        CurvatureCallback(LOSS, PROBE, every=-1)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidInputError, match="is a file"):
        CurvatureCallback(LOSS, PROBE, log_dir=str(tmp_path / "afile"))
    steps = []

    class Count(CurvatureCallback):
        def on_train_batch_start(self, *args) -> None:
            steps.append(1)

    bad_probe = (torch.randn(5, 7, dtype=torch.float64), torch.zeros(5, dtype=torch.long))  # 7 features, not 4
    with pytest.raises(InvalidInputError):
        _fit([Count(LOSS, bad_probe, every=1)])
    assert steps == []  # refused when fitting starts, before the first batch


def test_without_lightning_the_extra_is_named(monkeypatch):
    """The module imports without Lightning (its class documents itself); making one says what to install."""
    import coupled_curvature.integrations.lightning as installed

    for name in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks"):
        monkeypatch.setitem(sys.modules, name, None)  # import of these fails, as when not installed
    spec = importlib.util.spec_from_file_location("_ccurv_lightning_missing", installed.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(MissingExtraError, match=r"pip install 'coupled-curvature\[lightning\]'"):
        module.CurvatureCallback(LOSS, PROBE, every=10)
    with pytest.raises(InvalidInputError):  # options are still checked first
        module.CurvatureCallback(LOSS, PROBE, every=0)
