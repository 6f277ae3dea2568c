"""diagnose() against a brute-force dense float64 Hessian of each block (torch.func.hessian)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.linalg.pinv import conditioned_rtol
from tests.numeric._nets import cnn, data, mlp, reference_block, rel

CE = torch.nn.CrossEntropyLoss()
EPS = float(torch.finfo(torch.float64).eps)
FIELDS = ("wHw", "g_sq", "coupled", "inverse_coupled")


def dplus_tol(block, tol=1e-10):
    """D⁺ is limited by the conditioning of the kept spectrum: two float64 eigensolvers may
    differ by ~ε/(smallest kept |λ| / max |λ|). Below that scale the 1e-10 target applies."""
    return conditioned_rtol(tol, 1.0 / block.min_kept_rel_eig if block.min_kept_rel_eig else 1.0)


def _compare(model, X, y, blocks="tensor", tol=1e-10):
    d = diagnose(model, CE, (X, y), blocks=blocks)
    for b in d:
        ref = reference_block(model, CE, X, y, list(b.params))
        for f in FIELDS:
            t = dplus_tol(b, tol) if f == "inverse_coupled" else tol
            assert rel(getattr(b, f), ref[f]) <= t, (b.name, f, getattr(b, f), ref[f])
    return d


@settings(max_examples=12)
@given(
    widths=st.lists(st.integers(2, 6), min_size=1, max_size=3),
    bias=st.booleans(),
    act=st.sampled_from(["relu", "leaky"]),
    seed=st.integers(0, 1000),
)
def test_mlp_blocks_match_dense_reference(widths, bias, act, seed):
    model = mlp([4, *widths, 3], bias=bias, act=act, seed=seed)
    X, y = data(24, (4,), 3, seed=seed + 1)
    _compare(model, X, y)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ["relu", "leaky"])
def test_cnn_blocks_match_dense_reference(bias, act):
    model = cnn(bias=bias, act=act, seed=3)
    X, y = data(10, (1, 8, 8), 3, seed=4)
    d = _compare(model, X, y)
    assert d["0.weight"].rank is not None  # conv blocks go through the column route


def test_layer_partition_matches_reference():
    model = mlp([4, 5, 3], seed=5)
    X, y = data(20, (4,), 3)
    d = _compare(model, X, y, blocks="layer")
    assert d.names() == ["0", "2"] and d["0"].size == 4 * 5 + 5


def test_tanh_net_matches_reference():
    """Not piecewise linear: second derivatives of the network itself enter H_bb."""
    model = mlp([3, 4, 4, 2], act="tanh", seed=7)
    X, y = data(16, (3,), 2)
    _compare(model, X, y, tol=1e-9)


def test_coupled_samples_fall_back_to_columns_and_stay_exact():
    """A loss that couples samples breaks the per-sample Kronecker form; the check must catch it."""
    model = mlp([3, 4, 2], seed=2)
    X, y = data(12, (3,), 2)

    def coupled_loss(out, target):
        return CE(out, target) + out.mean(dim=0).pow(2).sum()

    d = diagnose(model, coupled_loss, (X, y))
    for b in d:
        ref = reference_block(model, coupled_loss, X, y, list(b.params))
        assert rel(b.inverse_coupled, ref["inverse_coupled"]) <= conditioned_rtol(1e-9, ref["kappa"])
    assert any("disagreed" in n for n in d["0.weight"].notes)


def test_uneven_batches_equal_one_full_batch():
    model = mlp([4, 6, 3], seed=11)
    X, y = data(37, (4,), 3)
    full = diagnose(model, CE, (X, y))
    split = diagnose(model, CE, [(X[:5], y[:5]), (X[5:22], y[5:22]), (X[22:], y[22:])])
    for a, b in zip(full, split):
        for f in ("g_sq", "wHw", "coupled", "inverse_coupled", "w_dot_g"):
            assert rel(getattr(b, f), getattr(a, f)) <= 1e-12, (a.name, f)
    assert split.meta["n_batches"] == 3


def test_explicit_partition_and_max_dense():
    model = mlp([4, 6, 3], seed=12)
    X, y = data(20, (4,), 3)
    d = diagnose(model, CE, (X, y), blocks={"first": ["0.weight"], "rest": ["0.bias", "2.weight"]}, max_dense=20,
                 method="dense")
    assert d.names() == ["first", "rest"]
    assert d["first"].inverse_coupled is None and "max_dense=20" in d["first"].notes[0]
    ref = reference_block(model, CE, X, y, ["0.bias", "2.weight"])
    assert d["rest"].size == 24 and d["rest"].inverse_coupled is None
    assert rel(d["rest"].coupled, ref["coupled"]) <= 1e-10


def test_table_and_dict_are_plain():
    model = mlp([3, 4, 2], seed=0)
    d = diagnose(model, CE, data(8, (3,), 2))
    text = d.table()
    assert text.splitlines()[0].split()[:2] == ["block", "size"] and "0.weight" in text
    plain = d.to_dict()
    assert [b["name"] for b in plain["blocks"]] == d.names()
    assert isinstance(plain["blocks"][0]["notes"], list)
    with pytest.raises(KeyError, match="blocks are"):
        d["nope"]
