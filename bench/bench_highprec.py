"""Benchmark: arbitrary-precision diagnose (D and D⁺) on a ~500-parameter trained net, 200 samples.

The net is a ReLU MLP 64→6→6→10 (502 parameters) trained on digits for 30 epochs (seed 0), the
data its first 200 training samples. Prints the median wall and CPU time of
``highprec.diagnose(..., dps=DPS, inverse=True)`` over the repeats, the time per phase (from
``meta["seconds"]``), the pseudo-inverse route and rank of every block, the agreement of D with
the float64 path, and the target verdict (≤ 60 s at 50 digits on 2 cores).

Run: python bench/bench_highprec.py [--dps 50] [--repeats 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import torch

from coupled_curvature.numeric.highprec import engine as highprec
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.models.training import train_mlp

TARGET_S = 60.0


def build(n_samples: int = 200, seed: int = 0):
    data = load("digits", seed=seed)
    net = train_mlp(data, (6, 6), seed=seed, epochs=30).model
    return net, torch.nn.CrossEntropyLoss(), (data.X_train[:n_samples], data.y_train[:n_samples])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print the top of a cProfile of one run")
    args = ap.parse_args()
    net, loss, data = build()
    n_params = sum(p.numel() for p in net.parameters())
    print(f"net: ReLU MLP 64-6-6-10, {n_params} parameters, {len(data[0])} samples, dps {args.dps}")
    walls, cpus, runs = [], [], []
    for _ in range(args.repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        d = highprec.diagnose(net, loss, data, dps=args.dps, inverse=True)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        runs.append(d.meta["seconds"])
    med = statistics.median(walls)
    print(f"highprec.diagnose: median wall {med:.2f} s, median CPU {statistics.median(cpus):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in walls)})")
    phases = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}
    print("per phase (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    ref = diagnose(net, loss, data)
    print(f"{'block':<10}{'size':>6}{'rank':>6}  {'rel |D − D_float64|':>20}  route")
    for b in d:
        rel = abs(b.coupled - ref[b.name].coupled) / abs(b.coupled)
        print(f"{b.name:<10}{b.size:>6}{b.rank:>6}  {float(rel):>20.2e}  {b.notes[-1]}")
    ok = med <= TARGET_S
    print(f"target ≤ {TARGET_S:.0f} s at dps {args.dps}: {'PASS' if ok else 'MISS'} ({med:.2f} s)")
    if args.profile:
        pr = cProfile.Profile()
        pr.enable()
        highprec.diagnose(net, loss, data, dps=args.dps, inverse=True)
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())


if __name__ == "__main__":
    main()
