"""Arbitrary precision: agreement with float64, and invariance errors that fall like 10^-dps."""

import mpmath
import pytest
import torch
from torch import nn

from coupled_curvature.errors import UnsupportedModelError
from coupled_curvature.numeric import highprec
from coupled_curvature.numeric.diagnostics import diagnose
from coupled_curvature.numeric.symmetries import neuron_rescale
from tests.numeric._nets import data, mlp

CE = nn.CrossEntropyLoss()


@pytest.fixture(scope="module")
def small():
    return mlp([3, 4, 3, 2], seed=5), data(12, (3,), 2, seed=5)


def test_agrees_with_float64(small):
    model, (X, y) = small
    hp = highprec.diagnose(model, CE, (X, y), dps=30)
    fd = diagnose(model, CE, (X, y))
    for b in fd:
        h = hp[b.name]
        assert isinstance(h.coupled, mpmath.mpf)
        assert abs(h.coupled - b.coupled) / abs(h.coupled) < 1e-12
        assert abs(h.g_sq - b.g_sq) / h.g_sq < 1e-12
        assert abs(h.inverse_coupled - b.inverse_coupled) / abs(h.inverse_coupled) < 1e-6
        assert h.rank == b.rank


def test_mse_and_sum_reduction_agree_with_float64():
    model = mlp([3, 4, 2], seed=1)
    X, _ = data(10, (3,), 2, seed=1)
    Y = torch.randn(10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for loss in (nn.MSELoss(), nn.MSELoss(reduction="sum")):
        hp, fd = highprec.diagnose(model, loss, (X, Y), dps=20, inverse=False), diagnose(model, loss, (X, Y), inverse=False)
        for b in fd:
            assert abs(hp[b.name].coupled - b.coupled) / abs(b.coupled) < 1e-12


def test_invariance_error_falls_with_precision(small):
    model, (X, y) = small
    errs = {dps: highprec.invariance_error(model, CE, (X, y), layer=1, c="0.3", dps=dps) for dps in (20, 40)}
    for dps, e in errs.items():
        assert e["D"] < mpmath.mpf(10) ** (-(dps - 3))
        assert e["Dplus"] < mpmath.mpf(10) ** (-(dps - 8))
    assert errs[40]["D"] < errs[20]["D"] * mpmath.mpf(10) ** -15  # it falls with dps


def test_non_uniform_scaling_moves_D_at_high_precision(small):
    """Negative control: the error being tiny is not an artefact of the precision."""
    model, (X, y) = small
    a = highprec.diagnose(model, CE, (X, y), dps=30, inverse=False)
    b = highprec.diagnose(neuron_rescale(model, 0, [0.5, 1.0, 2.0, 4.0]), CE, (X, y), dps=30, inverse=False)
    assert abs(a["0.weight"].coupled - b["0.weight"].coupled) / abs(a["0.weight"].coupled) > 1e-3


def test_cholesky_route_equals_eigen_route(small, monkeypatch):
    model, (X, y) = small
    eig = highprec.diagnose(model, CE, (X, y), dps=30)
    monkeypatch.setattr(highprec, "_EIG_MAX", 0)
    chol = highprec.diagnose(model, CE, (X, y), dps=30)
    for b in eig:
        c = chol[b.name]
        assert "Cholesky" in c.notes[-1] and "eigsy" in b.notes[-1]
        assert abs(c.inverse_coupled - b.inverse_coupled) / abs(b.inverse_coupled) < mpmath.mpf(10) ** -20
        assert c.rank == b.rank


def test_unsupported_inputs():
    X, y = data(4, (3,), 2)
    with pytest.raises(UnsupportedModelError, match="Tanh"):
        highprec.diagnose(nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2)).double(), CE, (X, y))
    with pytest.raises(UnsupportedModelError, match="CrossEntropyLoss"):
        highprec.diagnose(mlp([3, 2]), nn.NLLLoss(), (X, y))
