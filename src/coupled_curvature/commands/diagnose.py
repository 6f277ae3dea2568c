"""``ccurv diagnose``: D and D⁺ of a trained net, alone or data-parallel under ``torchrun``.

Every rank builds (and trains) the same model from ``--seed``, takes a contiguous shard of the
data and sums curvature over ranks; rank 0 prints the table and writes ``--json``::

    ccurv diagnose --dataset wine --arch mlp:8x2
    torchrun --standalone --nproc_per_node=4 -m coupled_curvature diagnose --dataset digits --arch mlp:64x3
"""

from __future__ import annotations

import argparse
from typing import Any

from coupled_curvature.commands._common import add_command, add_net, add_seed, count, nonnegative, positive_float
from coupled_curvature.base.output import check_file, write_json
from coupled_curvature.base.run_settings import add_flags, chosen
from coupled_curvature.reporting.terminal import number, table, wrap

#: the line of ``ccurv --help`` that names the command, and the description its own ``--help`` opens with
HELP = "D and D⁺ of a net trained here, alone or data-parallel under torchrun"
DESCRIPTION = ("Data-parallel D and D⁺: every rank builds (and trains) the same net from --seed, takes a "
               "contiguous shard of the data and sums curvature over ranks. Start it with torchrun "
               "--nproc_per_node=N -m coupled_curvature diagnose ...; without torchrun it runs as one process.")


def diagnosis_text(diagnosis: Any, width: int | None = None) -> str:
    """One row per block (size, ‖g‖², wᵀHw, RQ = wᵀHw/wᵀw, D = RQ/‖g‖², D⁺ = (wᵀH⁺w/wᵀw)·‖g‖², rank
    of the block Hessian), then each note once with the blocks it concerns, wrapped to ``width``.

    >>> from types import SimpleNamespace as B
    >>> blocks = [B(name=n, size=2, g_sq=1.0, wHw=2.0, rayleigh=1.0, coupled=1.0, inverse_coupled=None,
    ...             rank=None, notes=["D⁺ not computed: block above max_dense"]) for n in ("a", "b")]
    >>> class Diagnosis(list):  # the two attributes read: the blocks (iteration) and model notes
    ...     notes: list = []
    >>> print(diagnosis_text(Diagnosis(blocks)))
    block  size          ‖g‖²          wᵀHw            RQ             D  D⁺  rank
    a         2  1.000000e+00  2.000000e+00  1.000000e+00  1.000000e+00   -     -
    b         2  1.000000e+00  2.000000e+00  1.000000e+00  1.000000e+00   -     -
    notes:
      a, b: D⁺ not computed: block above max_dense
    """
    rows = [[b.name, str(b.size), *(number(x, ".6e") for x in (b.g_sq, b.wHw, b.rayleigh, b.coupled,
                                                                  b.inverse_coupled)),
             "-" if b.rank is None else str(b.rank)] for b in diagnosis]
    lines = [table(["block", "size", "‖g‖²", "wᵀHw", "RQ", "D", "D⁺", "rank"], rows, width=width)]
    where: dict[str, list[str]] = {}
    for b in diagnosis:
        for note in b.notes:
            where.setdefault(note, []).append(b.name)
    notes = [f"model: {n}" for n in diagnosis.notes] + [f"{', '.join(names)}: {n}" for n, names in where.items()]
    if notes:
        lines.append("notes:")
        lines += [line for n in notes for line in wrap(n, width, indent="  ", hang="    ")]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "diagnose", run, HELP, DESCRIPTION)
    add_net(p, "KIND:WIDTHxDEPTH with KIND one of mlp, mlp-nobias, mlp-leaky, linear, mlp-bn, cnn")
    add_seed(p, "initialisation and minibatch-order seed")
    p.add_argument("--epochs", type=nonnegative, default=20, help="Adam epochs on the training split (0: untrained)")
    p.add_argument("--state", help="load this state_dict (torch.save) instead of training")
    p.add_argument("--split", default="train", choices=("train", "test"), help="data to diagnose")
    p.add_argument("--samples", type=count, help="diagnose only the first N samples of the split")
    p.add_argument("--reduction", default="mean", choices=("mean", "sum"), help="cross-entropy reduction")
    add_flags(p)  # the run settings, each with its meaning and default (coupled_curvature.base.run_settings)
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                   help="auto: nccl when CUDA is available, gloo otherwise")
    p.add_argument("--init-method", default="env://", help="process-group rendezvous (default env:// from torchrun)")
    p.add_argument("--timeout", type=positive_float, default=1800.0, help="seconds before a stuck collective fails")
    p.add_argument("--broadcast", action="store_true",
                   help="copy rank 0's weights to every rank before diagnosing (for machines whose training "
                        "differs in the last bits); without it the ranks must agree bit for bit")
    p.add_argument("--json", metavar="FILE", help="rank 0 writes the Diagnosis here (atomically)")


def run(args: argparse.Namespace) -> int:
    from coupled_curvature.numeric.studies.launch import LaunchOptions, run_launch

    if args.json is not None:
        check_file(args.json, reads=[args.state] if args.state else [])  # before any training; never over --state
    opts = LaunchOptions(
        dataset=args.dataset, arch=args.arch, seed=args.seed, epochs=args.epochs, state=args.state,
        split=args.split, samples=args.samples, reduction=args.reduction, run=chosen(args),
        backend=args.backend, init_method=args.init_method, timeout=args.timeout, broadcast=args.broadcast,
    )
    result = run_launch(opts)
    if result is None:  # not rank 0
        return 0
    out = result.to_dict(opts)
    print(diagnosis_text(result.diagnosis))
    meta = out["meta"]
    print(f"loss {meta['loss']:.12e} over {meta['n_samples']} samples on {result.world_size} rank(s)"
          + ("" if result.backend is None else f" ({result.backend})"))
    if args.json is not None:
        write_json(args.json, out, reads=[args.state] if args.state else [])
    return 0
