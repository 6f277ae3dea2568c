"""Numeric cross-checks on small trained nets, against brute-force references."""

import pytest
import torch
from torch.func import functional_call, grad, hessian

from coupled_curvature.numeric.studies.invariance import euler_PQ
from coupled_curvature.proofs.crosschecks import Lab, crosscheck
from coupled_curvature.proofs.figure_data import neuron_scaling_changes
from coupled_curvature.theorems import THEOREMS


@pytest.fixture(scope="module")
def lab():
    return Lab(seed=0, heavy=False)


def test_euler_PQ_matches_bruteforce():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4, bias=False, dtype=torch.float64), torch.nn.ReLU(),
                              torch.nn.Linear(4, 3, bias=False, dtype=torch.float64))
    X, y = torch.randn(20, 3, dtype=torch.float64), torch.randint(0, 3, (20,))
    P, Q = euler_PQ(net, torch.nn.CrossEntropyLoss(), X, y)
    params = {k: v.detach() for k, v in net.named_parameters()}
    for name, w in params.items():
        def L(v):
            return torch.nn.functional.cross_entropy(functional_call(net, {**params, name: v}, (X,)), y)
        g = grad(L)(w).reshape(-1)
        H = hessian(L)(w).reshape(w.numel(), w.numel())
        wv = w.reshape(-1)
        assert abs(float(wv @ g) - P) <= 1e-10 * abs(P)
        assert abs(float(wv @ H @ wv) - Q) <= 1e-10 * abs(Q)


@pytest.mark.parametrize("tid", ["T9", "T11", "T12", "T5"])
def test_crosscheck_agrees(lab, tid):
    res = crosscheck(tid, lab)
    assert res.agrees, [r for r in res.rows if not r["agrees"]]
    assert res.rows and res.to_dict()["agrees"] is True


def test_t5_moves_and_untouched_blocks_do_not(lab):
    ch = neuron_scaling_changes(lab, draws=4)
    assert min(ch["0.weight"]) > 1e-3 and min(ch["2.weight"]) > 1e-3
    assert max(ch["4.weight"]) <= 1e-10  # the last layer is not touched by scaling layer 0


def test_no_crosscheck_for_pure_theorems(lab):
    assert crosscheck("T4", lab) is None
    for tid, th in THEOREMS.items():  # the registry says which theorems have none
        if th.crosscheck is None:
            assert crosscheck(tid, lab) is None
