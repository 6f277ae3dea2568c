"""numeric/factors/rows.py and layers.py: the rows cotᵀJ_n of both providers against per-sample
``torch.func.jacrev`` Jacobians (independent: one sample at a time, no hooks, no unfolding)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.func import functional_call, jacrev

from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.layers import layer_rows
from coupled_curvature.numeric.factors.rows import block_rows

CE = nn.CrossEntropyLoss()


def _objective(model, X):
    y = torch.zeros(X.shape[0], dtype=torch.long)
    return Objective(model, CE, prepare_batches((X, y), CE))


def _reference_rows(model, X, members, cot):
    """``cot[n]ᵀ J_n`` with ``J_n`` by ``jacrev`` of sample ``n`` alone."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    out = []
    for n in range(X.shape[0]):
        def f(block):
            return functional_call(model, {**params, **block}, (X[n:n + 1],)).reshape(-1)

        jac = jacrev(f)({m: params[m] for m in members})
        J = torch.cat([jac[m].reshape(jac[m].shape[0], -1) for m in members], dim=1)
        out.append(cot[n] @ J)
    return torch.stack(out)


def _rows(model, X, part, cot, budget=2**24):
    chunks = list(block_rows(_objective(model, X), 0, part, list(part), cot, budget=budget))
    return {b: torch.cat([rows[b] for _, rows in chunks]) for b in part}, len(chunks)


class Twice(nn.Module):
    """One Linear applied twice (tied weights): the unfold provider must refuse it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        return self.out(torch.relu(self.lin(torch.relu(self.lin(x)))))


@settings(derandomize=True, max_examples=6, deadline=None)
@given(k=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 1), bias=st.booleans(),
       r=st.integers(1, 3), seed=st.integers(0, 100))
def test_fast_and_generic_rows_match_jacrev(k, stride, padding, bias, r, seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(2, 3, k, stride=stride, padding=padding, bias=bias), nn.ReLU(), nn.Flatten())
    width = model(torch.zeros(1, 2, 5, 5)).shape[1]
    model = nn.Sequential(*model, nn.Linear(width, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    X = torch.randn(5, 2, 5, 5, dtype=torch.float64)
    cot = torch.randn(5, r, 2, dtype=torch.float64)
    conv = ["0.weight", "0.bias"] if bias else ["0.weight"]
    part = {"conv": conv, "lin": ["3.weight", "3.bias"], "mixed": ["3.bias", "5.weight"]}
    assert set(layer_rows(_objective(model, X), 0, ["0", "3"], cot)) == {"0", "3"}
    fast, _ = _rows(model, X, {b: part[b] for b in ("conv", "lin")}, cot)  # layer blocks only: layer_rows
    generic, _ = _rows(model, X, part, cot)  # a two-layer block: torch.func for every block
    got = {**fast, "mixed": generic["mixed"]}
    for block in ("conv", "lin"):
        assert torch.allclose(fast[block], generic[block], rtol=1e-12, atol=1e-12 * float(fast[block].abs().max()))
    for block, members in part.items():
        ref = _reference_rows(model, X, members, cot)
        assert torch.allclose(got[block], ref, rtol=1e-12, atol=1e-12 * float(ref.abs().max())), block
    other = _reference_rows(model, X, part["conv"], torch.randn(5, r, 2, dtype=torch.float64))
    assert not torch.allclose(got["conv"], other)  # negative control: another cotangent gives other rows


def test_a_layer_that_runs_twice_takes_the_generic_route_and_is_right():
    torch.manual_seed(0)
    model = Twice().double()
    X, cot = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 2, 2, dtype=torch.float64)
    assert layer_rows(_objective(model, X), 0, ["lin", "out"], cot).keys() == {"out"}
    got, _ = _rows(model, X, {"lin": ["lin.weight", "lin.bias"]}, cot)
    ref = _reference_rows(model, X, ["lin.weight", "lin.bias"], cot)
    assert torch.allclose(got["lin"], ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("budget", [2**24, 8 * 2 * 30])
def test_sample_chunks_follow_the_budget_and_give_the_same_rows(budget):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)).double()
    X, cot = torch.randn(7, 4, dtype=torch.float64), torch.randn(7, 2, 3, dtype=torch.float64)
    part = {"0.weight": ["0.weight"], "2.bias": ["2.bias"]}  # 23 columns, 2 rows per sample
    got, chunks = _rows(model, X, part, cot, budget)
    assert chunks == (1 if budget == 2**24 else 7)  # 8·2·23 bytes per sample > 480: one sample at a time
    for block, members in part.items():
        assert torch.allclose(got[block], _reference_rows(model, X, members, cot), rtol=1e-12, atol=1e-14)
