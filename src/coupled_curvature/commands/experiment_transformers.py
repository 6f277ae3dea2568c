"""``ccurv experiment transformers [--quick] --out DIR``: sharpness, adaptive sharpness, ``D``, ``D⁺`` and the
gauge-fixed ``D`` under attention's symmetries on small trained transformers (GPT-2 tiny, BERT tiny,
``nn.TransformerEncoderLayer``, ``nn.MultiheadAttention``).

Writes ``DIR/transformers.json``, ``transformers.md`` and ``transformers.png`` (one heat map per model), built in a
temporary folder and renamed into place.
"""

from __future__ import annotations

import argparse
import os
import time

from coupled_curvature.commands._common import add_command, nonnegative, say

#: the line of ``ccurv experiment --help`` that names the experiment, and the description its own ``--help``
#: opens with
HELP = "measures under attention's symmetries on small trained transformers, with a figure"
DESCRIPTION = ("Train tiny GPT-2, BERT, nn.TransformerEncoderLayer and nn.MultiheadAttention classifiers "
               "(float64, seeded token data) and measure the top eigenvalue, trace, fixed-radius and adaptive sharpness, "
               "D and D⁺ (tensor and per-head blocks) and the gauge-fixed D and D⁺ under Q/K maps (c·R on one head, a "
               "general A per head), V/O maps, head permutation and the norm scale.")


def register_transformers(kinds, shared) -> None:
    """Add ``transformers`` to the experiment sub-commands (``shared`` adds --quick, --out and --seed:
    :func:`~coupled_curvature.commands.experiment.add_experiment_flags`)."""
    p = add_command(kinds, "transformers", run_transformers, HELP, DESCRIPTION)
    shared(p, "one sweep point per map (about a minute on 2 cores)",
           "seed of the data, the initialisation and the maps", cached=False)
    p.add_argument("--steps", type=nonnegative, default=30, help="full-batch Adam steps (lr 1e-2; default 30)")


def run_transformers(args: argparse.Namespace) -> int:
    from coupled_curvature.numeric.studies.transformer_study import transformer_study
    from coupled_curvature.base.output import check_folder, json_text, write_folder, write_texts
    from coupled_curvature.reporting import transformers_page as P

    check_folder(args.out, "experiment transformers")
    start = time.perf_counter()
    data = transformer_study(seed=args.seed, steps=args.steps, quick=args.quick, progress=say)
    data["seconds"] = time.perf_counter() - start

    def fill(tmp: str) -> None:
        write_texts(tmp, {"transformers.json": json_text(data, indent=1) + "\n",
                          "transformers.md": P.render_markdown(data)})
        P.figure(data).savefig(os.path.join(tmp, "transformers.png"), format="png", dpi=110,
                               metadata={"Software": None})

    path = write_folder(args.out, "experiment transformers", fill)
    print(P.terminal_text(data))
    print(f"\n{sum('cells' in m for m in data['models'])} models in {data['seconds']:.1f} s; report in {path}")
    return 0
