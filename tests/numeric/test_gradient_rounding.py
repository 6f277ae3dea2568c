"""The rounding level of each block's gradient (``BlockDiagnosis.g_rounding = m·ε·‖Σ_n J_nᵀ|r_n|‖``) comes
from the tangent route's own batched pass when that route takes every block (numeric/factors/tangent_forms.py:
``|r|`` as one more cotangent row), and from one extra forward and backward pass otherwise
(``Objective.cotangent_magnitudes``). Both must give the same numbers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import coupled_curvature.numeric.core.execution as execution
from coupled_curvature.numeric import diagnose
from coupled_curvature.numeric.core.objective import Objective


def _count(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = Objective.cotangent_magnitudes
    monkeypatch.setattr(Objective, "cotangent_magnitudes", lambda self: calls.append(1) or real(self))
    return calls


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 7), nn.ReLU(), nn.Linear(7, 3)).double()


def _cnn():
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 4)).double()


CASES = {
    "mlp": (_mlp, lambda g: (torch.randn(24, 5, generator=g, dtype=torch.float64),
                             torch.randint(0, 3, (24,), generator=g)), nn.CrossEntropyLoss()),
    "cnn": (_cnn, lambda g: (torch.randn(10, 2, 6, 6, generator=g, dtype=torch.float64),
                             torch.randn(10, 4, generator=g, dtype=torch.float64)), nn.MSELoss(reduction="sum")),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("batch_size", [None, 4])
def test_the_tangent_routes_rounding_level_equals_the_extra_pass(monkeypatch, case, batch_size):
    make, data, loss_fn = CASES[case]
    X, y = data(torch.Generator().manual_seed(2))
    batches = (X, y) if batch_size is None else [(X[i:i + batch_size], y[i:i + batch_size])
                                                 for i in range(0, len(X), batch_size)]
    calls = _count(monkeypatch)
    shared = diagnose(make(), loss_fn, batches, inverse=False)
    assert calls == []  # the tangent route took every block: no extra pass ran
    monkeypatch.setattr(execution, "_covering", lambda tf, partition: None)
    extra = diagnose(make(), loss_fn, batches, inverse=False)
    assert calls == [1]
    for b in shared:
        name = b.name
        assert b.wHw_route == "tangent" and b.g_rounding is not None and b.g_rounding > 0.0
        assert b.g_rounding == pytest.approx(extra[name].g_rounding, rel=1e-12)
        assert b.g_rounding < 1e-3 * b.g_sq ** 0.5  # ordinary gradients sit far above their rounding level


def test_the_absolute_cotangents_matter():
    """Negative control: the bound uses |r|, not r. Summing J_nᵀr_n instead gives ‖g‖ itself (so every
    gradient would read as 'at rounding' once scaled by m·ε), and differs from the level found."""
    net = _mlp()
    X, y = CASES["mlp"][1](torch.Generator().manual_seed(2))
    d = diagnose(net, nn.CrossEntropyLoss(), (X, y), inverse=False)
    m = y.numel() * 3
    eps = torch.finfo(torch.float64).eps
    ratios = [d[n].g_rounding / (m * eps * d[n].g_sq ** 0.5) for n, _ in net.named_parameters()]
    assert max(ratios) > 1.5  # |J_nᵀ|r_n|| exceeds ‖Σ J_nᵀ r_n‖ where samples' terms cancel


def test_a_block_outside_the_tangent_route_takes_the_extra_pass(monkeypatch):
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()  # not affine in 0.weight
    X, y = torch.randn(12, 4, dtype=torch.float64), torch.randint(0, 3, (12,))
    calls = _count(monkeypatch)
    d = diagnose(net, nn.CrossEntropyLoss(), (X, y), inverse=False)
    assert calls == [1]
    assert d["0.weight"].wHw_route == "hvp" and d["0.weight"].g_rounding is not None
