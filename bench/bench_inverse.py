"""Benchmark: dense D⁺ on the 126k-parameter ReLU MLP (14 x 95) over the full digits set.

Prints, measured in this run:
  * assembly of one 9025-parameter Hessian block: per-sample Kronecker route vs the
    column-by-column Hessian-vector-product route (the latter timed on --columns columns
    and scaled linearly to the block; target ratio >= 10);
  * one float64 eigendecomposition of that block;
  * with --full: diagnose(inverse=True) over every block (target <= 10 min) and peak RSS.
Run: python bench/bench_inverse.py [--columns 512] [--full]
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from coupled_curvature.numeric import hvp
from coupled_curvature.numeric._inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.datasets import load
from coupled_curvature.numeric.diagnostics import diagnose
from coupled_curvature.numeric.kron import linear_block_hessians
from coupled_curvature.numeric.objective import Objective
from coupled_curvature.numeric.training import make_mlp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--columns", type=int, default=512, help="columns timed on the HVP route")
    ap.add_argument("--full", action="store_true", help="also run diagnose(inverse=True) on every block")
    args = ap.parse_args()
    data = load("digits")
    X, y = torch.cat([data.X_train, data.X_test]), torch.cat([data.y_train, data.y_test])
    model = make_mlp(64, [95] * 14, 10, seed=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    obj = Objective(float64_copy(model), loss_fn, prepare_batches((X, y), loss_fn))
    block = "14.weight"
    n = obj.values[block].numel()

    t0 = time.perf_counter()
    H_kron = linear_block_hessians(obj, 0, {block: ("14", [block])})[block]
    t_kron = time.perf_counter() - t0

    leaves, grads = next(obj.graphs())
    k = min(args.columns, n)
    t0 = time.perf_counter()
    cols = []
    for start in range(0, k, 256):
        stop = min(k, start + 256)
        eye = torch.zeros(stop - start, n, dtype=torch.float64)
        eye[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        cot = [eye.reshape((stop - start,) + leaves[block].shape)]
        cols.append(hvp._block_vjp(grads, leaves, [block], cot, True)[0].reshape(stop - start, -1))
    t_cols = (time.perf_counter() - t0) * n / k
    err = float((torch.cat(cols) - H_kron[:k]).abs().max() / H_kron.abs().max())

    t0 = time.perf_counter()
    torch.linalg.eigh(H_kron)
    t_eigh = time.perf_counter() - t0
    print(f"model: ReLU MLP 64-[95x14]-10, {sum(v.numel() for v in obj.values.values())} parameters, {len(X)} samples")
    print(f"block {block}: {n} parameters")
    print(f"Kronecker assembly:           {t_kron:8.2f} s")
    print(f"column (HVP) assembly:        {t_cols:8.2f} s  (timed on {k} columns, scaled to {n})")
    print(f"ratio column / Kronecker:     {t_cols / t_kron:8.1f}x  (target >= 10)")
    print(f"max |difference| / max |H|:   {err:8.1e}  (the two routes agree)")
    print(f"eigh of the block:            {t_eigh:8.2f} s")
    if args.full:
        t0 = time.perf_counter()
        d = diagnose(model, loss_fn, (X, y), inverse=True, max_dense=10_000)
        total = time.perf_counter() - t0
        done = sum(b.inverse_coupled is not None for b in d)
        print(f"diagnose(inverse=True), all {len(d)} blocks ({done} with D⁺): {total:8.1f} s  (target <= 600 s)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS:                     {peak:8.0f} MiB")


if __name__ == "__main__":
    main()
