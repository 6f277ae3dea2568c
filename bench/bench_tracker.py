"""Benchmark: the cost of CurvatureTracker during training (issue 25: target ≤ 10% added time).

The 126k-parameter ReLU MLP (64-[95 x 14]-10) on digits, SGD at batch 64, trained for --steps steps
without and with a tracker (probe: 256 training samples, every 100 steps, D only: inverse=False, so
wᵀHw takes the engine's cheapest exact route). Both are measured in this one process, interleaved,
from the same initial weights; each repeat gives the ratio (time with) / (time without), and the
median over the repeats is printed, of wall time and of the process's CPU time (with one thread the
CPU time is the computation's own, much less disturbed when other processes share the machine):

    tracker overhead (synchronous): median ratio 1.xx (with / without, wall) ...; CPU-time ratio median 1.xx
    tracker overhead (background): median ratio 1.xx ...

``background=True`` computes each record in a worker thread on a float64 snapshot while training goes
on; its CPU-time ratio counts the worker's time too, so it shows the work done, the wall ratio what
the training loop waits for.

The tracker's first call (imports, warm-up) is made before timing. Run:
python bench/bench_tracker.py [--steps 1000] [--repeats 3] [--dtype float32|float64] [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import nn

from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.tracking.tracker import CurvatureTracker


def _train(net: nn.Module, X: torch.Tensor, y: torch.Tensor, steps: int,
           tracker: CurvatureTracker | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``steps`` SGD steps, with ``tracker.step`` after each."""
    loss = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    start, cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        idx = torch.randint(0, len(X), (64,), generator=g)
        opt.zero_grad()
        loss(net(X[idx]), y[idx]).backward()
        opt.step()
        if tracker is not None:
            tracker.step(step)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--probe", type=int, default=256)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared machine)")
    ap.add_argument("--quick", action="store_true", help="500 steps, 3 repeats")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.repeats = 500, 3
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    data = load("digits")
    X, y = data.X_train.to(dtype), data.y_train
    probe = (X[:a.probe], y[:a.probe])
    init = make_mlp(data.n_features, [95] * 14, data.n_classes).to(dtype)
    n_params = sum(p.numel() for p in init.parameters())
    CurvatureTracker(copy.deepcopy(init), nn.CrossEntropyLoss(), probe).record(0)  # warm-up
    modes = {"synchronous": False, "background": True}
    plain: list[float] = []
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    per_record: list[float] = []
    for _ in range(a.repeats):
        t0, c0 = _train(copy.deepcopy(init), X, y, a.steps, None)
        plain.append(t0)
        for mode, background in modes.items():
            net = copy.deepcopy(init)
            tracker = CurvatureTracker(net, nn.CrossEntropyLoss(), probe, every=a.every, background=background)
            t1, c1 = _train(net, X, y, a.steps, tracker)
            tracker.close()
            wall[mode].append(t1 / t0)
            cpu[mode].append(c1 / c0)
            if not background:
                per_record.append(statistics.median(r["seconds"] for r in tracker.history))
    print(f"model: {n_params} parameters ({a.dtype}), batch 64, {a.steps} steps, probe {a.probe}, every {a.every}, "
          f"{a.threads} thread(s)")
    print(f"training alone: median {statistics.median(plain):.3f} s; one record: median "
          f"{statistics.median(per_record) * 1e3:.1f} ms ({statistics.median(per_record) / statistics.median(plain) * a.steps:.1f} "
          "training steps)")
    for mode in modes:
        print(f"tracker overhead ({mode}): median ratio {statistics.median(wall[mode]):.3f} (with / without, wall) over "
              f"{a.repeats} repeats of {a.steps} steps; ratios {', '.join(f'{r:.3f}' for r in wall[mode])} "
              f"(target ≤ 1.10); CPU-time ratio median {statistics.median(cpu[mode]):.3f}")

if __name__ == "__main__":
    main()
