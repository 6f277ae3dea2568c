"""The explorer's sweeps, predictions and BatchNorm eps -> 0 judgement, against independent checks.

The BatchNorm cells are judged on a net with a large eps (1e-8), where the direct 1e-9 test fails;
the eps law is fitted on eps ×1e4, ×1e3, ×1e2 and must predict the run's deviation out of sample.
Negative control: the trace truly moves under the BatchNorm scale (its block scales by c⁻², T1),
so its change does not fall with eps, and a (wrong) "invariant as eps -> 0" prediction fails.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.studies import explorer as E
from coupled_curvature.numeric.studies.explorer_eps import judge_bn_as_eps_vanishes
from coupled_curvature.numeric.studies.explorer_predictions import MIN_ORDER, eps_limit
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, weight_layers

X = torch.randn(24, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
Y = torch.randint(0, 3, (24,), generator=torch.Generator().manual_seed(3))


def _bn(eps: float) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, eps=eps), nn.ReLU(),
                         nn.Linear(4, 3)).double().train()


def _relu(width: int = 6) -> nn.Sequential:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 3)).double()


@pytest.fixture(scope="module")
def bn_matrix():
    target = (_bn(1e-8), nn.CrossEntropyLoss(), (X, Y), True)
    mx = E.invariance_matrix({"bn": target}, ["fisher_rao", "norm_flat", "trace"], ["bn"], quick=True,
                             layer=lambda m: 0)
    direct = {c.measure: (c.deviation, c.agrees) for c in mx.cells}
    wrong = mx.cell("trace", "bn")  # negative control: pretend the moving trace were predicted invariant
    wrong.predicted, wrong.agrees, wrong.tolerance = E.I, False, 1e-9
    ev = judge_bn_as_eps_vanishes(mx, target, layer=0, quick=True)
    return mx, direct, ev


def test_bn_cells_fail_directly_and_vanish_as_eps_to_zero(bn_matrix):
    mx, direct, ev = bn_matrix
    for m in ("fisher_rao", "norm_flat"):
        dev, ok = direct[m]
        assert dev > 1e-9 and not ok  # at eps = 1e-8 the direct 1e-9 test fails
        c = mx.cell(m, "bn")
        lim = c.eps_limit
        assert c.agrees and lim.agrees and c.predicted == E.I
        assert lim.eps == pytest.approx([1e-4, 1e-5, 1e-6, 1e-8], rel=1e-12)
        assert 0.9 <= lim.order <= 1.1  # deviation ∝ eps: BN(cz) − BN(z) = O(eps)
        assert lim.measured == dev and abs(math.log10(lim.predicted / dev)) < 0.3  # out of sample
        assert all(a > b for a, b in zip(lim.deviations, lim.deviations[1:]))
        assert "vanishes with eps" in c.note
    # the symmetry's own defect falls at the same order (function gap of bn_rescale)
    assert 0.9 <= mx.cell("fisher_rao", "bn").eps_limit.gap_order <= 1.1
    assert set(ev.deviations) == {"fisher_rao", "norm_flat", "trace"} and mx.eps_sweep is ev


def test_bn_negative_control_the_trace_moves_at_every_eps(bn_matrix):
    mx, direct, _ = bn_matrix
    dev, ok = direct["trace"]
    assert ok and dev >= 1e-3  # its real prediction, "moves", holds
    lim = mx.cell("trace", "bn").eps_limit
    assert not lim.agrees and not mx.cell("trace", "bn").agrees  # "invariant as eps -> 0" is refuted
    assert lim.order < MIN_ORDER and min(d for d in lim.deviations) >= 1e-3
    assert "not explained by eps" in mx.cell("trace", "bn").note


def test_eps_limit_needs_the_out_of_sample_prediction():
    eps = [1e-6, 1e-8, 1e-10, 1e-12]
    law = [2e-3, 2e-5, 2e-7, 2e-9]
    assert eps_limit(eps, law, [0.0] * 4, tolerance=1e-9).agrees
    off = law[:-1] + [2e-7]  # the run's deviation is 100× what the eps law predicts
    assert not eps_limit(eps, off, [0.0] * 4, tolerance=1e-9).agrees
    slow = [2e-3, 2e-4, 2e-5, 2e-6]  # order 0.5: does not fall fast enough to be the eps effect
    assert not eps_limit(eps, slow, [0.0] * 4, tolerance=1e-9).agrees
    with pytest.raises(InvalidInputError, match="at least three"):
        eps_limit(eps[:2], law[:2], [0.0] * 2, tolerance=1e-9)


def test_sweep_x_values_are_the_symmetry_parameters():
    net = _relu(6)
    perm = E.sweep("perm", net, nn.CrossEntropyLoss(), X, layer=1)
    assert [p.x for p in perm] == [1.0, 3.0]
    for p in perm:  # independent count: rows of the acted-on layer that moved, and ‖P − I‖_F
        W0, W1 = weight_layers(net)[1].weight, weight_layers(p.result.model)[1].weight
        moved = int((W0 != W1).any(dim=1).sum())
        assert moved == 2 * p.x
        P = torch.stack([(W1[i] == W0).all(dim=1) for i in range(6)]).double()
        assert math.isclose(float(torch.linalg.norm(P - torch.eye(6))), 2 * math.sqrt(p.x))
        assert p.result.function_gap < 1e-12
    nonlinear = E.sweep("nonlinear", net, nn.CrossEntropyLoss(), X, layer=1)
    assert [p.x for p in nonlinear] == [0.05, 1.0]
    for p in nonlinear:
        mod = p.result.model[0].parametrizations.weight[0]
        assert mod.scale == p.x and function_gap(net, p.result.model, X) < 1e-12
    assert [p.x for p in E.sweep("layer", net, nn.CrossEntropyLoss(), X, layer=1)] == [2.0**-4, 2.0**-2, 4.0, 16.0]


def test_cells_carry_curves_and_witnesses():
    target = (_relu(4), nn.CrossEntropyLoss(), (X, Y), False)
    mx = E.invariance_matrix({"*": target}, ["D", "rho", "top_eig"], ["neuron", "perm"])
    for c in mx.cells:
        assert [x for x, _ in c.points] == [x for x, _ in mx.values[c.symmetry]["D"][1:]]
        assert max(d for _, d in c.points) == c.deviation
        assert f"seed {0}" in c.witness and "block" in c.witness
    d = mx.cell("D", "neuron")
    assert d.agrees and d.deviation >= 1e-3 and "neuron_rescale" in d.witness
    assert mx.parameters["perm"].startswith("swapped unit pairs k")
    assert mx.cell("D", "neuron").to_dict()["points"] == [list(p) for p in d.points]
