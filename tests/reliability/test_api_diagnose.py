"""diagnose() turns every hostile model, loss, data or option into an error that names the fix."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute
from coupled_curvature.numeric.core.diagnostics import diagnose
from tests.reliability._common import assert_finite, assert_names_fix, assert_unchanged, batch, net, snapshot

CE = nn.CrossEntropyLoss()


def _refused(model, loss_fn, data, error=InvalidInputError, match=None, **kw):
    snap = snapshot(model)
    with pytest.raises(error, match=match) as excinfo:
        diagnose(model, loss_fn, data, **kw)
    assert_names_fix(excinfo)
    assert_unchanged(model, snap)
    return str(excinfo.value)


def test_valid_call_is_finite_and_leaves_the_model_alone():
    model = net()
    snap = snapshot(model)
    d = diagnose(model, CE, batch())
    assert_finite(d)
    assert_unchanged(model, snap)
    assert d.notes == () and d.frozen == () and d.skipped == () and d.meta["reduction_source"] == "loss_fn"
    assert all(b.noise_kept == 0 for b in d)


# --- tied weights: the tangent route falls back to Hessian-vector products -----------------------


def _tied():
    model = nn.Sequential(nn.Linear(3, 3, dtype=torch.float64), nn.ReLU(), nn.Linear(3, 3, dtype=torch.float64))
    model[2].weight = model[0].weight
    return model


@pytest.mark.parametrize("blocks", ["tensor", "layer"])
def test_tied_weights_on_the_tangent_route_fall_back_with_a_note(blocks):
    model = _tied()
    data = batch(classes=3)
    snap = snapshot(model)
    d = diagnose(model, CE, data, inverse=False, blocks=blocks)
    assert d.meta["wHw_route"] == "hvp" and any("shares (ties) parameters" in n for n in d.notes)
    full = diagnose(model, CE, data, blocks=blocks)
    for b in d:
        assert math.isclose(b.coupled, full[b.name].coupled, rel_tol=1e-12)
    assert_finite(d)
    assert_unchanged(model, snap)


# --- losses --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss_fn",
    [lambda o, t: torch.tensor(1.0, dtype=torch.float64), lambda o, t: (t.double() ** 2).mean(),
     lambda o, t: o.detach().sum(), lambda o, t: o.argmax(dim=1).double().mean()],
    ids=["constant", "targets-only", "detached", "argmax"],
)
def test_a_loss_that_ignores_the_outputs_is_refused(loss_fn):
    _refused(net(), loss_fn, batch(), match="does not depend on the model's outputs")


@pytest.mark.parametrize("cls", [nn.CrossEntropyLoss, nn.MSELoss, nn.NLLLoss, nn.L1Loss])
def test_a_loss_class_instead_of_an_instance_is_refused(cls):
    message = _refused(net(), cls, batch(), match="pass an instance")
    assert f"{cls.__name__}()" in message


@pytest.mark.parametrize("loss_fn", ["ce", None, 3])
def test_a_loss_that_is_not_callable_is_refused(loss_fn):
    _refused(net(), loss_fn, batch(), match="callable")


def test_a_loss_that_raises_on_the_targets_names_the_batch():
    def picky(o, t):
        raise ValueError("bad targets")

    message = _refused(net(), picky, [batch(), batch()], match="batch 0")
    assert "bad targets" in message


# --- labels and targets --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "labels, match",
    [(lambda y: y + 5, "outside 0..1"), (lambda y: y * 0 + 2, "outside 0..1"), (lambda y: y - 3, "outside 0..1"),
     (lambda y: y.double(), "y.long()"), (lambda y: y.float(), "y.long()"), (lambda y: y.int(), "y.long()"),
     (lambda y: y.short(), "y.long()"), (lambda y: y.bool(), "y.long()")],
)
@pytest.mark.parametrize("where", [0, 1])
def test_bad_labels_name_the_batch(labels, match, where):
    X, y = batch()
    data = [(X, y), (X, y)]
    data[where] = (X, labels(y))
    message = _refused(net(), CE, data, match=match)
    assert f"batch {where}" in message


def test_nll_labels_are_checked_and_ignore_index_is_allowed():
    model = nn.Sequential(net(), nn.LogSoftmax(dim=1))
    X, y = batch()
    _refused(model, nn.NLLLoss(), (X, y + 2), match="outside")
    y_ignored = y.clone()
    y_ignored[0] = -100
    assert_finite(diagnose(model, nn.NLLLoss(), (X, y_ignored)))


@settings(derandomize=True, max_examples=20)
@given(label=st.one_of(st.integers(-10**6, -1), st.integers(2, 10**6)), at=st.integers(0, 7))
def test_generated_out_of_range_labels_are_refused(label, at):
    X, y = batch()
    y = y.clone()
    y[at] = label
    _refused(net(), CE, (X, y), match=f"label {label}")


@pytest.mark.parametrize(
    "loss_fn, targets, match",
    [(nn.MSELoss(), torch.zeros(8, dtype=torch.float64), "broadcast"),
     (nn.MSELoss(), torch.zeros(8, 3, dtype=torch.float64), "outputs' shape"),
     (nn.L1Loss(), torch.zeros(8, 2, 1, dtype=torch.float64), r"y.reshape\(8, 2\)"),
     (nn.MSELoss(), torch.zeros(8, 2, dtype=torch.long), "float targets")],
)
def test_elementwise_targets_of_the_wrong_shape_or_dtype_are_refused(loss_fn, targets, match):
    _refused(net(), loss_fn, (batch()[0], targets), match=match)


# --- inputs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.uint8, torch.bool])
def test_integer_inputs_are_refused_with_the_float_fix(dtype):
    X, y = batch()
    _refused(net(), CE, (X.abs().round().to(dtype), y), match=r"X.double\(\)")


def test_integer_inputs_reach_a_model_that_takes_them():
    model = nn.Sequential(nn.Embedding(10, 3, dtype=torch.float64), nn.Flatten(), nn.Linear(6, 2, dtype=torch.float64))
    X = torch.randint(0, 10, (8, 2))
    assert_finite(diagnose(model, CE, (X, batch()[1])))


@pytest.mark.parametrize("features, where", [(5, 0), (5, 1), (2, 1)])
def test_mismatched_batch_shapes_name_the_batch(features, where):
    X, y = batch()
    data = [(X, y), (X, y)]
    data[where] = (torch.randn(8, features, dtype=torch.float64), y)
    message = _refused(net(), CE, data, match=f"batch {where}")
    assert "shape" in message


def test_non_finite_inputs_and_meta_tensors_are_refused():
    X, y = batch()
    _refused(net(), CE, (X * float("nan"), y), match="non-finite")
    _refused(net(), CE, (torch.empty(8, 3, device="meta"), y), match="meta device")


def test_a_meta_device_model_is_refused():
    model = nn.Sequential(nn.Linear(3, 4, device="meta"), nn.ReLU(), nn.Linear(4, 2, device="meta"))
    with pytest.raises(UnsupportedModelError, match="meta device") as excinfo:
        diagnose(model, CE, batch())
    assert_names_fix(excinfo)
    assert all(p.is_meta for p in model.parameters())


def test_the_probe_leaves_train_mode_batchnorm_statistics_alone():
    model = nn.Sequential(nn.Linear(3, 4, dtype=torch.float64), nn.BatchNorm1d(4, dtype=torch.float64), nn.ReLU(),
                          nn.Linear(4, 2, dtype=torch.float64))
    snap = snapshot(model)
    torch.manual_seed(0)
    d = diagnose(model, CE, batch(), allow_train_mode=True)
    assert_finite(d)
    assert_unchanged(model, snap)


# --- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [({"max_dense": True}, "max_dense"), ({"max_dense": False}, "max_dense"), ({"max_dense": 1.5}, "max_dense"),
     ({"max_dense": "10"}, "max_dense"), ({"pinv_rtol": True}, "pinv_rtol"), ({"pinv_rtol": float("nan")}, "pinv_rtol"),
     ({"pinv_rtol": -1e-3}, "pinv_rtol"), ({"pinv_rtol": 1.0}, "pinv_rtol"), ({"inverse": "no"}, "inverse"),
     ({"inverse": 1}, "inverse"), ({"frozen": "yes"}, "frozen"), ({"frozen": None}, "frozen"),
     ({"reduction": "none"}, "reduction"), ({"reduction": 1}, "reduction"), ({"allow_train_mode": "yes"}, "allow_train_mode"),
     ({"method": "fast"}, "method"), ({"krylov_max_iter": True}, "krylov_max_iter")],
)
def test_bad_options_are_refused(kwargs, match):
    _refused(net(), CE, batch(), match=match, **kwargs)


# --- frozen parameters ---------------------------------------------------------------------------


def _half_frozen():
    model = net((3, 4, 2))
    model[0].weight.requires_grad_(False)
    return model


def test_frozen_parameters_are_skipped_by_default_with_a_typed_record():
    model = _half_frozen()
    snap = snapshot(model)
    d = diagnose(model, CE, batch())
    assert d.frozen == ("0.weight",) and d.skipped == ("0.weight",)
    assert d.names() == ["0.bias", "2.weight", "2.bias"]
    assert any("frozen='include'" in n and "0.weight" in n for n in d.notes)
    assert d.to_dict()["skipped"] == ["0.weight"]
    assert_finite(d)
    assert_unchanged(model, snap)


NOT_ASKED = "D⁺ was not asked for (inverse=False): its fields are None; wᵀHw by the cheapest exact route"


def test_a_run_without_dplus_says_so_in_its_record():
    """Issue 23: diagnose(inverse=False) said method 'gram' and left D⁺ None with no word on why."""
    d = diagnose(net((3, 4, 2)), CE, batch(), inverse=False)
    assert d.meta["method"] is None and d.meta["dplus"] == "not asked for (inverse=False)"
    assert NOT_ASKED in d.notes
    for b in d:
        assert b.inverse_coupled is None and b.method == "none" and b.method_reason == "D⁺ not asked for (inverse=False)"
        assert b.wHw_route == "tangent" and b.wHw_reason.startswith("tangent:")
    full = diagnose(net((3, 4, 2)), CE, batch())
    assert full.meta["method"] == "gram" and all(b.method == "gram" and b.method_reason.startswith("Gram:") for b in full)


@pytest.mark.parametrize("inverse", [True, False])
def test_frozen_include_diagnoses_them_as_before(inverse):
    model = _half_frozen()
    d = diagnose(model, CE, batch(), frozen="include", inverse=inverse)
    ref = diagnose(net((3, 4, 2)), CE, batch(), inverse=inverse)
    assert d.frozen == ("0.weight",) and d.skipped == () and d.notes == ref.notes
    assert d.notes == (() if inverse else (NOT_ASKED,))
    for b in ref:
        assert math.isclose(d[b.name].coupled, b.coupled, rel_tol=1e-12)
    skipped = diagnose(model, CE, batch(), inverse=inverse)
    for b in skipped:
        assert math.isclose(b.coupled, ref[b.name].coupled, rel_tol=1e-12)


def test_all_frozen_or_a_block_naming_a_frozen_parameter_is_refused():
    model = net()
    for p in model.parameters():
        p.requires_grad_(False)
    _refused(model, CE, batch(), match="every parameter is frozen")
    _refused(_half_frozen(), CE, batch(), match="frozen='include'", blocks={"a": ["0.weight", "0.bias"]})


# --- reduction of plain-function losses ----------------------------------------------------------


def test_a_plain_mean_loss_is_assumed_mean_with_a_note_when_it_matters():
    X, y = batch()
    mean_fn = lambda o, t: nn.functional.cross_entropy(o, t)  # noqa: E731
    one = diagnose(net(), mean_fn, (X, y))
    assert one.notes == () and one.meta["reduction_source"] == "assumed"
    two = diagnose(net(), mean_fn, [(X[:5], y[:5]), (X[5:], y[5:])])
    assert any("reduction='sum'" in n for n in two.notes)
    assert math.isclose(two["0.weight"].coupled, one["0.weight"].coupled, rel_tol=1e-10)


def test_reduction_sum_is_taken_explicitly_and_must_agree_with_the_loss():
    X, y = batch()
    sum_fn = lambda o, t: nn.functional.cross_entropy(o, t, reduction="sum")  # noqa: E731
    data = [(X[:5], y[:5]), (X[5:], y[5:])]
    d = diagnose(net(), sum_fn, data, reduction="sum")
    ref = diagnose(net(), nn.CrossEntropyLoss(reduction="sum"), (X, y))
    assert d.meta["reduction"] == "sum" and d.meta["reduction_source"] == "argument" and d.notes == ()
    for b in ref:
        assert math.isclose(d[b.name].coupled, b.coupled, rel_tol=1e-10)
    _refused(net(), CE, data, match="drop reduction=", reduction="sum")


# --- a cutoff at rounding level ------------------------------------------------------------------


def test_pinv_rtol_zero_on_a_rank_deficient_block_is_flagged():
    model = net((3, 8, 2))
    X, y = batch(2)
    d = diagnose(model, CE, (X, y), pinv_rtol=0.0, method="dense")
    flagged = [b for b in d if b.noise_kept]
    assert flagged, "a rank-deficient block with pinv_rtol=0 keeps rounding-level eigenvalues"
    for b in flagged:
        assert any("rounding level" in n and "pinv_rtol ≥" in n for n in b.notes)
    assert all(b.noise_kept == 0 for b in diagnose(model, CE, (X, y)))


def test_the_tangent_route_switch_still_gives_the_same_D():
    model = net()
    a = diagnose(model, CE, batch(), inverse=False)
    b = diagnose(model, CE, batch(), inverse=False, routes={WHwRoute.HVP, *SpectralRoute})
    assert a.meta["wHw_route"] == "tangent" and b.meta["wHw_route"] == "hvp"
    for blk in a:
        assert math.isclose(blk.coupled, b[blk.name].coupled, rel_tol=1e-10)


def test_a_model_without_parameters_is_refused():
    _refused(nn.Sequential(nn.ReLU()), lambda o, t: (o**2).mean(), batch(), match="no parameters")
