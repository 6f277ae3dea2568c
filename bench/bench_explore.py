"""Time the default ``ccurv explore`` (mlp:64x3 on digits, all measures, all applicable symmetries).

Run: ``python bench/bench_explore.py [extra explore flags, e.g. --arch cnn --quick]``. Prints the
matrix, the wall time (target ≤ 5 min on 2 cores), the process CPU time (less sensitive to other
load on a shared machine; with one thread it bounds the quiet wall time) and each measure's share
of the measuring time.
"""

from __future__ import annotations

import sys
import time

from coupled_curvature.cli import build_parser


def main() -> int:
    import torch

    from coupled_curvature.commands.explore import explore

    args = build_parser().parse_args(["explore", "--arch", "mlp:64x3", "--dataset", "digits", *sys.argv[1:]])
    start, cpu = time.perf_counter(), time.process_time()
    mx, text = explore(args)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(text)  # ends with each measure's time and share of the measuring time
    print(f"\nbench_explore: {args.arch} on {args.dataset}{' --quick' if args.quick else ''}: wall {total:.1f}s "
          f"(target ≤ 300 s on 2 cores), CPU {cpu:.1f}s with {torch.get_num_threads()} torch thread(s); "
          f"agreement {sum(c.agrees for c in mx.cells)}/{len(mx.cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
