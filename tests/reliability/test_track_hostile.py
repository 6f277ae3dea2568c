"""Hostile inputs for ``ccurv track`` and the tracker: no command writes over what it reads, a page
replaces only a page, a torn last line is dropped with a note, and the tracker neither fires the
user's hooks nor appends a different architecture to an old log."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric import CurvatureTracker, make_mlp
from coupled_curvature.numeric.tracking import records as R

from tests.reliability._common import assert_names_fix, batch
from tests.reliability._harness import cli_error, tree_hash

LOSS = nn.CrossEntropyLoss()
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    X, y = batch(16, 4, 3)
    with CurvatureTracker(make_mlp(4, [6], 3), LOSS, (X, y), every=1, log_dir=d) as t:
        for s in range(4):
            t.step(s)
    return d


def _copy(src, tmp_path, name="copy"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("twin", [False, True])
@pytest.mark.parametrize("spell", ["plain", "relative", "dotted", "symlink"])
def test_out_never_names_a_log_the_command_reads(run_dir, tmp_path, capsys, monkeypatch, twin, spell):
    run, other = _copy(run_dir, tmp_path, "a"), _copy(run_dir, tmp_path, "b")
    target = (other if twin else run) / R.FILENAME
    out = {"plain": str(target), "dotted": str(target.parent / "." / R.FILENAME)}.get(spell)
    if spell == "relative":
        monkeypatch.chdir(target.parent)
        out = R.FILENAME
    elif spell == "symlink":
        os.symlink(target, tmp_path / "link.html")
        out = str(tmp_path / "link.html")
    before = tree_hash(tmp_path)
    err = cli_error(capsys, ["track", str(run), *([str(other)] if twin else []), "--out", out])
    assert "a file this command reads" in err and "choose another --out" in err
    assert tree_hash(tmp_path) == before


@SETTINGS
@given(content=st.binary(max_size=300))
def test_an_existing_file_that_is_not_a_track_page_is_kept_unless_force(run_dir, tmp_path_factory, content):
    from coupled_curvature.cli import main

    tmp = tmp_path_factory.mktemp("page")
    page = tmp / "page.html"
    page.write_bytes(content)
    assert main(["track", str(run_dir), "--out", str(page)]) == 2
    assert page.read_bytes() == content  # refused, untouched
    assert main(["track", str(run_dir), "--out", str(page), "--force"]) == 0
    written = page.read_bytes()
    assert b"<meta name='generator' content='ccurv track'>" in written[:4096]
    assert main(["track", str(run_dir), "--out", str(page)]) == 0  # its own page: replaced without --force


@SETTINGS
@given(cut=st.integers(min_value=1, max_value=10_000))
def test_a_torn_last_line_is_dropped_with_a_note(run_dir, tmp_path_factory, cut):
    from coupled_curvature.cli import main

    tmp = tmp_path_factory.mktemp("torn")
    run = _copy(run_dir, tmp)
    path = run / R.FILENAME
    whole = path.read_bytes()
    lines = whole.splitlines(keepends=True)
    last = lines[-1]
    torn = whole[:len(whole) - len(last)] + last[:cut % (len(last) - 1) + 1].rstrip(b"\n")
    path.write_bytes(torn)
    log = R.read_log(run)
    assert log.dropped_partial and len(log.records) == len(lines) - 2  # header and torn line left out
    page = tmp / "p.html"
    import io
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["track", str(run), "--out", str(page)]) == 0
    assert "ends in an incomplete line" in out.getvalue()
    assert path.read_bytes() == torn  # the reader never writes the log


def test_an_output_without_a_tensor_to_select_gets_our_error_naming_its_structure():
    class TwoOutputs(nn.Module):  # a mapping without "logits": the calling rule has no tensor to give the loss
        def __init__(self):
            super().__init__()
            self.net = make_mlp(4, [6], 3)

        def forward(self, x):
            return {"scores": self.net(x), "inputs": x}

    X, y = batch(16, 4, 3)
    with pytest.raises(InvalidInputError, match=r"returns a dict with keys 'scores', 'inputs'") as exc:
        CurvatureTracker(TwoOutputs(), LOSS, (X, y), every=1)
    assert_names_fix(exc)
    t = CurvatureTracker(TwoOutputs(), LOSS, (X, y), every=1, output="scores")  # the fix the message names
    assert t.block_names == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]


def test_user_hooks_never_fire_on_the_trackers_computations(tmp_path):
    X, y = batch(16, 4, 3)
    net = make_mlp(4, [6], 3)
    calls: list[str] = []
    net[0].register_forward_hook(lambda m, i, o: calls.append("fwd"))
    net[0].register_forward_pre_hook(lambda m, i: calls.append("pre"))
    net[2].register_full_backward_hook(lambda m, gi, go: calls.append("bwd"))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for background in (False, True):
        with CurvatureTracker(net, LOSS, (X, y), every=1, background=background) as t:
            assert calls == [] and any("hooks of 0, 2" in n for n in t.notes)
            for s in range(3):
                opt.zero_grad()
                LOSS(net(X), y).backward()  # the user's own step: the hooks fire here
                opt.step()
                t.step(s)
        assert calls == ["pre", "fwd", "bwd"] * 3, calls  # exactly the training passes
        calls.clear()
    net[0].register_forward_hook(lambda m, i, o: calls.append("after"))
    net(X)
    assert calls == ["pre", "fwd", "after"]  # every hook table is back, in order


@pytest.mark.parametrize("widths", [[7], [2], [6]])
def test_a_resumed_log_of_another_architecture_is_refused(run_dir, tmp_path, widths):
    run = _copy(run_dir, tmp_path)
    before = tree_hash(run)
    X, y = batch(16, 4, 3)
    torch.manual_seed(5)
    net = make_mlp(4, widths, 3)  # the same block names as the logged 4-6-3 net
    if widths == [6]:  # negative control: the same architecture (other weights) resumes the log
        CurvatureTracker(net, LOSS, (X, y), every=1, log_dir=run).close()
        assert tree_hash(run) == before
        return
    with pytest.raises(InvalidInputError, match="another architecture: block '0.weight'") as exc:
        CurvatureTracker(net, LOSS, (X, y), every=1, log_dir=run)
    assert "choose a new log_dir" in str(exc.value)
    assert tree_hash(run) == before


HOSTILE = st.sampled_from([None, -1, 0, 1.5, float("nan"), float("inf"), "10", True, [], (), object(), "D", ("D", "Hmax")])
OPTIONS = ("every", "measures", "inverse", "strict", "transform", "blocks")


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(option=st.sampled_from(OPTIONS), value=HOSTILE)
def test_the_tracker_and_both_callbacks_agree_on_hostile_options(option, value):
    """One hostile option value: the tracker and the Lightning and Hugging Face callbacks all accept it or
    all refuse it with our error (never a raw exception), and the model is untouched."""
    from tests.reliability._common import assert_unchanged, snapshot

    X, y = batch(8, 4, 3)
    net = make_mlp(4, [5], 3)
    snap = snapshot(net)
    makers = {"tracker": lambda **kw: CurvatureTracker(net, LOSS, (X, y), **kw)}
    try:
        from coupled_curvature.integrations.lightning import CurvatureCallback as LightningCallback

        makers["lightning"] = lambda **kw: LightningCallback(LOSS, (X, y), **kw)
    except ImportError:  # pragma: no cover - the extra is in the test extras
        pass
    try:
        import transformers  # noqa: F401

        from coupled_curvature.integrations.huggingface import CurvatureCallback as HFCallback

        makers["huggingface"] = lambda **kw: HFCallback(LOSS, (X, y), **kw)
    except ImportError:  # pragma: no cover
        pass
    outcome = {}
    for name, make in makers.items():
        try:
            made = make(**{option: value})
        except InvalidInputError as err:
            outcome[name] = "refused"
            assert str(err) and "Traceback" not in str(err)
        else:
            outcome[name] = "accepted"
            if hasattr(made, "close"):
                made.close()
    if option != "blocks" and option != "transform":  # checked when training starts by the callbacks
        assert len(set(outcome.values())) == 1, outcome
    assert_unchanged(net, snap)
