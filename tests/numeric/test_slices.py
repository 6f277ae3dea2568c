"""Blocks of sub-tensors through the one engine: D and D⁺ of a sliced block equal those of the dense full
Hessian's principal submatrix (MLP and attention), a full slice is the tensor block, bad slices are refused
before any work."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.hvp import math_attention
from coupled_curvature.numeric.core.profile import spectral_profile
from tests.numeric._nets import data, mlp, reference_block, rel
from tests.numeric.test_diagnose_reference import dplus_tol

CE = nn.CrossEntropyLoss()
F64 = torch.float64


def sliced_reference(model, loss_fn, X, y, members):
    """The reference of a block of members (names or ``(name, index)``): the dense Hessian of the whole
    tensors involved, restricted to the selected entries (in member order)."""
    shapes = dict((n, p.shape) for n, p in model.named_parameters())
    params = list(dict.fromkeys(m if isinstance(m, str) else m[0] for m in members))
    offset = dict(zip(params, [0] + list(torch.tensor([shapes[p].numel() for p in params]).cumsum(0)[:-1].tolist())))
    pos = []
    for m in members:
        name, index = (m, ()) if isinstance(m, str) else m
        sel = torch.arange(shapes[name].numel()).reshape(shapes[name])[index].reshape(-1)
        pos += (sel + offset[name]).tolist()
    with math_attention():  # torch.func.hessian: the fused attention kernels have no forward derivative
        return reference_block(model, loss_fn, X, y, params, positions=pos)


def _check(model, loss_fn, X, y, blocks, tol=1e-9):
    d = diagnose(model, loss_fn, (X, y), blocks=blocks)
    for name, members in blocks.items():
        b, ref = d[name], sliced_reference(model, loss_fn, X, y, members)
        for f in ("wHw", "g_sq", "coupled"):
            assert rel(getattr(b, f), ref[f]) <= tol, (name, f, getattr(b, f), ref[f])
        assert rel(b.inverse_coupled, ref["inverse_coupled"]) <= dplus_tol(b, tol), (name, b.inverse_coupled, ref)
    return d


@settings(max_examples=6)
@given(cut=st.integers(1, 4), col=st.integers(1, 3), act=st.sampled_from(["relu", "tanh"]), seed=st.integers(0, 99))
def test_mlp_slices_match_principal_submatrix(cut, col, act, seed):
    model = mlp([4, 5, 3], act=act, seed=seed)
    X, y = data(20, (4,), 3, seed=seed + 1)
    blocks = {"rows": [("0.weight", (slice(0, cut), slice(None))), ("0.bias", slice(0, cut))],
              "rest": [("0.weight", slice(cut, 5))],
              "cols": [("2.weight", (slice(None), slice(0, col)))],
              "b2": ["2.bias"]}  # a whole tensor beside a sliced weight: the module routes read the full weight
    d = _check(model, CE, X, y, blocks)
    if act == "relu":  # the Gram route takes a slice (its check runs on the block); the tangent route does not
        assert d["b2"].wHw_route.value == "tangent" and d["rows"].wHw_route.value != "tangent"


def test_gram_route_takes_a_checked_slice():
    """On a ReLU net the Gram route takes a sliced block (its affinity check runs on the block) and is exact."""
    model = mlp([4, 5, 3], act="relu", seed=1)
    X, y = data(20, (4,), 3)
    d = _check(model, CE, X, y, {"rows": [("0.weight", slice(0, 2)), ("0.bias", slice(0, 2))]})
    assert d["rows"].method.value == "gram" and "piecewise affine" in d["rows"].method_reason


def test_reference_would_catch_a_wrong_slice():
    """Negative control: the engine's value of one slice is not the reference of a neighbouring slice."""
    model = mlp([4, 5, 3], act="tanh", seed=3)
    X, y = data(20, (4,), 3)
    d = diagnose(model, CE, (X, y), blocks={"a": [("0.weight", slice(0, 2))]})
    other = sliced_reference(model, CE, X, y, [("0.weight", slice(1, 3))])
    assert rel(d["a"].coupled, other["coupled"]) > 1e-3


class Attn(nn.Module):
    """``nn.MultiheadAttention`` (E = 4, 2 heads) -> mean over the sequence -> Linear."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True, dtype=F64)
        self.head = nn.Linear(4, 3, dtype=F64)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(0.5 * torch.randn(p.shape, dtype=F64))

    def forward(self, x):
        return self.head(self.attn(x, x, x, need_weights=False)[0].mean(1))


def test_attention_head_slices_match_principal_submatrix():
    model = Attn().eval()
    X, y = data(6, (5, 4), 3, seed=2)
    blocks = {"q1": [("attn.in_proj_weight", slice(2, 4)), ("attn.in_proj_bias", slice(2, 4))],
              "k0": [("attn.in_proj_weight", slice(4, 6)), ("attn.in_proj_bias", slice(4, 6))],
              "o1": [("attn.out_proj.weight", (slice(None), slice(2, 4)))]}
    d = _check(model, CE, X, y, blocks)
    assert d["q1"].params == ("attn.in_proj_weight[2:4]", "attn.in_proj_bias[2:4]")
    assert d["q1"].method.value == "dense"  # softmax: the Gram route refuses, the dense block is exact


@pytest.mark.parametrize("method", ["gram", "dense", "krylov"])
def test_full_slice_is_the_tensor_block(method):
    model = mlp([4, 5, 3], act="tanh", seed=1)
    X, y = data(20, (4,), 3)
    whole = diagnose(model, CE, (X, y), blocks={"w": ["0.weight"]}, method=method)["w"]
    full = diagnose(model, CE, (X, y), blocks={"w": [("0.weight", (slice(None), slice(None)))]}, method=method)["w"]
    assert full.params == ("0.weight",)
    assert (full.coupled, full.inverse_coupled) == (whole.coupled, whole.inverse_coupled)
    # the same tensor as two pieces: a genuine slice route, to the same numbers within rounding
    split = {"w": [("0.weight", slice(0, 2)), ("0.weight", slice(2, 5))]}
    two = diagnose(model, CE, (X, y), blocks=split, method=method)["w"]
    assert rel(two.coupled, whole.coupled) <= 1e-11
    assert rel(two.inverse_coupled, whole.inverse_coupled) <= max(dplus_tol(whole, 1e-9), 1e-6 if method == "krylov" else 0)


def test_model_and_names_untouched_and_profile_takes_slices():
    model = mlp([4, 5, 3], seed=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    X, y = data(20, (4,), 3)
    prof = spectral_profile(model, CE, (X, y), blocks={"a": [("0.weight", 0)]})
    assert [(b.name, b.params) for b in prof] == [("a", ("0.weight[0]",))]
    assert [n for n, _ in model.named_parameters()] == list(before)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


@pytest.mark.parametrize("blocks, words", [
    ({"a": [("nope.weight", 0)]}, "unknown parameter 'nope.weight'"),
    ({"a": [("0.weight", 5)]}, "runs past dimension 0 of size 5"),
    ({"a": [("0.weight", (slice(0, 9),))]}, "runs past dimension 0"),
    ({"a": [("0.weight", (0, 1, 2))]}, "has 3 entries but the tensor has 2"),
    ({"a": [("0.weight", slice(2, 2))]}, "selects no entry"),
    ({"a": [("0.weight", slice(0, 3))], "b": [("0.weight", (2, slice(None)))]}, "entry (2, 0) of '0.weight' is in two"),
    ({"a": ["0.weight"], "b": [("0.weight", 1)]}, "is in two blocks ('a' and 'b')"),
    ({"a": [("0.weight", "rows")]}, "a member is a parameter name or (parameter name, index)"),
    ({"a": [("0.weight", (1.5,))]}, "an index is a tuple of ints and slices"),
    ({"a": [("0.weight", slice(0, 4, -1))]}, "positive step"),
])
def test_bad_slices_are_refused_before_work(blocks, words, monkeypatch):
    from coupled_curvature.numeric.core import objective

    model = mlp([4, 5, 3], seed=2)
    X, y = data(8, (4,), 3)
    monkeypatch.setattr(objective.Objective, "graphs", lambda self: pytest.fail("work started"))
    with pytest.raises(InvalidInputError) as e:
        diagnose(model, CE, (X, y), blocks=blocks)
    assert words in str(e.value)


def test_routes_that_take_whole_tensors_refuse_slices():
    with pytest.raises(InvalidInputError, match="sub-tensor blocks are taken by the curvature engine"):
        resolve_blocks(["w"], {"a": [("w", 0)]})
    with pytest.raises(InvalidInputError, match="blocks='head'"):
        resolve_blocks(["w"], "head")
    with pytest.raises(InvalidInputError, match="'tensor', 'layer', 'head'"):
        diagnose(mlp([2, 2], seed=0), CE, data(4, (2,), 2), blocks="heads")
