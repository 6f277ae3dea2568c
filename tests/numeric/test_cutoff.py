"""D⁺ against the pseudo-inverse cutoff (numeric/studies/cutoff.py), dense and Krylov, and its figure."""

import io

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from torch.func import functional_call, grad, hessian

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.studies.cutoff import DEFAULT_RTOLS, cutoff_sensitivity
from coupled_curvature.reporting.figures import cutoff_figure
from tests.numeric._nets import data, mlp, rel

CE = torch.nn.CrossEntropyLoss()
EPS = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def setting():
    model = mlp([5, 7, 3], seed=3)
    X, y = data(12, (5,), 3, seed=4)
    dense = cutoff_sensitivity(model, CE, (X, y), method="dense")
    krylov = cutoff_sensitivity(model, CE, (X, y), method="krylov")
    return model, X, y, dense, krylov


def brute_block(model, X, y, name):
    """torch.func.hessian of the loss in one parameter tensor, and its gradient and value."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    shape = params[name].shape

    def f(flat):
        return CE(functional_call(model, {**params, name: flat.reshape(shape)}, (X,)), y)

    w = params[name].reshape(-1)
    return w.numpy(), grad(f)(w).numpy(), hessian(f)(w).numpy()


def test_dense_curve_matches_numpy_pinv_at_every_cutoff(setting):
    model, X, y, dense, _ = setting
    assert dense["rtols"] == sorted(DEFAULT_RTOLS) and dense["method"] == "dense"
    compared = 0
    for name, row in dense["blocks"].items():
        w, g, H = brute_block(model, X, y, name)
        lam = np.linalg.eigvalsh(H)
        top = np.abs(lam).max()
        for rtol, got, rank in zip(dense["rtols"], row["inverse_coupled"], row["rank"]):
            tau = rtol * top
            if np.any(np.abs(np.abs(lam) - tau) <= 0.05 * tau + 1e3 * EPS * top):
                continue  # an eigenvalue sits at the cutoff: the two eigensolvers may split it differently
            want = w @ np.linalg.pinv(H, rcond=rtol, hermitian=True) @ w / (w @ w) * (g @ g)
            kept = np.abs(lam[np.abs(lam) > tau])
            tol = max(1e-9, 1e3 * EPS * top / kept.min()) if kept.size else 1e-12
            assert rel(got, want) <= tol or abs(got - want) <= 1e-12, (name, rtol, got, want)
            assert rank == kept.size
            compared += 1
    assert compared >= 30


def test_krylov_curve_agrees_with_dense_where_converged(setting):
    _, _, _, dense, krylov = setting
    assert krylov["rtols"] == dense["rtols"] and set(krylov["blocks"]) == set(dense["blocks"])
    converged = 0
    for name, row in krylov["blocks"].items():
        ref = dense["blocks"][name]
        for v, c, e, d in zip(row["inverse_coupled"], row["converged"], row["error"], ref["inverse_coupled"]):
            if c:
                assert rel(v, d) <= 1e-6 or abs(v - d) <= 1e-12, (name, v, d, e)
                converged += 1
    assert converged >= len(krylov["blocks"]) * len(krylov["rtols"]) // 2


def test_last_layer_is_convex_so_dplus_falls_as_the_cutoff_rises(setting):
    """Cross-entropy is convex in the last layer's weights: its block is PSD, every kept term
    is positive, and raising the cutoff can only drop terms."""
    _, _, _, dense, _ = setting
    curve = dense["blocks"]["2.weight"]["inverse_coupled"]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(curve, curve[1:]))
    assert curve[0] > curve[-1] > 0  # and it does move: the cutoff matters


def test_dense_path_leaves_out_blocks_above_max_dense():
    model = mlp([4, 6, 2], seed=0)
    X, y = data(10, (4,), 2)
    r = cutoff_sensitivity(model, CE, (X, y), rtols=[1e-8], max_dense=10, method="dense")
    assert sorted(r["blocks"]) == ["0.bias", "2.bias"]
    assert sorted(r["left_out"]) == ["0.weight", "2.weight"] and "max_dense=10" in r["left_out"]["0.weight"]
    assert r["blocks"]["0.bias"]["converged"] is None and r["blocks"]["0.bias"]["size"] == 6


def test_the_default_gram_route_takes_blocks_above_max_dense_and_agrees_with_dense():
    """The finding of issue 23: cutoff_sensitivity knew only dense and Krylov, so a block above
    max_dense was left out although diagnose had its D⁺ by the exact Gram route."""
    model = mlp([4, 6, 2], seed=0)
    X, y = data(10, (4,), 2)
    rtols = [1e-12, 1e-8, 1e-4]
    r = cutoff_sensitivity(model, CE, (X, y), rtols=rtols, max_dense=10)
    assert sorted(r["blocks"]) == ["0.bias", "0.weight", "2.bias", "2.weight"] and not r["left_out"]
    assert r["blocks"]["0.weight"]["route"] == "gram"
    ref = cutoff_sensitivity(model, CE, (X, y), rtols=rtols, method="dense")
    for name, row in ref["blocks"].items():
        for a, b in zip(row["inverse_coupled"], r["blocks"][name]["inverse_coupled"]):
            assert rel(a, b) <= 1e-8, (name, a, b)
    for rtol, k in zip(rtols, range(3)):  # and diagnose gives the same D⁺ at each cutoff
        d = diagnose(model, CE, (X, y), pinv_rtol=rtol, max_dense=10)
        for b in d:
            assert rel(b.inverse_coupled, r["blocks"][b.name]["inverse_coupled"][k]) <= 1e-12, (b.name, rtol)


def test_figure_draws_dense_solid_and_krylov_dashed(setting):
    _, _, _, dense, krylov = setting
    fig = cutoff_figure(dense, krylov)
    ax = fig.axes[0]
    styles = {}
    for line in ax.get_lines():
        if line.get_label().startswith("_"):
            continue
        styles[line.get_label()] = line.get_linestyle()
    n = len(dense["blocks"])
    assert sum(s == "-" for s in styles.values()) == n and sum(s == "--" for s in styles.values()) == n
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


@pytest.mark.parametrize("kwargs, match", [
    ({"rtols": []}, "rtols"), ({"rtols": [1.5]}, "rtols"), ({"rtols": "abc"}, "rtols"),
    ({"rtols": [float("nan")]}, "rtols"), ({"method": "newton"}, "method"), ({"max_dense": -1}, "max_dense"),
])
def test_bad_input(kwargs, match):
    model = mlp([3, 2], seed=0)
    X, y = data(4, (3,), 2)
    with pytest.raises(InvalidInputError, match=match):
        cutoff_sensitivity(model, CE, (X, y), **kwargs)
    with pytest.raises(InvalidInputError, match="at least one"):
        cutoff_figure()
