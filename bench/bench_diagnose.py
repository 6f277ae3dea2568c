"""Benchmark: diagnose(inverse=False) on the 126k-parameter ReLU MLP (14 x 95) over full digits.

Prints medians of repeated runs, measured in one process, and two ratios:
  diagnose / one full-batch gradient            (target <= 10)
  naive per-block loop / diagnose               (target >= 2: the naive loop rebuilds the
                                                 model graph and its gradient graph per block)
diagnose takes the tangent route here (numeric/factors/tangent_forms.py: every wᵀH_bb w from one backward
pass per row of the output-Hessian factor, C − 1 = 9 here, for all 30 blocks at once);
the Hessian-vector-product route, used for other architectures, is timed too.
Run: python bench/bench_diagnose.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.func import functional_call

from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.models.factory import make_mlp


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    data = load("digits", test_fraction=0.2)
    X = torch.cat([data.X_train, data.X_test])  # the full 1797 samples
    y = torch.cat([data.y_train, data.y_test])
    model = make_mlp(64, [95] * 14, 10, seed=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    params = {n: p.detach() for n, p in model.named_parameters()}
    n_params = sum(p.numel() for p in params.values())

    def gradient():
        leaves = {n: p.clone().requires_grad_(True) for n, p in params.items()}
        loss = loss_fn(functional_call(model, leaves, (X,)), y)
        torch.autograd.grad(loss, list(leaves.values()))

    def ours():
        diagnose(model, loss_fn, (X, y), inverse=False)

    def ours_hvp():  # the Hessian-vector-product route, which diagnose uses when the tangent route does not apply
        diagnose(model, loss_fn, (X, y), inverse=False, routes={WHwRoute.HVP, *SpectralRoute})

    def naive():
        for name in params:  # one block per tensor; the whole graph rebuilt each time
            leaves = {n: p.clone().requires_grad_(True) for n, p in params.items()}
            loss = loss_fn(functional_call(model, leaves, (X,)), y)
            (g,) = torch.autograd.grad(loss, [leaves[name]], create_graph=True)
            (hw,) = torch.autograd.grad(g, [leaves[name]], grad_outputs=params[name])
            float((hw * params[name]).sum())

    t_grad = median_time(gradient, args.repeats)
    t_ours = median_time(ours, args.repeats)
    t_hvp = median_time(ours_hvp, args.repeats)
    t_naive = median_time(naive, max(1, args.repeats // 2))
    route = diagnose(model, loss_fn, (X, y), inverse=False).meta["wHw_route"]
    print(f"model: ReLU MLP 64-[95x14]-10, {n_params} parameters, {len(params)} tensor blocks, {len(X)} samples")
    print(f"threads: {torch.get_num_threads()}, repeats: {args.repeats} (medians)")
    print(f"one full-batch gradient:        {t_grad * 1e3:8.1f} ms")
    print(f"diagnose(inverse=False):        {t_ours * 1e3:8.1f} ms  (wᵀHw route: {route})")
    print(f"  same on the HVP route:        {t_hvp * 1e3:8.1f} ms  (ratio to a gradient {t_hvp / t_grad:.2f})")
    print(f"naive per-block loop:           {t_naive * 1e3:8.1f} ms")
    print(f"ratio diagnose / gradient:      {t_ours / t_grad:8.2f}   (target <= 10)")
    print(f"speed-up naive / diagnose:      {t_naive / t_ours:8.2f}x  (target >= 2)")


if __name__ == "__main__":
    main()
