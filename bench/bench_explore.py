"""Time the default ``ccurv explore`` (mlp:64x3 on digits, all measures, all applicable symmetries).

Run: ``python bench/bench_explore.py``. Prints the matrix, the total time (target ≤ 5 min on 2
cores) and each measure's share of the measuring time.
"""

from __future__ import annotations

import sys
import time

from coupled_curvature.cli import build_parser


def main() -> int:
    args = build_parser().parse_args(["explore", "--arch", "mlp:64x3", "--dataset", "digits", *sys.argv[1:]])
    from coupled_curvature.commands.explore import explore

    start = time.perf_counter()
    mx, text = explore(args)
    total = time.perf_counter() - start
    print(text)
    print(f"\nbench_explore: total {total:.1f}s (target ≤ 300 s on 2 cores); "
          f"agreement {sum(c.agrees for c in mx.cells)}/{len(mx.cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
