"""CurvatureTracker (issue 25, item 1): records, sinks, resuming, isolation from the training loop, bad input."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric import CurvatureTracker, diagnose, layer_rescale, make_mlp, neuron_rescale
from coupled_curvature.numeric.tracking import records as R
from coupled_curvature.numeric.tracking import sinks as S

LOSS = nn.CrossEntropyLoss()


def _data(n: int = 48, d: int = 5, c: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randint(0, c, (n,), generator=g)


def _train(net, X, y, steps, tracker=None, *, dropout_draws=True):
    """SGD with momentum on minibatches drawn from every RNG stream, as a real loop would."""
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        idx = torch.randint(0, len(X), (16,))
        noise = np.random.rand() * 1e-3 + random.random() * 1e-3  # numpy and python streams drawn too
        opt.zero_grad()
        (LOSS(net(X[idx]), y[idx]) * (1 + noise)).backward()
        if tracker is not None:
            tracker.step(step)  # between backward and step: .grad must survive it
        opt.step()
    return opt


def test_records_hold_the_fields_and_equal_diagnose_on_the_model():
    X, y = _data()
    net = make_mlp(5, [8], 3)
    seen = []
    t = CurvatureTracker(net, LOSS, (X, y), every=3, measures=("RQ", "sqnorm_grad"), sinks=[seen.append])
    _train(net, X, y, 7, t)
    assert [r["step"] for r in t.history] == [0, 3, 6] and seen == t.history
    last = t.record(7)  # the final model, whatever `every` says
    d = diagnose(net, LOSS, (X, y), inverse=False, progress=False)
    blocks = ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert list(last) == [*R.BASE_FIELDS, *(f"{m}/{b}" for m in ("D", "RQ", "sqnorm_grad") for b in blocks)]
    for b in blocks:
        assert last[f"D/{b}"] == d[b].coupled and last[f"RQ/{b}"] == d[b].rayleigh
        assert last[f"sqnorm_grad/{b}"] == d[b].g_sq
    assert last["loss"] == d.meta["loss"] and last["error"] is None and last["seconds"] > 0
    assert "Dplus/0.weight" not in last  # D⁺ only when asked for


def test_inverse_adds_dplus_from_the_engine():
    X, y = _data()
    net = make_mlp(5, [8], 3)
    rec = CurvatureTracker(net, LOSS, (X, y), inverse=True).record(0)
    d = diagnose(net, LOSS, (X, y), inverse=True, progress=False)
    assert rec["Dplus/0.weight"] == d["0.weight"].inverse_coupled is not None


def test_training_is_bitwise_unchanged_by_the_tracker():
    X, y = _data(64)
    draws = []

    def hungry_loss(out, target):  # draws from every stream inside the computation: the tracker must undo it
        draws.append(torch.rand(1).item() + np.random.rand() + random.random())
        return LOSS(out, target)

    def run(track: bool):
        torch.manual_seed(3), np.random.seed(3), random.seed(3)
        net = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Dropout(0.3), nn.Linear(12, 3)).double().train()
        t = CurvatureTracker(net, hungry_loss, (X, y), every=2, inverse=True) if track else None
        opt = _train(net, X, y, 9, t)
        grads = [p.grad.clone() for p in net.parameters()]
        bufs = [opt.state[p]["momentum_buffer"].clone() for p in net.parameters()]
        rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
        return net, grads, bufs, rng, t

    a, ga, ba, ra, _ = run(False)
    b, gb, bb, rb, t = run(True)
    assert len(t.history) == 5 and all(r["error"] is None for r in t.history) and draws
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert all(torch.equal(p, q) for p, q in zip(ga, gb)) and all(torch.equal(p, q) for p, q in zip(ba, bb))
    assert torch.equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1]) and ra[2] == rb[2]
    assert b.training and b[2].training  # train mode as it was (Dropout on during training)


def test_the_rng_restore_is_what_keeps_training_unchanged(monkeypatch):
    """Negative control: without the restore, a loss that draws random numbers changes the training."""
    import contextlib

    from coupled_curvature.numeric.tracking import tracker as T

    X, y = _data(64)

    def hungry_loss(out, target):
        torch.rand(1)
        return LOSS(out, target)

    def final(track: bool):
        torch.manual_seed(3)
        net = make_mlp(5, [8], 3)
        _train(net, X, y, 6, CurvatureTracker(net, hungry_loss, (X, y), every=2) if track else None)
        return net[0].weight.detach().clone()

    monkeypatch.setattr(T, "isolated_rng", contextlib.nullcontext)
    assert not torch.equal(final(False), final(True))


def _watch_rng_writes(monkeypatch):
    """The names of the threads that set a process-wide random state (fork_rng restores through these)."""
    import threading

    writers: list[str] = []
    for mod, name in ((torch.random, "set_rng_state"), (torch, "set_rng_state"), (np.random, "set_state"),
                      (random, "setstate")):
        orig = getattr(mod, name)

        def spy(*a, _orig=orig, **k):
            writers.append(threading.current_thread().name)
            return _orig(*a, **k)

        monkeypatch.setattr(mod, name, spy)
    return writers


def test_background_records_equal_the_synchronous_ones_and_training_is_unchanged(monkeypatch):
    X, y = _data(64)

    def run(mode):
        torch.manual_seed(3), np.random.seed(3), random.seed(3)
        net = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Dropout(0.3), nn.Linear(12, 3)).double().train()
        t = None if mode is None else CurvatureTracker(net, LOSS, (X, y), every=2, measures=("RQ",),
                                                       background=mode)
        returned = []
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        for step in range(9):
            idx = torch.randint(0, len(X), (16,))
            opt.zero_grad()
            LOSS(net(X[idx]), y[idx]).backward()
            if t is not None:
                returned.append(t.step(step))
            opt.step()
        if t is not None:
            t.close()
        rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
        return [p.detach().clone() for p in net.parameters()], rng, t, returned

    plain, r0, _, _ = run(None)
    sync, r1, ts, _ = run(False)
    writers = _watch_rng_writes(monkeypatch)
    bg, r2, tb, returned = run(True)
    assert all(torch.equal(p, q) for p, q in zip(plain, bg)) and all(torch.equal(p, q) for p, q in zip(plain, sync))
    assert torch.equal(r0[0], r2[0]) and np.array_equal(r0[1], r2[1]) and r0[2] == r2[2]
    assert all(r is None for r in returned)  # background: records arrive later, in order
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("wall_time", "seconds")} for r in h]  # noqa: E731
    assert [r["step"] for r in tb.history] == [0, 2, 4, 6, 8] and strip(tb.history) == strip(ts.history)
    assert writers and not [w for w in writers if w.startswith("ccurv-tracker")]  # the worker never sets a stream


def test_a_worker_that_probes_the_inputs_would_set_the_random_stream(monkeypatch):
    """Negative control for the test above: the probing forward pass forks the random stream (its restore is a
    write from the worker thread, racing the training thread), which is why records plan with check_inputs=False."""
    from coupled_curvature.numeric.core import engine

    real_plan = engine.plan
    monkeypatch.setattr(engine, "plan", lambda *a, **k: real_plan(*a, **{**k, "check_inputs": True}))
    X, y = _data(32)
    net = make_mlp(5, [8], 3)
    writers = _watch_rng_writes(monkeypatch)
    with CurvatureTracker(net, LOSS, (X, y), every=1, background=True) as t:
        t.step(0)
    assert [w for w in writers if w.startswith("ccurv-tracker")]


def test_background_is_refused_where_the_worker_would_draw_random_numbers():
    X, y = _data(32)

    def hungry_loss(out, target):
        torch.rand(1)
        return LOSS(out, target)

    class Noisy(nn.Linear):
        def forward(self, x):
            return super().forward(x) + 1e-3 * torch.randn_like(x[:, :1])

    with pytest.raises(InvalidInputError, match="draws random numbers"):
        CurvatureTracker(make_mlp(5, [8], 3), hungry_loss, (X, y), background=True)
    with pytest.raises(InvalidInputError, match="draws random numbers"):
        CurvatureTracker(nn.Sequential(Noisy(5, 3)).double(), LOSS, (X, y), background=True)
    with pytest.raises(InvalidInputError, match="background must be True or False"):
        CurvatureTracker(make_mlp(5, [8], 3), LOSS, (X, y), background="yes")
    attn = nn.Sequential(nn.Unflatten(1, (1, 5)), nn.MultiheadAttention(5, 1, batch_first=True))
    with pytest.raises(InvalidInputError, match="attention"):
        CurvatureTracker(_FirstOutput(attn).double(), nn.MSELoss(), (X, torch.zeros(32, 1, 5, dtype=torch.float64)),
                         background=True)


class _FirstOutput(nn.Module):
    def __init__(self, inner: nn.Sequential):
        super().__init__()
        self.unflatten, self.attn = inner[0], inner[1]

    def forward(self, x):
        x = self.unflatten(x)
        return self.attn(x, x, x, need_weights=False)[0]


def test_rescaled_twin_keeps_D_and_moves_RQ_by_c_squared():
    X, y = _data()
    net = make_mlp(5, [10, 10], 3)
    c = 3.0  # not a power of two: the twin's weights are rounded, D agrees to float64 rounding
    t1 = CurvatureTracker(net, LOSS, (X, y), every=4, measures=("RQ",))
    t2 = CurvatureTracker(net, LOSS, (X, y), every=4, measures=("RQ",), transform=lambda m: layer_rescale(m, 1, c))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(13):
        opt.zero_grad(); LOSS(net(X), y).backward(); opt.step()
        t1.step(step), t2.step(step)
    assert len(t1.history) == len(t2.history) == 4
    for a, b in zip(t1.history, t2.history):
        for blk in t1.block_names:
            assert b[f"D/{blk}"] == pytest.approx(a[f"D/{blk}"], rel=1e-10, abs=0)
        assert b["RQ/2.weight"] / a["RQ/2.weight"] == pytest.approx(c ** -2, rel=1e-10)
        assert b["RQ/4.weight"] / a["RQ/4.weight"] == pytest.approx(c ** 2, rel=1e-10)
        assert b["RQ/0.weight"] == pytest.approx(a["RQ/0.weight"], rel=1e-10)


def test_non_uniform_neuron_rescaling_moves_D():
    """Negative control: a twin outside the conformal group (T5) does not keep D."""
    X, y = _data()
    net = make_mlp(5, [6], 3)
    scales = [0.25, 4.0, 1.0, 2.0, 0.5, 8.0]
    a = CurvatureTracker(net, LOSS, (X, y)).record(0)
    b = CurvatureTracker(net, LOSS, (X, y), transform=lambda m: neuron_rescale(m, 0, scales)).record(0)
    assert abs(b["D/0.weight"] / a["D/0.weight"] - 1) > 1e-2


def test_a_failed_computation_is_recorded_and_training_goes_on():
    X, y = _data()
    net = make_mlp(5, [8], 3)
    seen = []
    t = CurvatureTracker(net, LOSS, (X, y), sinks=[seen.append], every=1)
    with torch.no_grad():
        net[0].weight[0, 0] = float("nan")
    rec = t.step(0)
    assert rec["error"] and all(rec[f"D/{b}"] is None for b in t.block_names) and seen[-1]["error"] == rec["error"]
    strict = CurvatureTracker(make_mlp(5, [8], 3), LOSS, (X, y), strict=True)
    with torch.no_grad():
        strict.model[0].weight[0, 0] = float("nan")
    with pytest.raises(InvalidInputError, match="non-finite"):
        strict.step(0)


def test_jsonl_log_lines_are_whole_strict_json_and_resume(tmp_path):
    X, y = _data()
    net = make_mlp(5, [8], 3)
    with CurvatureTracker(net, LOSS, (X, y), every=2, log_dir=tmp_path) as t:
        _train(net, X, y, 5, t)
    text = (tmp_path / R.FILENAME).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    assert len(lines) == 1 + 3 and all(line.endswith("\n") for line in lines)
    assert "NaN" not in text and "Infinity" not in text
    assert [json.loads(line)["step"] for line in lines[1:]] == [0, 2, 4]
    # a restart from a checkpoint at step 2: the log is read back and continued, later records superseded
    t2 = CurvatureTracker(net, LOSS, (X, y), every=2, log_dir=tmp_path)
    assert t2.history == R.read_run(tmp_path)[1] and [r["step"] for r in t2.history] == [0, 2, 4]
    t2.step(2), t2.step(6)
    t2.close(), t2.close()  # idempotent
    assert [r["step"] for r in R.read_run(tmp_path)[1]] == [0, 2, 6] == [r["step"] for r in t2.history]
    with pytest.raises(InvalidInputError, match="closed"):
        t2.step(8)
    with pytest.raises(InvalidInputError, match="another run"):
        CurvatureTracker(net, LOSS, (X, y), log_dir=tmp_path, measures=("RQ",))


def test_a_torn_last_line_is_dropped_with_a_flag_by_the_reader_and_on_resume(tmp_path):
    X, y = _data()
    net = make_mlp(5, [8], 3)
    with CurvatureTracker(net, LOSS, (X, y), log_dir=tmp_path) as t:
        t.record(0)
    path = tmp_path / R.FILENAME
    whole = path.read_bytes()
    assert R.read_log(tmp_path).dropped_partial is False
    path.write_bytes(whole + b'{"step": 1, "wall_ti')
    log = R.read_log(tmp_path)
    assert log.dropped_partial and [r["step"] for r in log.records] == [0]
    assert R.read_run(tmp_path) == (log.head, log.records)
    path.write_bytes(whole.replace(b"\n", b"", 1))  # a torn line that is not the last one is damage
    with pytest.raises(InvalidInputError, match="line 1"):
        R.read_log(tmp_path)
    path.write_bytes(whole + b'{"step": 1, "wall_ti')
    t = CurvatureTracker(net, LOSS, (X, y), log_dir=tmp_path)
    assert t.notes and path.read_bytes() == whole
    t.close()


def test_a_failed_write_leaves_no_partial_line(tmp_path, monkeypatch):
    X, y = _data()
    net = make_mlp(5, [8], 3)
    t = CurvatureTracker(net, LOSS, (X, y), log_dir=tmp_path)
    t.record(0)
    before = (tmp_path / R.FILENAME).read_bytes()
    real = os.write

    def half_then_fail(fd, data):
        real(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(S.os, "write", half_then_fail)
    t.record(1)  # not strict: recorded as a sink error, the loop goes on
    monkeypatch.setattr(S.os, "write", real)
    assert (tmp_path / R.FILENAME).read_bytes() == before and "No space left" in t.sink_errors[0]
    t.close()


@pytest.mark.skipif(not S.tensorboard_available(), reason="tensorboard is not installed (pip install tensorboard)")
def test_tensorboard_sink_writes_the_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    X, y = _data()
    net = make_mlp(5, [8], 3)
    with CurvatureTracker(net, LOSS, (X, y), every=2, log_dir=tmp_path, sinks=("jsonl", "tensorboard")) as t:
        _train(net, X, y, 3, t)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    events = acc.Scalars("D/0.weight")
    assert [e.step for e in events] == [0, 2]
    assert [e.value for e in events] == pytest.approx([r["D/0.weight"] for r in t.history], rel=1e-6)


def test_to_dataframe_and_its_missing_extra(monkeypatch):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    net = make_mlp(5, [8], 3)
    t = CurvatureTracker(net, LOSS, (X, y), every=1)
    t.step(0), t.step(1)
    df = t.to_dataframe()
    assert list(df.index) == [0, 1] and df.loc[1, "D/0.bias"] == t.history[1]["D/0.bias"]
    assert df["error"].isna().all() and str(df["D/0.weight"].dtype) == "Float64"
    assert isinstance(df, pd.DataFrame)
    import importlib

    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: (_ for _ in ()).throw(ImportError(name)) if name == "pandas" else real(name, *a))
    with pytest.raises(MissingExtraError, match="pandas"):
        t.to_dataframe()


@pytest.mark.parametrize("kwargs, match", [
    ({"every": 0}, "every"), ({"every": -3}, "every"), ({"every": True}, "every"), ({"every": 2.0}, "every"),
    ({"measures": ("D", "sharpness")}, "unknown measure"), ({"measures": "D"}, "sequence"),
    ({"inverse": 1}, "inverse"), ({"sinks": ("jsonl",)}, "log_dir"), ({"sinks": ("csv",)}, "unknown sink"),
    ({"sinks": (3,)}, "callable"), ({"transform": 5}, "transform"), ({"blocks": "neurons"}, "blocks"),
])
def test_bad_arguments_are_refused_before_any_work(kwargs, match):
    X, y = _data()
    with pytest.raises(InvalidInputError, match=match):
        CurvatureTracker(make_mlp(5, [8], 3), LOSS, (X, y), **kwargs)


def test_bad_probe_model_and_log_dir_are_refused(tmp_path):
    X, y = _data()
    net = make_mlp(5, [8], 3)
    with pytest.raises(InvalidInputError):
        CurvatureTracker(net, LOSS, (X[:, :4], y))  # the model takes 5 features
    with pytest.raises(InvalidInputError):
        CurvatureTracker(net, LOSS, (X, y[:10]))
    with pytest.raises(InvalidInputError, match="Module"):
        CurvatureTracker("net", LOSS, (X, y))
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(InvalidInputError, match="is a file"):
        CurvatureTracker(net, LOSS, (X, y), log_dir=afile)
    with pytest.raises(InvalidInputError, match="cannot be written|is a file"):
        CurvatureTracker(net, LOSS, (X, y), log_dir=afile / "below")
    t = CurvatureTracker(net, LOSS, (X, y))
    for bad in (-1, 1.0, "3", None):
        with pytest.raises(InvalidInputError, match="step"):
            t.step(bad)


@settings(max_examples=40)
@given(st.integers(max_value=0))
def test_every_below_one_is_refused(every):
    with pytest.raises(InvalidInputError, match="every"):
        CurvatureTracker(nn.Linear(2, 2), nn.MSELoss(), (torch.zeros(1, 2), torch.zeros(1, 2)), every=every)


_HEAD = R.encode(R.header(["w"], ["D"], every=1, inverse=False))


@settings(max_examples=150)
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(['{"step": 0}', "NaN", "[1]", '{"schema": 1}',
                                                                '{"__import__": "os"}', "1e999"])),
                min_size=1, max_size=4))
def test_hostile_lines_are_refused_with_their_line_number(lines):
    text = [_HEAD] + [line.replace("\n", " ") + "\n" for line in lines]
    try:
        R.parse_lines(text, "log")
    except InvalidInputError as err:
        assert "log, line " in str(err)
    # whatever the text, nothing but InvalidInputError escapes: it is parsed, never evaluated


def test_a_valid_record_passes_and_each_damaged_field_is_named():
    good = {"step": 3, "wall_time": 1.0, "seconds": 0.5, "loss": 0.1, "error": None, "D/w": None}
    assert R.parse_lines([_HEAD, R.encode(good)], "log")[1] == [good]
    for key, bad in (("step", -1), ("step", True), ("loss", "0.1"), ("D/w", [1]), ("error", 3), ("wall_time", None)):
        with pytest.raises(InvalidInputError, match="log, line 2"):
            R.parse_lines([_HEAD, R.encode({**good, key: bad})], "log")
    with pytest.raises(InvalidInputError, match="line 2: not a JSON line"):
        R.parse_lines([_HEAD, '{"step": 3, "D/w": NaN}\n'], "log")


def test_tensorboard_sink_without_tensorboard_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "tensorboard_available", lambda: False)
    X, y = _data()
    with pytest.raises(MissingExtraError, match="pip install tensorboard"):
        CurvatureTracker(make_mlp(5, [8], 3), LOSS, (X, y), log_dir=tmp_path, sinks=("tensorboard",))


def test_exported_from_the_front_door():
    import coupled_curvature
    import coupled_curvature.numeric

    assert coupled_curvature.CurvatureTracker is CurvatureTracker is coupled_curvature.numeric.CurvatureTracker
    assert "CurvatureTracker" in coupled_curvature.__all__ and "CurvatureTracker" in coupled_curvature.numeric.__all__
