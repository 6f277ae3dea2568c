"""One curvature engine behind every entry point (issue 23): the same options checked the same way,
the same D⁺ on every block at the same cutoff, and each finding of the issue as a case."""

import copy
import inspect
import math

import pytest
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, TrainModeError
from coupled_curvature.numeric import (
    cutoff_sensitivity, diagnose, function_gap, highprec_diagnose, layer_rescale, neuron_rescale, spectral_profile,
)
from coupled_curvature.numeric.core.engine import SpectralRoute, WHwRoute, execute, plan, run_options
from coupled_curvature.numeric.factors.relu_mlp import with_factor_dplus

CE = nn.CrossEntropyLoss()
RUN_OPTIONS = ("blocks", "reduction", "frozen", "allow_train_mode", "method", "max_dense", "gram_memory",
               "process_group", "progress", "device", "pinv_rtol", "krylov_max_iter", "krylov_tol")


def small_cnn(seed=0):
    """A CNN whose second conv block has 16·8·3·3 = 1,152 parameters, above max_dense=512."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 3)).double()
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(12, 1, 6, 6, generator=g, dtype=torch.float64)
    return net.eval(), X, torch.arange(12) % 3


@pytest.fixture(scope="module")
def cnn_runs():
    net, X, y = small_cnn()
    rtols = [1e-12, 1e-10, 1e-6]
    d = {r: diagnose(net, CE, (X, y), max_dense=512, pinv_rtol=r) for r in rtols}
    p = spectral_profile(net, CE, (X, y), method="gram", max_dense=512)
    c = cutoff_sensitivity(net, CE, (X, y), rtols=rtols, max_dense=512)
    return net, X, y, rtols, d, p, c


def test_every_entry_point_takes_the_same_run_options():
    for fn in (diagnose, spectral_profile, cutoff_sensitivity):
        params = inspect.signature(fn).parameters
        missing = [o for o in RUN_OPTIONS if o not in params and not (fn is cutoff_sensitivity and o == "pinv_rtol")]
        assert not missing, (fn.__name__, missing)


@pytest.mark.parametrize("bad, match", [
    ({"pinv_rtol": 2}, r"pinv_rtol must be a number in \[0, 1\)"), ({"method": "newton"}, "method must be one of"),
    ({"gram_memory": 0}, "gram_memory must be an int"), ({"frozen": "maybe"}, "frozen must be 'skip' or 'include'"),
    ({"device": "tpu"}, "device"), ({"krylov_tol": 0}, "krylov_tol"), ({"progress": "yes"}, "progress must be True"),
])
def test_bad_options_get_the_same_error_everywhere_before_any_work(bad, match):
    net, X, y = small_cnn()
    calls = [lambda: diagnose(net, CE, (X, y), **bad), lambda: spectral_profile(net, CE, (X, y), **bad)]
    if "pinv_rtol" not in bad:
        calls.append(lambda: cutoff_sensitivity(net, CE, (X, y), **bad))
    else:
        calls.append(lambda: highprec_diagnose(nn.Sequential(nn.Linear(2, 2)), CE, (torch.randn(3, 2),
                                                                                    torch.tensor([0, 1, 0])), **bad))
    messages = set()
    for call in calls:
        with pytest.raises(InvalidInputError, match=match) as e:
            call()
        messages.add(str(e.value))
    assert len(messages) == 1  # one validation function, one message


def test_the_conv_block_above_max_dense_has_the_same_dplus_in_every_entry_point(cnn_runs):
    net, X, y, rtols, d, p, c = cnn_runs
    assert d[1e-10]["2.weight"].size == 1152 and d[1e-10]["2.weight"].method == SpectralRoute.GRAM
    assert "2.weight" in c["blocks"] and not c["left_out"]
    for k, r in enumerate(rtols):
        for b in d[r]:
            assert b.inverse_coupled is not None, b.notes
            assert math.isclose(p[b.name].dplus(r), b.inverse_coupled, rel_tol=1e-12), (b.name, r)
            assert math.isclose(c["blocks"][b.name]["inverse_coupled"][k], b.inverse_coupled, rel_tol=1e-12)
            assert math.isclose(p[b.name].D(), b.coupled, rel_tol=1e-12)


def test_a_non_uniform_neuron_scaling_moves_dplus_of_the_conv_block(cnn_runs):
    """Negative control: the agreement above is not a quantity compared with itself."""
    net, X, y, _, d, _, _ = cnn_runs
    moved = diagnose(neuron_rescale(net, 1, torch.tensor([1.0, 4.0, 0.25, 2.0, 0.5, 1.0, 3.0, 1.0, 1.0, 1.0,
                                                          1.0, 1.0, 1.0, 1.0, 1.0, 1.0])), CE, (X, y), max_dense=512)
    assert abs(moved["2.weight"].inverse_coupled / d[1e-10]["2.weight"].inverse_coupled - 1) > 1e-3
    assert abs(moved["2.weight"].coupled / d[1e-10]["2.weight"].coupled - 1) > 1e-3


def test_the_plan_records_each_route_with_a_reason_in_words():
    net, X, y = small_cnn()
    p = plan(net, CE, (X, y), run_options(max_dense=512))
    assert all(bp.spectral is SpectralRoute.GRAM and bp.fallback in (SpectralRoute.DENSE, SpectralRoute.NONE)
               for bp in p.blocks.values())
    assert p.blocks["2.weight"].fallback is SpectralRoute.NONE and "max_dense=512" in p.blocks["2.weight"].fallback_reason
    run = execute(p)
    reason = run.blocks["2.weight"].spectral_reason
    assert reason.startswith("Gram: the network is piecewise affine in this block") and "1,152 parameters" in reason
    d = diagnose(net, CE, (X, y), inverse=False)
    assert all(b.wHw_route is WHwRoute.TANGENT and b.method is SpectralRoute.NONE for b in d)


def test_the_factor_route_is_the_engines_gram_route():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).double()
    X, y = torch.randn(10, 4, dtype=torch.float64), torch.arange(10) % 3
    fac = with_factor_dplus(diagnose(net, CE, (X, y), inverse=False), net, X)
    ref = diagnose(net, CE, (X, y))
    for b in ref:
        assert math.isclose(fac[b.name].inverse_coupled, b.inverse_coupled, rel_tol=1e-12)


def test_an_overflowing_rescaling_is_a_package_error_not_a_lapack_one():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 2)).double()
    X, y = torch.randn(16, 3, dtype=torch.float64), torch.randint(0, 2, (16,))
    for method in (None, "dense"):
        with pytest.raises(InvalidInputError, match="rescale the model towards unit scale"):
            diagnose(layer_rescale(net, 0, 1e300), CE, (X, y), method=method)


def test_function_gap_refuses_train_mode_dropout_and_empty_inputs():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.Dropout(0.5), nn.Linear(16, 2))
    X = torch.randn(8, 3)
    with pytest.raises(TrainModeError, match="Dropout"):
        function_gap(net, net, X)
    assert function_gap(net.eval(), copy.deepcopy(net), X) == 0.0
    assert function_gap(net.train(), net, X, allow_train_mode=True) > 0  # what the refusal protects against
    with pytest.raises(InvalidInputError, match="no samples"):
        function_gap(net.eval(), net, torch.zeros(0, 3))


def test_kl_divergence_batchmean_is_a_mean_over_samples():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2), nn.LogSoftmax(dim=1)).double()
    X, t = torch.randn(12, 3, dtype=torch.float64), torch.softmax(torch.randn(12, 2, dtype=torch.float64), 1)
    d = diagnose(net, nn.KLDivLoss(reduction="batchmean"), [(X[:5], t[:5]), (X[5:], t[5:])])
    ref = diagnose(net, lambda o, s: nn.functional.kl_div(o, s, reduction="sum") / o.shape[0], (X, t))
    assert d.meta["reduction"] == "mean"
    for b in ref:
        assert math.isclose(d[b.name].coupled, b.coupled, rel_tol=1e-10)
    with pytest.raises(InvalidInputError, match="'none'"):
        diagnose(net, nn.KLDivLoss(reduction="none"), (X, t))


def test_the_device_is_recorded_and_an_absent_one_refused():
    net, X, y = small_cnn()
    assert diagnose(net, CE, (X, y), inverse=False)["2.weight"] is not None
    assert diagnose(net, CE, (X, y), inverse=False, device="cpu").meta["device"] == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInputError, match="CUDA"):
            diagnose(net, CE, (X, y), device="cuda")
