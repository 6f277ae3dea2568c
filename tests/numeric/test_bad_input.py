"""Every bad input of diagnose() gets a clear outcome: an error that says what to do, or None + a note."""

import copy
import math

import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import CoupledCurvatureError, InvalidInputError, TrainModeError
from coupled_curvature.numeric.core.diagnostics import diagnose
from tests.numeric._nets import data, mlp, reference_block, rel

CE = nn.CrossEntropyLoss()


def test_zero_block_gives_none_with_note():
    model = mlp([3, 4, 2], seed=0)
    with torch.no_grad():
        model[0].bias.zero_()
    d = diagnose(model, CE, data(10, (3,), 2))
    b = d["0.bias"]
    assert b.w_sq == 0.0 and b.rayleigh is None and b.coupled is None and b.inverse_coupled is None
    assert any("w = 0" in n for n in b.notes)
    assert d["0.weight"].coupled is not None


def test_zero_gradient_gives_none_D_with_note():
    """A block whose gradient vanishes exactly: a dead ReLU layer (all pre-activations < 0)."""
    model = mlp([3, 4, 2], seed=0)
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.fill_(-1.0)
    d = diagnose(model, CE, data(10, (3,), 2))
    b = d["0.bias"]
    assert b.g_sq == 0.0 and b.coupled is None and any("g = 0" in n for n in b.notes)
    assert b.inverse_coupled == 0.0  # D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² is defined and 0 here
    for value in (x for blk in d for x in (blk.coupled, blk.inverse_coupled, blk.rayleigh)):
        assert value is None or math.isfinite(value)


def test_non_finite_parameter_is_named():
    model = mlp([3, 4, 2], seed=0)
    with torch.no_grad():
        model[2].weight[0, 0] = float("nan")
    with pytest.raises(InvalidInputError, match=r"'2\.weight'"):
        diagnose(model, CE, data(10, (3,), 2))


def test_non_finite_loss_is_an_error():
    model = mlp([3, 4, 2], seed=0)
    X, y = data(10, (3,), 2)
    with pytest.raises(InvalidInputError, match="non-finite"):
        diagnose(model, lambda out, t: CE(out, t) * float("inf"), (X, y))
    with pytest.raises(InvalidInputError, match="non-finite"):
        diagnose(model, CE, (X * float("nan"), y))


@pytest.mark.parametrize("module", [nn.BatchNorm1d(4), nn.Dropout(0.5)])
def test_train_mode_is_refused_unless_allowed(module):
    model = nn.Sequential(nn.Linear(3, 4, dtype=torch.float64), module.double(), nn.ReLU(), nn.Linear(4, 2, dtype=torch.float64))
    X, y = data(10, (3,), 2)
    with pytest.raises(TrainModeError, match=r"\.eval\(\)"):
        diagnose(model, CE, (X, y))
    model.eval()
    assert len(diagnose(model, CE, (X, y))) >= 4
    if isinstance(module, nn.BatchNorm1d):
        model.train()
        d = diagnose(model, CE, (X, y), allow_train_mode=True)
        assert d["0.weight"].coupled is not None


def test_float32_model_is_computed_in_float64_and_not_mutated():
    model32 = mlp([3, 5, 2], seed=1).float()
    snapshot = {n: p.detach().clone() for n, p in model32.named_parameters()}
    X, y = data(12, (3,), 2)
    X32 = X.float()
    X32_copy = X32.clone()
    d32 = diagnose(model32, CE, (X32, y))
    assert d32.meta["source_dtypes"] == ["torch.float32"]
    # the float32 weights and inputs promoted exactly, against the brute-force float64 reference
    ref_model = copy.deepcopy(model32).double()
    for b in d32:
        ref = reference_block(ref_model, CE, X32.double(), y, list(b.params))
        assert rel(b.coupled, ref["coupled"]) <= 1e-10
    for n, p in model32.named_parameters():
        assert p.dtype == torch.float32 and torch.equal(p, snapshot[n])
    assert torch.equal(X32, X32_copy) and X32.dtype == torch.float32


def test_user_model_is_never_mutated():
    model = mlp([3, 5, 2], seed=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads_before = [p.grad for p in model.parameters()]
    diagnose(model, CE, data(12, (3,), 2))
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]) and p.dtype == torch.float64
    assert grads_before == [p.grad for p in model.parameters()] == [None] * 4
    assert model.training  # mode untouched


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"blocks": "neuron"}, "'tensor', 'layer', 'head' or a mapping"),
        ({"blocks": {"a": ["0.weight"], "b": ["0.weight"]}}, "in two blocks"),
        ({"blocks": {"a": ["nope"]}}, "unknown parameter 'nope'"),
        ({"blocks": {"a": []}}, "lists no parameters"),
        ({"pinv_rtol": -1.0}, "pinv_rtol"),
        ({"max_dense": -3}, "max_dense"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        diagnose(mlp([3, 4, 2]), CE, data(8, (3,), 2), **kwargs)


@pytest.mark.parametrize(
    "bad_data, match",
    [
        ("text", "must be an"),
        ([], "no batches"),
        ([(torch.zeros(3, 3),)], "not an \\(inputs, targets\\) pair"),
        ((torch.zeros(3, 3, dtype=torch.float64), torch.zeros(4, dtype=torch.long)), "3 inputs but 4 targets"),
    ],
)
def test_bad_data(bad_data, match):
    with pytest.raises(InvalidInputError, match=match):
        diagnose(mlp([3, 4, 2]), CE, bad_data)


def test_bad_model_and_loss():
    X, y = data(8, (3,), 2)
    with pytest.raises(InvalidInputError, match="torch.nn.Module"):
        diagnose("model", CE, (X, y))
    with pytest.raises(InvalidInputError, match="scalar"):
        diagnose(mlp([3, 4, 2]), nn.CrossEntropyLoss(reduction="none"), (X, y))
    with pytest.raises(InvalidInputError, match="scalar tensor"):
        diagnose(mlp([3, 4, 2]), lambda o, t: o, (X, y))
    assert issubclass(InvalidInputError, CoupledCurvatureError) and issubclass(InvalidInputError, ValueError)


def test_a_mapping_input_nested_in_a_mapping_is_refused():
    """Regression (found by mypy): prepare_inputs recursed into a mapping's entries, so a nested mapping came
    back as a nested dict (not Inputs) and crashed later (n_samples reads ``.shape`` off it); an entry must
    be a tensor or array, and a mapping entry is refused naming it."""
    from coupled_curvature.numeric.core.inputs import prepare_inputs

    with pytest.raises(InvalidInputError, match=r"X \(entry 'a'\) must be a torch.Tensor or numpy array, got dict"):
        prepare_inputs({"a": {"b": torch.ones(2, 1)}}, "X")
    assert prepare_inputs({"a": torch.ones(2, 1)}, "X")["a"].dtype == torch.float64
