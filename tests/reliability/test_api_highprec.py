"""The arbitrary-precision path refuses bad labels, digits and losses before any work, with a fix."""

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.highprec import engine as highprec
from tests.reliability._common import assert_finite, assert_names_fix, assert_unchanged, batch, net, snapshot

CE = nn.CrossEntropyLoss()


def _refused(fn, model, *args, match=None, **kw):
    snap = snapshot(model)
    with pytest.raises(InvalidInputError, match=match) as excinfo:
        fn(model, *args, **kw)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)
    return str(excinfo.value)


@pytest.mark.parametrize("dps", [0, 14, -5, highprec.MAX_DPS + 1, 5000, 10**9, True, 50.5, "50", None])
def test_dps_outside_the_supported_range_is_refused_at_once(dps):
    X, y = batch()
    message = _refused(highprec.diagnose, net(), CE, (X, y), match="dps", dps=dps)
    assert str(highprec.MAX_DPS) in message


@pytest.mark.parametrize("dps", [0, 5000, True])
def test_invariance_error_has_the_same_dps_bound(dps):
    _refused(highprec.invariance_error, net(), CE, batch(), match="dps", layer=0, c="3/7", dps=dps)


@pytest.mark.parametrize(
    "labels, match",
    [(lambda y: y + 5, "outside 0..1"), (lambda y: y - 3, "outside 0..1"), (lambda y: y * 0 + 2, "outside 0..1"),
     (lambda y: y.double(), "y.long()"), (lambda y: y.int(), "y.long()")],
)
@pytest.mark.parametrize("where", [0, 1])
def test_highprec_labels_out_of_range_or_of_the_wrong_dtype_name_the_batch(labels, match, where):
    X, y = batch()
    data = [(X, y), (X, y)]
    data[where] = (X, labels(y))
    message = _refused(highprec.diagnose, net(), CE, data, match=match, dps=20)
    assert f"batch {where}" in message


def test_highprec_refuses_ignore_index_labels():
    X, y = batch()
    y = y.clone()
    y[0] = -100
    _refused(highprec.diagnose, net(), CE, (X, y), match="ignore_index", dps=20)


@settings(derandomize=True, max_examples=15)
@given(label=st.one_of(st.integers(-10**9, -1), st.integers(2, 10**9)))
def test_generated_highprec_labels_are_refused(label):
    X, y = batch()
    y = y.clone()
    y[3] = label
    _refused(highprec.diagnose, net(), CE, (X, y), dps=20)


@pytest.mark.parametrize("cls", [nn.CrossEntropyLoss, nn.MSELoss])
def test_highprec_refuses_a_loss_class(cls):
    _refused(highprec.diagnose, net(), cls, batch(), match="pass an instance", dps=20)


def test_highprec_refuses_non_finite_inputs():
    X, y = batch()
    _refused(highprec.diagnose, net(), CE, (X * float("inf"), y), match="non-finite", dps=20)


@pytest.mark.parametrize("dps", [15, 50, highprec.MAX_DPS])
def test_valid_highprec_calls_are_finite_at_the_bounds(dps):
    model = net()
    snap = snapshot(model)
    d = highprec.diagnose(model, CE, batch(), dps=dps)
    assert_finite(d)
    assert all(isinstance(b.coupled, mpmath.mpf) for b in d)
    assert_unchanged(model, snap)


@pytest.mark.parametrize(
    "c", ["__import__('os').system('touch PWNED') or 1", "exec('open(\"PWNED\", \"w\")')", "-3/7", "0", "x"]
)
def test_invariance_error_factor_strings_are_parsed_not_run(c, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused(highprec.invariance_error, net(), CE, batch(), match="c must be", layer=0, c=c, dps=20)
    assert list(tmp_path.iterdir()) == []
