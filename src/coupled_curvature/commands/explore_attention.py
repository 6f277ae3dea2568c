"""``ccurv explore --arch gpt2-tiny|bert-tiny|encoder-layer|mha``: the invariance matrix under attention's symmetries.

A tiny transformer (:mod:`~coupled_curvature.numeric.models.tiny_transformers`) is trained ``--epochs`` full-batch
Adam steps on seeded token data, then every measure is swept under the T13 maps of its last attention module and
the norm scale of its head (:mod:`~coupled_curvature.numeric.studies.explorer_attention`); ``ccurv explore``'s
own :func:`~coupled_curvature.commands.explore.run` prints and writes the result.
"""

from __future__ import annotations

import argparse

from coupled_curvature.base.choices import parse_choices, split_list
from coupled_curvature.commands._common import say
from coupled_curvature.base.errors import InvalidInputError

ATTENTION_ARCHS = ("gpt2-tiny", "bert-tiny", "encoder-layer", "mha")
#: sequences the attention archs train and measure on (fewer if --samples is smaller)
SEQUENCES = 8
#: dense blocks up to this size for every Hessian measure (the largest tensor of the tiny models is 256)
MAX_DENSE = 1024
OPTIONS = {m: {"max_dense": MAX_DENSE} for m in ("D", "Dplus", "D*Dplus", "rho", "newton", "laplace_logdet", "trace",
                                                 "norm_flat", "D[head]", "Dplus[head]", "D[gauge]", "Dplus[gauge]")}


def resolve_attention_symmetries(text: str | None) -> list[str]:
    """``all`` or a comma list of :data:`ATTENTION_SYMMETRIES`, in their order.

    >>> resolve_attention_symmetries("vo,qk_general")
    ['qk_general', 'vo']
    """
    from coupled_curvature.numeric.studies.explorer_attention_predictions import ATTENTION_SYMMETRIES

    if not text or text == "all":
        return list(ATTENTION_SYMMETRIES)
    return parse_choices(text, ATTENTION_SYMMETRIES, what="attention symmetry", example="--symmetries vo,qk_general",
                         normalize=str, valid_text="applicable: all, " + ", ".join(ATTENTION_SYMMETRIES))


def explore_attention(args: argparse.Namespace):
    """Build, train and sweep a tiny transformer; returns the Matrix and the text report."""
    from coupled_curvature.commands.explore import render_terminal
    from coupled_curvature.numeric.models.tiny_transformers import tiny_transformer
    from coupled_curvature.numeric.studies.explorer_attention import attention_matrix, attention_measures
    from coupled_curvature.reporting.terminal import terminal_width

    symmetries = resolve_attention_symmetries(args.symmetries)
    measures = attention_measures(split_list(args.measures or "all"))
    sequences = min(SEQUENCES, args.samples)
    say(f"training {args.arch} ({args.epochs} Adam steps, {sequences} sequences, seed {args.seed})")
    target = tiny_transformer(args.arch, seed=args.seed, steps=args.epochs, samples=sequences)
    mx = attention_matrix(target, measures, symmetries, options=OPTIONS, seed=args.seed, quick=args.quick,
                          progress=say)
    gaps = "; ".join(f"{s}: {max(g for _, g in v):.1e}" for s, v in mx.gaps.items() if v)
    mx.notes = [
        f"{target.description}; float64; the maps act on {target.attn!r} (per head) and on {target.norm_linear!r} "
        "(the bias-free Linear before the head's LayerNorm, eps 1e-20)",
        "rows: the registry's measures on tensor blocks (λ left out: token ids cannot move along a line), then D and "
        "D⁺ on per-head blocks (blocks='head', T13) and gauge-fixed (gauge='balanced', T14); head_perm compares the "
        "per-head blocks under the relabelling (new head i is old head perm[i])",
        f"cost control: every Hessian measure uses dense blocks ≤ {MAX_DENSE} parameters (all blocks here); the "
        "measures run on torch's math attention kernel (the fused kernels have no second derivative)",
        "tolerances: 'invariant' ≤ 1e-9 relative, or per block max(1e-9, 10·n_b·ε₆₄·κ_b) for pseudo-inverse measures; "
        "'moves' ≥ 1e-6 (a map of one head is a small part of a whole-model scalar: its change is diluted, yet 1e-6 "
        "is ten decades above rounding); entries at rounding level on both sides (≤ 1e-12 of the measure's largest) "
        "are not compared and are named in the cell's note",
        "the Newton decrement's invariance (T11) needs H_bb invertible or g ∈ range(H_bb); blocks off nn.Linear take "
        "the pseudo-inverse route with a relative cutoff, which is covariant only under conformal maps: a "
        "disagreement there names the block",
        f"function gap (max over the sweep): {gaps}",
    ]
    return mx, render_terminal(mx, terminal_width())


def check_attention_arch(args: argparse.Namespace) -> bool:
    """Whether ``--arch`` names an attention arch; ``--dataset`` other than the default is refused for them."""
    if args.arch not in ATTENTION_ARCHS:
        return False
    if args.dataset != "digits":
        raise InvalidInputError(f"arch {args.arch} trains on its own seeded token data; leave --dataset out")
    return True
