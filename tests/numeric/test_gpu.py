"""CUDA against CPU (issue 23, any device): a model on CUDA is diagnosed on CUDA in float64, and every
route gives the CPU's numbers to 1e-12. Marked ``gpu``; it skips, with the reason shown, where torch
sees no CUDA device. Run it whenever a CUDA machine is available: ``python -m pytest -m gpu -rs``."""

import math

import pytest
import torch
from torch import nn

from coupled_curvature.numeric import cutoff_sensitivity, diagnose, spectral_profile

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False"),
]
CE = nn.CrossEntropyLoss()
FIELDS = ("g_sq", "wHw", "rayleigh", "coupled", "inverse_coupled")


def _cnn():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 3)).double().eval()
    X = torch.randn(12, 1, 6, 6, dtype=torch.float64)
    return net, X, torch.arange(12) % 3


def _close(a, b, tol=1e-12):
    return a is None and b is None or math.isclose(a, b, rel_tol=tol, abs_tol=1e-300)


@pytest.mark.parametrize("method, inverse", [(None, True), ("dense", True), ("krylov", True), (None, False)])
def test_cuda_equals_cpu_on_every_route(method, inverse):
    net, X, y = _cnn()
    cpu = diagnose(net, CE, (X, y), method=method, inverse=inverse, max_dense=2048)
    gpu = diagnose(net.cuda(), CE, (X.cuda(), y.cuda()), method=method, inverse=inverse, max_dense=2048)
    assert gpu.meta["device"].startswith("cuda") and cpu.meta["device"] == "cpu"
    for b in cpu:
        for f in FIELDS:
            tol = 1e-7 if method == "krylov" and f == "inverse_coupled" else 1e-12
            assert _close(getattr(gpu[b.name], f), getattr(b, f), tol), (b.name, f)


def test_device_overrides_the_models_device():
    net, X, y = _cnn()
    d = diagnose(net, CE, (X, y), device="cuda")
    assert d.meta["device"].startswith("cuda")
    assert next(net.parameters()).device.type == "cpu"  # the user's model never moves


def test_profile_and_cutoff_curve_on_cuda():
    net, X, y = _cnn()
    p_cpu, p_gpu = (spectral_profile(net, CE, (X, y), device=dev) for dev in ("cpu", "cuda"))
    c_cpu, c_gpu = (cutoff_sensitivity(net, CE, (X, y), rtols=[1e-10, 1e-6], device=dev) for dev in ("cpu", "cuda"))
    for b in p_cpu:
        assert _close(p_gpu[b.name].dplus(1e-10), b.dplus(1e-10))
        for x, z in zip(c_cpu["blocks"][b.name]["inverse_coupled"], c_gpu["blocks"][b.name]["inverse_coupled"]):
            assert _close(x, z)
