"""Benchmark: Krylov (Lanczos quadrature) against dense wᵀH⁺w on single Hessian blocks.

For each block, in float64 on digits (all 1797 samples unless --samples):
  * dense: per-sample Kronecker assembly of H_bb + one eigendecomposition (numeric/linalg/pinv.py);
  * Krylov: numeric/hvp.block_krylov on one retained graph (probe + Lanczos from w/‖w‖).
Prints the median time of each over --repeats runs, their ratio, the Krylov step count,
convergence flag and error estimate, and the relative difference of wᵀH⁺w and D⁺.
Blocks: ~4k parameters (4096, hidden weight of a 64-[64x4]-10 MLP) and ~9k (9025, hidden
weight of the 64-[95x14]-10 MLP, ~126k parameters).
Run: python bench/bench_krylov.py [--repeats 3] [--samples N] [--max-iter 1000] [--rtol 1e-10]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch

from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.core.hvp import block_curvature, block_krylov
from coupled_curvature.numeric.factors.gauss_newton import linear_block_hessians
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form
from coupled_curvature.numeric.models.factory import make_mlp

SETTINGS = [  # (label, hidden widths, layer path, block)
    ("~4k block", [64] * 4, "4", "4.weight"),
    ("~9k block", [95] * 14, "14", "14.weight"),
]


def _median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per method (median reported)")
    ap.add_argument("--samples", type=int, default=0, help="use only the first N digits samples (0: all)")
    ap.add_argument("--max-iter", type=int, default=1000, help="Krylov steps (krylov_max_iter)")
    ap.add_argument("--tol", type=float, default=1e-7, help="Krylov target relative accuracy")
    ap.add_argument("--rtol", type=float, default=1e-10, help="pinv_rtol (relative eigenvalue cutoff)")
    args = ap.parse_args()
    data = load("digits")
    X, y = torch.cat([data.X_train, data.X_test]), torch.cat([data.y_train, data.y_test])
    if args.samples:
        X, y = X[: args.samples], y[: args.samples]
    loss_fn = torch.nn.CrossEntropyLoss()
    print(f"digits, {len(X)} samples; pinv_rtol={args.rtol:g}, krylov max_iter={args.max_iter}, tol={args.tol:g}; "
          f"{torch.get_num_threads()} torch threads")
    for label, hidden, path, block in SETTINGS:
        model = make_mlp(64, hidden, 10, seed=0)
        obj = Objective(float64_copy(model), loss_fn, prepare_batches((X, y), loss_fn))
        partition = {block: [block]}
        graphs: list = []
        curv = block_curvature(obj, partition, set(), retain=graphs)
        w = obj.values[block].reshape(-1)
        n = w.numel()
        w_sq, g_sq = float(w @ w), float(curv[block].grad @ curv[block].grad)

        def dense():
            H = linear_block_hessians(obj, 0, {block: (path, [block])})[block]
            return pinv_quadratic_form(H, w, args.rtol)

        def krylov():
            return block_krylov(obj, partition, curv, [block], rtol=args.rtol, max_iter=args.max_iter,
                                tol=args.tol, graphs=graphs)[block]

        t_dense, pf = _median_time(dense, args.repeats)
        t_kry, kf = _median_time(krylov, args.repeats)
        diff = abs(kf.value - pf.value) / max(abs(pf.value), 1e-300)
        params = sum(v.numel() for v in obj.values.values())
        print(f"\n{label}: {block} of 64-[{hidden[0]}x{len(hidden)}]-10 ({params} parameters), {n} parameters")
        print(f"  dense  (Kronecker + pinv) :  {t_dense:8.2f} s   rank {pf.rank}, min kept |λ|/max {pf.min_kept_rel_eig:.1e}")
        print(f"  Krylov (probe + Lanczos):   {t_kry:8.2f} s   {kf.iterations} products "
              f"({kf.probe_steps} probe), converged={kf.converged}, invariant={kf.invariant}, "
              f"error estimate {kf.error_estimate:.1e}, rank {kf.rank}")
        print(f"  ratio dense / Krylov:       {t_dense / t_kry:8.2f}x")
        print(f"  |Krylov - dense| / |dense|: {diff:8.1e}  (wᵀH⁺w; D⁺ = {pf.value / w_sq * g_sq:.6e} dense, "
              f"{kf.value / w_sq * g_sq:.6e} Krylov)")
        print(f"  wᵀHw: Krylov ‖w‖²α₁ {kf.wHw:.12e}, HVP {float(w @ curv[block].Hw):.12e}")
        print(f"  Ritz extremes: [{kf.ritz_min:.3e}, {kf.ritz_max:.3e}]; max|λ| dense {pf.max_abs_eig:.6e}, "
              f"Krylov {kf.max_abs_eig:.6e}")
        del graphs
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
