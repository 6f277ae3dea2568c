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
EPS = 2.0 ** -52


def _cnn():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 3)).double().eval()
    X = torch.randn(12, 1, 6, 6, dtype=torch.float64)
    return net, X, torch.arange(12) % 3


def _close(a, b, tol=1e-12):
    return a is None and b is None or math.isclose(a, b, rel_tol=tol, abs_tol=1e-300)


def _dplus_tol(size: int, min_kept: float | None) -> float:
    """The bound two correct float64 runs of ``D⁺`` can differ by: a different summation order moves each kept
    eigenvalue by about ``n·ε·max|λ|``, so ``wᵀH⁺w`` by up to ``n·ε/min_kept`` relative (first run on an H200,
    2026-12-04: 1.5e-11 on a 16-parameter bias whose smallest kept eigenvalue is 2.8e-5 of the largest)."""
    return max(1e-12, 16 * size * EPS / (min_kept or 1.0))


@pytest.mark.parametrize("method, inverse", [(None, True), ("dense", True), ("krylov", True), (None, False)])
def test_cuda_equals_cpu_on_every_route(method, inverse):
    net, X, y = _cnn()
    cpu = diagnose(net, CE, (X, y), method=method, inverse=inverse, max_dense=2048)
    gpu = diagnose(net.cuda(), CE, (X.cuda(), y.cuda()), method=method, inverse=inverse, max_dense=2048)
    assert gpu.meta["device"].startswith("cuda") and cpu.meta["device"] == "cpu"
    for b in cpu:
        for f in FIELDS:
            tol = 1e-12
            if f == "inverse_coupled":
                tol = 1e-7 if method == "krylov" else _dplus_tol(b.size, b.min_kept_rel_eig)
            assert _close(getattr(gpu[b.name], f), getattr(b, f), tol), (b.name, f, getattr(gpu[b.name], f),
                                                                        getattr(b, f), tol)


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
        kept = [float(x) for x in b.rel_eigs if abs(x) > 1e-10]
        tol = _dplus_tol(b.size, min(map(abs, kept)) if kept else None)
        assert _close(p_gpu[b.name].dplus(1e-10), b.dplus(1e-10), tol), (b.name, tol)
        for x, z in zip(c_cpu["blocks"][b.name]["inverse_coupled"], c_gpu["blocks"][b.name]["inverse_coupled"]):
            assert _close(x, z, tol)


def test_krylov_and_top_eigenvalue_runs_start_on_the_models_device():
    """The Lanczos start vectors are drawn on the CPU (one seed, one run on every device) and moved to the
    model's device: the first CUDA run (2026-12-04) failed with 'expected device cuda:0 but got cpu'."""
    from coupled_curvature.numeric.measures import registry as M

    net, X, y = _cnn()
    cpu = M.top_eigenvalue(net, CE, (X, y))
    gpu = M.top_eigenvalue(net.cuda(), CE, (X.cuda(), y.cuda()))
    assert gpu["converged"] and math.isclose(gpu["value"], cpu["value"], rel_tol=1e-9)
