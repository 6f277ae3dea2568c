"""``ccurv diagnose``: D and D⁺ of a trained net, alone or data-parallel under ``torchrun``.

Every rank builds (and trains) the same model from ``--seed``, takes a contiguous shard of the
data and sums curvature over ranks; rank 0 prints the table and writes ``--json``::

    ccurv diagnose --dataset wine --arch mlp:8x2
    torchrun --standalone --nproc_per_node=4 -m coupled_curvature diagnose --dataset digits --arch mlp:64x3
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from coupled_curvature.commands._common import count, nonnegative, positive_float, seed
from coupled_curvature.output import check_file, write_json
from coupled_curvature.reporting.terminal import table, wrap


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.6e}"


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
    rows = [[b.name, str(b.size), _num(b.g_sq), _num(b.wHw), _num(b.rayleigh), _num(b.coupled),
             _num(b.inverse_coupled), "-" if b.rank is None else str(b.rank)] for b in diagnosis]
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


def _cutoff(text: str) -> float:
    """An argparse type: the relative cutoff of ``H⁺``, a number in ``[0, 1)`` (as ``diagnose`` checks it).

    >>> _cutoff("1e-8"), _cutoff("0")
    (1e-08, 0.0)
    >>> _cutoff("2")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number in [0, 1), got '2'
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}")
    return value


def _fraction_open(text: str) -> float:
    """An argparse type: a number in ``(0, 1)``.

    >>> _fraction_open("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number in (0, 1), got '0'
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from coupled_curvature.numeric.studies.launch import LaunchOptions, run_launch

    if args.json is not None:
        check_file(args.json, reads=[args.state] if args.state else [])  # before any training; never over --state
    opts = LaunchOptions(
        dataset=args.dataset, arch=args.arch, seed=args.seed, epochs=args.epochs, state=args.state,
        split=args.split, samples=args.samples, reduction=args.reduction, blocks=args.blocks, gauge=args.gauge,
        inverse=not args.no_inverse, pinv_rtol=args.pinv_rtol, max_dense=args.max_dense, method=args.method,
        krylov_max_iter=args.krylov_max_iter, krylov_tol=args.krylov_tol, gram_memory=args.gram_memory_mib * 2**20,
        frozen=args.frozen, device=args.device, progress=args.progress,
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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diagnose", help="D and D⁺ of a net trained here, alone or data-parallel under torchrun",
        description="Data-parallel D and D⁺: every rank builds (and trains) the same net from --seed, takes a "
                    "contiguous shard of the data and sums curvature over ranks. Start it with torchrun "
                    "--nproc_per_node=N -m coupled_curvature diagnose ...; without torchrun it runs as one process.",
    )
    p.add_argument("--dataset", default="digits", choices=("digits", "breast_cancer", "wine"))
    p.add_argument("--arch", default="mlp:64x3",
                   help="KIND:WIDTHxDEPTH with KIND one of mlp, mlp-nobias, mlp-leaky, linear, mlp-bn, cnn")
    p.add_argument("--seed", type=seed, default=0, help="initialisation and minibatch-order seed")
    p.add_argument("--epochs", type=nonnegative, default=20, help="Adam epochs on the training split (0: untrained)")
    p.add_argument("--state", help="load this state_dict (torch.save) instead of training")
    p.add_argument("--split", default="train", choices=("train", "test"), help="data to diagnose")
    p.add_argument("--samples", type=count, help="diagnose only the first N samples of the split")
    p.add_argument("--reduction", default="mean", choices=("mean", "sum"), help="cross-entropy reduction")
    p.add_argument("--blocks", default="tensor", choices=("tensor", "layer", "head"),
                   help="partition: one block per tensor, per layer, or per attention head (Q, K, V, O of each head; "
                        "other tensors whole)")
    p.add_argument("--gauge", default=None, choices=("balanced",),
                   help="balanced: compute at the balanced point of the model's orbit under attention's per-head maps "
                        "and ReLU neuron rescaling, where D and D⁺ are invariant under that whole group (T14)")
    p.add_argument("--no-inverse", action="store_true", help="skip D⁺")
    p.add_argument("--pinv-rtol", type=_cutoff, default=1e-10, help="relative cutoff of H⁺, in [0, 1) (default 1e-10)")
    p.add_argument("--max-dense", type=nonnegative, default=4096, help="largest block with a dense eigenproblem")
    p.add_argument("--method", default=None, choices=("gram", "dense", "krylov", "auto"),
                   help="route for D⁺ (default gram: exact Gram route where the net is piecewise affine in a block, "
                        "dense up to --max-dense elsewhere; a data-parallel run takes dense)")
    p.add_argument("--krylov-max-iter", type=count, default=1000, help="Lanczos products per block (--method krylov/auto)")
    p.add_argument("--krylov-tol", type=_fraction_open, default=1e-7, help="Lanczos target relative accuracy, in (0, 1)")
    p.add_argument("--gram-memory-mib", type=count, default=2048, help="MiB of Gram-route rows held at once")
    p.add_argument("--frozen", default="skip", choices=("skip", "include"),
                   help="parameters with requires_grad=False: leave out (skip) or diagnose (include)")
    p.add_argument("--device", default=None, help="where the float64 copy runs, e.g. cpu or cuda:0 (default: the model's)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress line on stderr (default: when stderr is a terminal and the run takes 2 s)")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                   help="auto: nccl when CUDA is available, gloo otherwise")
    p.add_argument("--init-method", default="env://", help="process-group rendezvous (default env:// from torchrun)")
    p.add_argument("--timeout", type=positive_float, default=1800.0, help="seconds before a stuck collective fails")
    p.add_argument("--broadcast", action="store_true",
                   help="copy rank 0's weights to every rank before diagnosing (for machines whose training "
                        "differs in the last bits); without it the ranks must agree bit for bit")
    p.add_argument("--json", metavar="FILE", help="rank 0 writes the Diagnosis here (atomically)")
    p.set_defaults(func=run)
