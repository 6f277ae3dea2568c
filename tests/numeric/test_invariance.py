"""T3, T5, T12 on random networks: what must stay put stays put, and what must move moves."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.studies.invariance import chain_check, relative_change
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale, neuron_rescale, permute_neurons
from tests.numeric._nets import cnn, data, mlp

CE = torch.nn.CrossEntropyLoss()


def _changes(a, b, field):
    return {x.name: relative_change(getattr(x, field), getattr(b[x.name], field)) for x in a}


@settings(max_examples=8)
@given(
    widths=st.lists(st.integers(3, 6), min_size=2, max_size=3),
    layer_pick=st.integers(0, 10),
    log2c=st.integers(-12, 12).filter(lambda k: k != 0),
    act=st.sampled_from(["relu", "leaky"]),
    seed=st.integers(0, 500),
)
def test_layer_rescale_leaves_D_and_Dplus_but_moves_rq(widths, layer_pick, log2c, act, seed):
    model = mlp([4, *widths, 3], act=act, seed=seed)
    X, y = data(30, (4,), 3, seed=seed)
    layer = layer_pick % len(widths)
    c = 2.0**log2c  # a power of two: the rescaled weights are exact in float64
    before, after = diagnose(model, CE, (X, y)), diagnose(layer_rescale(model, layer, c), CE, (X, y))
    dD, dDp, drq = (_changes(before, after, f) for f in ("coupled", "inverse_coupled", "rayleigh"))
    assert max(dD.values()) <= 1e-10
    for b in before:
        bound = max(1e-9, 100 * np.finfo(float).eps / b.min_kept_rel_eig)
        assert dDp[b.name] <= bound, (b.name, dDp[b.name])
    # T3 predicts the raw quotient of W_l, b_l scales by c^-2, of W_{l+1} by c^2
    wl, bl, wn = f"{2 * layer}.weight", f"{2 * layer}.bias", f"{2 * layer + 2}.weight"
    for name, power in ((wl, -2), (bl, -2), (wn, 2)):
        assert after[name].rayleigh == pytest.approx(before[name].rayleigh * c**power, rel=1e-10)
        assert drq[name] > 1e-3  # negative control: the raw quantity moves


def test_cnn_channel_rescale_and_permutation_are_invariant():
    model = cnn(seed=5)
    X, y = data(12, (1, 8, 8), 3, seed=6)
    moved = permute_neurons(layer_rescale(model, 1, 0.125), 0, [2, 0, 1])
    before, after = diagnose(model, CE, (X, y)), diagnose(moved, CE, (X, y))
    assert max(_changes(before, after, "coupled").values()) <= 1e-10
    assert max(_changes(before, after, "inverse_coupled").values()) <= 1e-7
    assert max(_changes(before, after, "rayleigh").values()) > 1e-3


def test_non_uniform_neuron_rescale_moves_D():
    """T5 negative control: a non-uniform scaling is not conformal on the tensor blocks."""
    model = mlp([4, 6, 5, 3], seed=9)
    X, y = data(40, (4,), 3, seed=9)
    scales = np.linspace(0.25, 4.0, 6)
    before, after = diagnose(model, CE, (X, y)), diagnose(neuron_rescale(model, 0, scales), CE, (X, y))
    dD = _changes(before, after, "coupled")
    assert dD["0.weight"] > 1e-3 and dD["0.bias"] > 1e-3 and dD["2.weight"] > 1e-3
    assert dD["4.weight"] <= 1e-10  # blocks the map does not touch stay put
    # and the radial ratio ρ (T11) survives even this non-conformal block-diagonal map
    for b in before:
        assert relative_change(b.radial_ratio, after[b.name].radial_ratio) <= 1e-9


def test_uniform_neuron_rescale_equals_layer_rescale():
    model = mlp([3, 4, 2], seed=1)
    a = neuron_rescale(model, 0, [0.5] * 4)
    b = layer_rescale(model, 0, 0.5)
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q)


def test_layer_partition_breaks_invariance_tensor_partition_does_not():
    """T5: on the 'layer' partition the next layer's block maps by diag(c⁻¹I, I)."""
    model = mlp([4, 5, 5, 3], seed=4)
    X, y = data(30, (4,), 3, seed=4)
    moved = layer_rescale(model, 0, 8.0)
    by_layer = _changes(diagnose(model, CE, (X, y), blocks="layer"), diagnose(moved, CE, (X, y), blocks="layer"), "coupled")
    by_tensor = _changes(diagnose(model, CE, (X, y)), diagnose(moved, CE, (X, y)), "coupled")
    assert by_layer["2"] > 1e-3  # weight scales by 1/c, bias does not
    assert by_layer["0"] <= 1e-10  # the rescaled layer itself scales uniformly
    assert max(by_tensor.values()) <= 1e-10


def test_loss_scaling_mean_vs_sum():
    """T12 with s = N: D -> D/N, D⁺ -> N·D⁺, and D·D⁺ is unchanged."""
    model = mlp([4, 5, 3], seed=8)
    X, y = data(25, (4,), 3, seed=8)
    mean = diagnose(model, torch.nn.CrossEntropyLoss(reduction="mean"), (X, y))
    total = diagnose(model, torch.nn.CrossEntropyLoss(reduction="sum"), (X, y))
    N = 25
    for a in mean:
        b = total[a.name]
        assert b.coupled == pytest.approx(a.coupled / N, rel=1e-12)
        assert b.inverse_coupled == pytest.approx(a.inverse_coupled * N, rel=1e-9)
        assert b.coupled * b.inverse_coupled == pytest.approx(a.coupled * a.inverse_coupled, rel=1e-9)
        assert b.coupled != pytest.approx(a.coupled, rel=1e-3)  # negative control


def test_chain_check_passes_and_reports_moving_rq():
    model = mlp([5, 6, 6, 6, 3], seed=2)
    X, y = data(50, (5,), 3, seed=2)
    result = chain_check(model, CE, (X, y), seed=3, n_rescalings=5)
    assert result.passed, result.table()
    assert result.function_gap < 1e-9 and result.max_drq > 1e-3
    assert len(result.steps) == 5 + 3 and "ΔD" in result.table()


def test_chain_check_detects_a_broken_symmetry(monkeypatch):
    """If the compensation were wrong, the check must fail (it can fail)."""
    import coupled_curvature.numeric.studies.invariance as inv

    def broken(model, *, seed, n_rescalings, permute, **_):
        return neuron_rescale(model, 0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), ["neuron_rescale(0)"]

    monkeypatch.setattr(inv, "random_symmetry_chain", broken)
    model = mlp([5, 6, 6, 3], seed=2)
    result = inv.chain_check(model, CE, data(40, (5,), 3), inverse=False)
    assert not result.passed and result.max_dD > 1e-3
