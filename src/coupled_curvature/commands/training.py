"""``ccurv experiment training [--quick] --out DIR``: the curvature-rate training experiment.

Baseline, CRR at a sweep of scales, SAM and ASAM, trained under seeds on Two Moons (label-flip noise 0,
0.3, 0.45) and digits; per arm and seed the test error, λ at the decision boundary, ECE, ``D`` and ``D⁺``
per block and the raw top eigenvalue, and λ after every epoch. Writes ``DIR/training.json``,
``training.md``, ``training.html`` (self-contained) and the figures ``training_scale`` and
``training_epochs`` (``.png`` and ``.svg``), built in a temporary folder and renamed into place. Finished
runs are cached under ``--cache`` (``--remeasure`` ignores them), so an interrupted run resumes. See
:mod:`coupled_curvature.numeric.studies.training_run` and :mod:`~coupled_curvature.numeric.studies.training_summary`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from coupled_curvature.commands._common import add_command, count, say

__all__ = ["register_training", "run_training_command", "terminal_table"]

#: the line of ``ccurv experiment --help`` that names the experiment, and the description its own ``--help``
#: opens with
HELP = "CRR, SAM and ASAM against a baseline: λ at the boundary, error, calibration (seed intervals)"
DESCRIPTION = ("Train a tanh MLP on Two Moons (label-flip noise 0, 0.3, 0.45) and a CNN on digits with "
               "baseline, Curvature Rate Regularization at a sweep of scales, SAM and ASAM over many seeds; tabulate "
               "test error, λ at the decision boundary, ECE, D, D⁺ and the top eigenvalue with seed-bootstrap "
               "intervals, and give a verdict on each claim. The default run takes about 9 minutes on 2 quiet cores.")


def register_training(kinds, shared) -> None:
    """Add ``training`` to the experiment sub-commands (``shared`` adds --quick, --out, --cache, --seed,
    --remeasure: :func:`~coupled_curvature.commands.experiment.add_experiment_flags`)."""
    t = add_command(kinds, "training", run_training_command, HELP, DESCRIPTION)
    shared(t, "three seeds, one noise level, five epochs (about a minute)")
    t.add_argument("--seeds", type=count, default=None, help="number of seeds (default 20, --quick 3)")
    t.add_argument("--jobs", type=count, default=None,
                   help="runs trained at once, in worker processes (default 2, --quick 1); the rows do not depend on it")


def terminal_table(data: dict, width: int | None = None) -> str:
    """The arm table for the terminal (means, with the interval of λ), at most ``width`` columns."""
    from coupled_curvature.reporting.terminal import table, wrap
    from coupled_curvature.reporting.training_page import cell

    def mean(m: dict) -> str:
        return "–" if m.get("mean") is None else f"{m['mean']:.3g}"

    head = ["condition", "arm", "n", "error", "λ boundary [95%]", "ECE", "D med"]
    rows = [[t["condition"], t["arm"], str(t["seeds"]), mean(t["test_error"]), cell(t["lambda_boundary"]),
             mean(t["ece"]), mean(t["D_median"])] for t in data["table"]]
    legend = ("n: seeds; error: test error; λ boundary: curvature rate on test points with top probability "
              "in the band, mean and 95% seed-bootstrap interval; ECE: 10 bins; D med: median over blocks")
    return "\n".join([table(head, rows, align="llrrrrr", width=width), *wrap(legend, width)])


def run_training_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from coupled_curvature.base.errors import InvalidInputError
    from coupled_curvature.numeric.models.cache import ModelCache
    from coupled_curvature.numeric.studies import training_run as T
    from coupled_curvature.numeric.studies.training_summary import arm_table, lambda_curves, verdicts
    from coupled_curvature.base.output import check_folder, json_text, write_folder, write_texts
    from coupled_curvature.reporting import training_page as P
    from coupled_curvature.reporting.html import render_html
    from coupled_curvature.reporting.markdown import render_markdown
    from coupled_curvature.reporting.terminal import bullets

    if args.seed < 0:
        raise InvalidInputError(f"--seed must be ≥ 0, got {args.seed}")
    cfg = T.quick_config(args.seed) if args.quick else T.default_config(args.seed)
    if args.seeds is not None:
        if args.seeds < 1:
            raise InvalidInputError(f"--seeds must be ≥ 1, got {args.seeds}")
        cfg = replace(cfg, seeds=tuple(range(args.seed, args.seed + args.seeds)))
    jobs = args.jobs if args.jobs is not None else 1 if args.quick else 2
    if jobs < 1:
        raise InvalidInputError(f"--jobs must be ≥ 1, got {jobs}")
    T.check_config(cfg)
    check_folder(args.out, "experiment training")
    n = len(cfg.conditions) * len(cfg.arm_list()) * len(cfg.seeds)
    say(f"experiment training ({cfg.name}): {n} runs, {jobs} at a time; cache {args.cache}")
    t0 = time.perf_counter()
    rows = T.run_training(cfg, cache=ModelCache(args.cache), progress=say, remeasure=args.remeasure,
                          jobs=jobs)
    data: dict[str, Any] = {"config": asdict(cfg), "jobs": jobs, "rows": rows,
            "table": arm_table(rows, n_boot=cfg.n_boot, seed=cfg.boot_seed), "curves": lambda_curves(rows),
            "verdicts": [asdict(v) for v in verdicts(rows, cfg.crr_scales, cfg.headline_scale, n_boot=cfg.n_boot,
                                                     seed=cfg.boot_seed)],
            "seconds": time.perf_counter() - t0}

    def fill(tmp: str) -> None:
        svgs = P.write_figures(data, tmp)
        page = P.outline(data)
        files = {"training.json": json_text(data, indent=1) + "\n", "training.md": render_markdown(page),
                 "training.html": render_html(page, svgs)}
        write_texts(tmp, files)

    path = write_folder(args.out, "experiment training", fill)
    print(terminal_table(data))
    print()
    print("\n".join(bullets([f"{v['claim']} ({v['condition']}): {v['verdict']}" for v in data["verdicts"]],
                            indent="")))
    print(f"\n{n} runs in {data['seconds']:.1f} s; report in {path}")
    return 0
