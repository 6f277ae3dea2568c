"""``ccurv explore``: the invariance matrix of sharpness measures under reparameterizations.

Rows are measures, columns symmetries acting on the last hidden layer of a trained network;
each cell is the maximum relative deviation over a sweep of the symmetry's parameter, with the
theory's prediction (citing theorem ids T1–T12) and an agreement flag. The ``bn`` column runs on a
BatchNorm twin of an ``mlp`` arch (``Linear(bias=False) -> BatchNorm1d -> ReLU`` blocks, widths
capped at 8 so the acted-on blocks are dense, trained and measured in batch-statistics mode).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

from coupled_curvature.base.choices import parse_choices, split_list
from coupled_curvature.commands._common import add_command, add_net, add_seed, count, nonnegative, positive_float, say
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.base.output import check_file, check_folder, json_text, write_file, write_folder, write_texts
from coupled_curvature.reporting.explore_page import DINH, figures, render_html, render_markdown
from coupled_curvature.reporting.terminal import bullets, table, terminal_width, wrap

#: the line of ``ccurv --help`` that names the command, and the description its own ``--help`` opens with
HELP = "invariance matrix of sharpness measures under reparameterizations"
DESCRIPTION = ("Train a net, sweep every symmetry (layer, neuron, permutation, BatchNorm scale, linear "
               "mixing, nonlinear reparameterizations, loss scaling) and tabulate which sharpness measures stay "
               "invariant, against the prediction of the theorems.")

ARCHS = ("mlp:64x3", "mlp-nobias:32x4", "cnn", "linear:16x3", "mlp-bn:32x3")
APPLICABLE = {
    "mlp": ("layer", "neuron", "perm", "bn", "nonlinear", "loss"),
    "mlp-leaky": ("layer", "neuron", "perm", "bn", "nonlinear", "loss"),
    "mlp-nobias": ("layer", "neuron", "perm", "nonlinear", "loss"),
    "cnn": ("layer", "neuron", "perm", "nonlinear", "loss"),
    "linear": ("layer", "neuron", "perm", "orthogonal", "gl", "nonlinear", "loss"),
    "mlp-bn": ("bn", "nonlinear", "loss"),
}
# Cost control for the sweep (say so in the output): pseudo-inverse quantities on blocks ≤ 1024.
SWEEP_OPTIONS = {
    "Dplus": {"max_dense": 1024}, "D*Dplus": {"max_dense": 1024}, "D": {"max_dense": 1024},
    "rho": {"max_dense": 1024}, "newton": {"max_dense": 1024}, "laplace_logdet": {"max_dense": 1024},
    "trace": {"probes": 8, "max_dense": 1024}, "norm_flat": {"probes": 8, "max_dense": 1024},
}
# The BatchNorm twin (bn column only): no per-sample Kronecker factors exist under batch statistics,
# so every dense block costs one HVP per column; keep dense work to blocks ≤ 256 parameters.
BN_TWIN_WIDTH = 8
BN_OPTIONS = {m: {**o, "max_dense": 256} for m, o in SWEEP_OPTIONS.items()}
DIAGONAL_MEASURES = ("trace", "norm_flat")


def sweep_options(model, base: dict | None = None) -> dict:
    """``base`` (default :data:`SWEEP_OPTIONS`) with the Hessian-diagonal measures' ``max_dense``
    raised to the largest parameter tensor of ``model`` outside ``nn.Linear`` and ``nn.Conv2d``
    (``groups=1``).

    ``nn.Linear`` and ``nn.Conv2d`` diagonals are exact from per-sample factors at any size (the
    Conv ones verified against Hessian-vector products; a rejection is listed in the measure's
    notes and the cell's). Every other tensor (a BatchNorm scale, a grouped conv kernel) is exact
    only as a dense block, and above ``max_dense`` falls back to Hutchinson, whose fixed probes are
    tied to coordinate indices: the estimate then moves under permutations and neuron-wise
    scalings that the exact diagonal is invariant to. Dense assembly needs no eigendecomposition,
    so covering those tensors is cheap. (Reparametrized tensors of the ``nonlinear`` column are
    not factored; above ``max_dense`` they get Hutchinson, and those cells are predicted to move.)
    """
    from coupled_curvature.numeric.factors.layers import is_factorable

    base = SWEEP_OPTIONS if base is None else base
    factored = {id(p) for m in model.modules() if is_factorable(m) for p in m.parameters(recurse=False)}
    largest = max((p.numel() for p in model.parameters() if id(p) not in factored), default=0)
    out = {m: dict(o) for m, o in base.items()}
    for m in DIAGONAL_MEASURES:
        opts = out.setdefault(m, {})
        opts["max_dense"] = max(int(opts.get("max_dense", 4096)), largest)
    return out


def resolve_symmetries(text: str | None, kind: str) -> list[str]:
    from coupled_curvature.numeric.studies.explorer import SYMMETRIES

    ok = APPLICABLE[kind]
    if not text or text == "all":
        return list(ok)
    names = parse_choices(text, SYMMETRIES, what="symmetry", example="--symmetries layer,perm", normalize=str,
                          valid_text="available: all, " + ", ".join(SYMMETRIES))
    bad = [s for s in names if s not in ok]
    if bad:
        why = {"bn": "it has no BatchNorm (use an mlp or mlp-bn arch)",
               "orthogonal": "mixing needs a deep linear net (use linear:WxD)", "gl": "mixing needs a deep linear net (use linear:WxD)"}
        reasons = "; ".join(f"{s}: {why.get(s, 'an unsupported layer sits between the weight layers')}" for s in bad)
        raise InvalidInputError(f"symmetry(ies) {', '.join(bad)} do not apply to arch {kind!r} ({reasons}); "
                                f"applicable: {', '.join(ok)}")
    return names


def bn_evidence(mx, target, *, seed: int, quick: bool) -> None:
    """Judge the ``bn`` cells predicted invariant that disagree at the run's eps as eps -> 0: re-run at
    eps ×1e4, ×1e3, ×1e2 (:func:`numeric.studies.explorer_eps.judge_bn_as_eps_vanishes`)."""
    from coupled_curvature.numeric.studies.explorer_eps import judge_bn_as_eps_vanishes
    from coupled_curvature.numeric.symmetries.homogeneous import weight_layers

    start = time.perf_counter()
    ev = judge_bn_as_eps_vanishes(mx, target, layer=len(weight_layers(target[0])) - 2, options=BN_OPTIONS,
                                  seed=seed, quick=quick)
    if ev is not None:
        say(f"bn: {len(ev.deviations)} invariant-predicted cell(s) judged as eps -> 0 (eps sweep)")
    mx.seconds += time.perf_counter() - start


def sharpness_twin(target, args: argparse.Namespace, *, quick: bool):
    """The radius sweep (raw ℓ2 and adaptive worst case) of the trained net and of its twin with the last hidden
    layer rescaled by 4 (the layer symmetry's own layer); three radii with ``quick``."""
    from coupled_curvature.numeric.studies.sharpness_twin import twin_curves
    from coupled_curvature.numeric.symmetries.homogeneous import weight_layers

    model, loss_fn, data, _ = target
    layer = len(weight_layers(model)) - 2
    say("radius sweep of the net and its layer-rescaled twin (raw and adaptive sharpness)")
    t = twin_curves(model, loss_fn, data, layer=layer, c=4.0, radii=(1e-3, 1e-2, 1e-1) if quick else None,
                    seed=args.seed, name=f"{args.arch} on {args.dataset}, {len(data[0])} samples, seed {args.seed}")
    return t


def _fill(files: dict[str, str], mx):
    """What ``explore --out`` writes into its (temporary) folder."""
    def fill(tmp: str) -> None:
        write_texts(tmp, files)
        os.mkdir(os.path.join(tmp, "figures"))
        figures(mx, Path(tmp) / "figures")
    return fill


# ---------------------------------------------------------------------------- terminal text

_SHORT = {"invariant": "i", "moves": "m", "degenerate": "d"}


def _dev(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def _matrix_table(mx, width: int) -> list[str]:
    """The invariance matrix as compact cells (``3.7e+01 m``, ``*`` on a disagreement) under short
    symmetry headers, with its legend said once below; split into panels beyond ``width``."""
    def mark(c) -> str:
        return _SHORT[c.predicted] + ("→0" if c.eps_limit is not None else "") + ("" if c.agrees else "*")

    rows = [[m] + [f"{_dev(c.deviation)} {mark(c)}" for c in (mx.cell(m, s) for s in mx.symmetries)]
            for m in mx.measures]
    legend = ("cell: max relative deviation over the sweep, then the prediction (i invariant, m moves, "
              "d degenerate: the measure is identically 0 or undefined on the blocks, T10; i→0 invariant "
              "as BatchNorm eps -> 0, judged on the eps table below); "
              "* marks a cell that disagrees with its prediction (listed above)")
    return [table(["measure", *mx.symmetries], rows, align="l" + "l" * len(mx.symmetries), width=width),
            *wrap(legend, width)]


def _tolerances(mx, width: int) -> list[str]:
    """The tolerances of 'invariant' cells that are not the fixed 1e-9, the reason's shared words
    said once."""
    cells = [c for c in mx.cells if c.predicted == "invariant" and c.tolerance is not None and c.tolerance != 1e-9]
    out = wrap("tolerances of 'invariant' cells: 1e-9 relative unless listed"
               + ("" if cells else " (none listed)"), width)
    if not cells:
        return out
    common = os.path.commonprefix([c.tolerance_reason for c in cells]) if len(cells) > 1 else ""
    common = common[:common.rfind(" ") + 1] if " " in common else ""
    unclosed = common.count("(") > common.count(")")  # the shared words open a parenthesis

    def detail(reason: str) -> str:
        rest = reason[len(common):].strip()
        return rest[:-1] if unclosed and rest.endswith(")") else rest

    rows = [[f"{c.measure} × {c.symmetry}", f"≤ {c.tolerance:.1e}", detail(c.tolerance_reason)] for c in cells]
    out.append(table(["cell", "tolerance", "detail" if common else "why"], rows, align="lrl", width=width))
    if common:
        out += wrap(f"detail: {common.strip()} …{')' if unclosed else ''}", width)
    return out


def _eps_table(mx, width: int) -> list[str]:
    ev = mx.eps_sweep
    if ev is None:
        return []
    names = list(ev.deviations)
    rows = [[f"{eps:.0e}", _dev(ev.gaps[i]), *(_dev(ev.deviations[m][i]) for m in names)]
            for i, eps in enumerate(ev.eps)]
    rows.append(["slope", "", *("—" if ev.slopes[m] is None else f"{ev.slopes[m]:.2f}" for m in names)])
    head = ("BatchNorm eps evidence: the bn cells predicted invariant that exceed their tolerance at the "
            "run's eps, re-measured with every BatchNorm eps set to each value (same weights); an eps "
            "effect falls ∝ eps (log–log slope 1), and the fit must predict the run's deviation")
    return [*wrap(head, width), table(["eps", "fn gap", *names], rows, width=width), ""]


def _dinh_table(mx, width: int) -> str:
    """The Dinh et al. α-scale demonstration: raw sharpness beside the invariant measures at each α of
    the layer sweep, and the spread max/min over α; empty without a ``layer`` column."""
    if "layer" not in mx.values:
        return ""
    vals = mx.values["layer"]
    xs = sorted({x for x, _ in next(iter(vals.values()))})
    rows = []
    for m in DINH:
        if m in vals:
            got = [dict(vals[m]).get(x) for x in xs]
            finite = [abs(v) for v in got if v]
            ratio = max(finite) / min(finite) if finite and min(finite) > 0 else float("nan")
            rows.append([m, *map(_dev, got), f"{ratio:.3g}"])
    head = "Dinh demonstration: α-scale map W_l -> αW_l, W_{l+1} -> W_{l+1}/α at the trained minimum"
    return "\n".join([*wrap(head, width), table(["measure", *(f"α={x:g}" for x in xs), "max/min"], rows,
                                                 width=width)])


def render_terminal(mx, width: int) -> str:
    """What ``ccurv explore`` prints (and writes to ``matrix.txt`` at width 100): disagreements,
    the matrix with its legend, tolerances, the BatchNorm eps evidence, the Dinh table, the notes
    (wrapped, each once) and the time per measure; no line wider than ``width``.

    >>> from coupled_curvature.numeric.studies.explorer import Cell, Matrix
    >>> cells = [Cell("D", "layer", 3e-16, "invariant", "T3", True), Cell("D", "neuron", 0.93, "moves", "T5", True)]
    >>> text = render_terminal(Matrix(["D"], ["layer", "neuron"], cells, {}, {}, 1.0, {"D": 0.5}), 60)
    >>> print("\\n".join(text.splitlines()[5:7]))
    measure  layer      neuron
    D        3.0e-16 i  9.3e-01 m
    >>> max(len(line) for line in text.splitlines()) <= 60
    True
    """
    dis = mx.disagreements
    lines = [f"=== DISAGREEMENTS ({len(dis)}) ==="]
    for c in dis:
        text = f"{c.measure} × {c.symmetry}: deviation {_dev(c.deviation)}, predicted {c.predicted} ({c.reason})"
        lines += wrap(f"{text} {c.note}".rstrip(), width, indent="  - ")
    if not dis:
        lines.append("  none")
    agree = sum(c.agrees for c in mx.cells)
    lines += ["", *wrap("Invariance matrix: max relative deviation over the sweep, prediction, agreement", width),
              *_matrix_table(mx, width), *_tolerances(mx, width),
              f"agreement: {agree}/{len(mx.cells)} cells ({100.0 * agree / max(len(mx.cells), 1):.1f}%)", ""]
    lines += _eps_table(mx, width)
    dinh = _dinh_table(mx, width)
    lines += [dinh, ""] if dinh else []
    lines += ["notes:", *bullets(mx.notes, width)]
    total = sum(mx.measure_seconds.values()) or 1.0
    shares = [f"  {m:15s} {t:7.1f}s  {100 * t / total:5.1f}%"
              for m, t in sorted(mx.measure_seconds.items(), key=lambda kv: -kv[1])]
    lines += ["", f"sweep time {mx.seconds:.1f}s; time per measure:", *shares]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- command


def explore(args: argparse.Namespace):
    """Build, train and sweep; returns the Matrix and the text report."""
    from coupled_curvature.commands.explore_attention import check_attention_arch, explore_attention

    if check_attention_arch(args):
        return explore_attention(args)
    import torch

    from coupled_curvature.numeric.measures import registry as M
    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.studies.explorer import invariance_matrix
    from coupled_curvature.numeric.models.factory import build_for, parse_arch
    from coupled_curvature.numeric.models.training import fit

    kind, hidden = parse_arch(args.arch)
    if kind not in APPLICABLE:
        raise InvalidInputError(f"explore does not take arch kind {kind!r}; use one of {', '.join(APPLICABLE)}")
    measures = M.select(split_list(args.measures or "all"))
    symmetries = resolve_symmetries(args.symmetries, kind)
    if kind == "cnn" and args.dataset != "digits":
        raise InvalidInputError("arch cnn needs the 8×8 images of --dataset digits")
    data = load(args.dataset, seed=args.seed, image=kind == "cnn")
    n = min(args.samples, len(data.X_train))
    Xs, ys = data.X_train[:n], data.y_train[:n]
    loss_fn = torch.nn.CrossEntropyLoss()
    targets: dict[str, tuple[torch.nn.Module, Callable, object, bool]] = {}
    if kind != "mlp-bn":
        say(f"training {args.arch} on {args.dataset} ({args.epochs} epochs, seed {args.seed})")
        model = build_for(kind, hidden, data, seed=args.seed)
        fit(model, data.X_train, data.y_train, epochs=args.epochs, seed=args.seed)
        model.eval()
        targets["*"] = (model, loss_fn, (Xs, ys), False)
    if "bn" in symmetries or kind == "mlp-bn":
        twin = [min(h, BN_TWIN_WIDTH) for h in hidden]
        say(f"training the BatchNorm twin mlp-bn:{twin[0]}x{len(twin)} (eps={args.bn_eps:g}, batch statistics)")
        bn = build_for("mlp-bn", twin, data, seed=args.seed, bn_eps=args.bn_eps)
        fit(bn, data.X_train.reshape(len(data.X_train), -1), data.y_train, epochs=args.epochs, seed=args.seed)
        bn.train()
        entry = (bn, loss_fn, (Xs.reshape(n, -1), ys), True)
        targets["bn"] = entry
        targets.setdefault("*", entry)
    options = sweep_options(targets["*"][0]) if kind != "mlp-bn" else SWEEP_OPTIONS
    mx = invariance_matrix(targets, measures, symmetries, options=options, seed=args.seed,
                           quick=args.quick, progress=say,
                           target_options={"bn": BN_OPTIONS} if kind != "mlp-bn" else {"*": BN_OPTIONS})
    if "bn" in symmetries:
        bn_evidence(mx, targets["bn"], seed=args.seed, quick=args.quick)
    if "layer" in symmetries and kind != "mlp-bn":
        mx.sharpness_twin = sharpness_twin(targets["*"], args, quick=args.quick)
    notes = [
        f"arch {args.arch}, dataset {args.dataset}, {n} training samples, float64, seed {args.seed}; "
        "symmetries act on the last hidden layer",
        "cost control: D⁺, D·D⁺, the Newton decrement and the Laplace log det are computed on blocks of "
        "≤ 1024 parameters only (a 4096-parameter block needs a ~15 s dense eigendecomposition per evaluation)",
        "trace and normalized flatness: exact (per-sample Kronecker factors of nn.Linear, verified per-sample "
        "Gauss–Newton factors of nn.Conv2d, dense blocks "
        f"≤ {options['trace']['max_dense']} for any other tensor or a rejected factorization) except on "
        f"reparametrized (nonlinear) blocks > {options['trace']['max_dense']}, where Hutchinson with 8 fixed-seed "
        "probes per block is used (those cells are predicted to move)",
    ]
    if "bn" in symmetries or kind == "mlp-bn":
        notes.append(
            f"bn column: BatchNorm twin of width {BN_TWIN_WIDTH} with eps={args.bn_eps:g} (torch requires eps > 0 "
            "in train mode; the symmetry is exact only as eps -> 0); no Kronecker factors under batch statistics, "
            "so pseudo-inverse measures, log det, trace and normalized flatness use dense blocks ≤ 256 "
            "(Hutchinson, 8 probes per block, above: per-block probes scale exactly with a uniform block scaling)")
    notes += [
        "tolerance for 'invariant' cells: 1e-9 relative, except for pseudo-inverse measures (D⁺, D·D⁺, "
        "Newton decrement), whose float64 value is known only to ε₆₄·κ_b (κ_b = max|λ|/min kept |λ| of "
        "the block, or the least-squares sensitivity κ_LS on the Newton factor route; max over the sweep): "
        "each block is judged against max(1e-9, ε₆₄·κ_b); the tolerance used is listed per cell",
        "Newton decrement: on Linear/Conv tensors whose per-sample Gauss–Newton factor H_bb = BᵀB, g_b = Bᵀs "
        "is verified against exact Hessian-vector products and the gradient, gᵀH⁺g = ‖P_range(B) s‖² by "
        "least squares on B (singular values below √ε₆₄·σ_max, i.e. Hessian eigenvalues below ε₆₄·λ_max, count as zero), exactly invariant under any invertible block map (T11 with "
        "g ∈ range(H)); elsewhere the pseudo-inverse with relative cutoff pinv_rtol=1e-10, which is "
        "covariant only under conformal maps (non-uniform scalings move genuine eigenvalues across the cutoff)",
    ]
    if mx.sharpness_twin is not None:
        t = mx.sharpness_twin
        notes.append(f"radius sweep (figure sharpness_twin): the net and its twin with layer {t.layer} rescaled by "
                     f"c = {t.c:g}, {len(t.raw[0].radii)} log-spaced radii, same seed: largest relative gap between "
                     f"the curves, raw ℓ2 {t.raw_gap:.1e} (shifts), adaptive {t.adaptive_gap:.1e} (coincide)")
    gaps = "; ".join(f"{s}: {max(g for _, g in v):.1e}" for s, v in mx.gaps.items() if v)
    notes.append(f"function gap (max over the sweep): {gaps}")
    mx.notes = notes
    return mx, render_terminal(mx, terminal_width())


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "explore", run, HELP, DESCRIPTION)
    add_net(p, f"KIND:WIDTHxDEPTH with KIND one of {', '.join(APPLICABLE)}, e.g. {', '.join(ARCHS)}; or a tiny "
            "transformer gpt2-tiny, bert-tiny, encoder-layer or mha (attention symmetries qk_conformal, qk_general, "
            "vo, head_perm, norm_scale; --epochs Adam steps on 8 seeded token sequences)")
    p.add_argument("--symmetries", default="all", help="comma list of layer,neuron,perm,bn,orthogonal,gl,nonlinear,loss or all (the applicable ones)")
    p.add_argument("--measures", default="all", help="comma list of measure names or all")
    p.add_argument("--out", default=None, help="folder for matrix.{txt,md,html,json}, dinh.txt and figures/")
    p.add_argument("--json", default=None, help="also write the JSON cells here")
    add_seed(p, "seed for data split, training and the sweeps")
    p.add_argument("--epochs", type=nonnegative, default=30, help="training epochs (Adam, lr 3e-3, batch 128)")
    p.add_argument("--samples", type=count, default=512, help="training samples the measures use")
    p.add_argument("--bn-eps", type=positive_float, default=1e-12, help="BatchNorm eps of the bn twin (>0)")
    p.add_argument("--quick", action="store_true", help="one sweep point per symmetry")


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_folder(args.out, "explore")  # before any training
    if args.json is not None:
        check_file(args.json)
    start = time.perf_counter()
    mx, text = explore(args)
    seconds = time.perf_counter() - start
    print(text)
    saved = render_terminal(mx, 100)  # matrix.txt: the 100-column rendering, whatever the terminal
    payload = {"cells": [c.to_dict() for c in mx.cells], "seconds": seconds,
               "measure_seconds": mx.measure_seconds, "notes": mx.notes,
               "function_gaps": {s: v for s, v in mx.gaps.items()}}
    if mx.eps_sweep is not None:
        ev = mx.eps_sweep
        payload["bn_eps_sweep"] = {"eps": ev.eps, "function_gap": ev.gaps, "deviations": ev.deviations,
                                   "slopes": ev.slopes}
    if mx.sharpness_twin is not None:
        t = mx.sharpness_twin
        payload["sharpness_twin"] = {
            "layer": t.layer, "c": t.c, "function_gap": t.function_gap, "raw_gap": t.raw_gap,
            "adaptive_gap": t.adaptive_gap, "radii": list(t.raw[0].radii),
            **{f"{kind}_{who}": list(getattr(t, kind)[i].values) for kind in ("raw", "adaptive")
               for i, who in enumerate(("net", "twin"))}}
    blob = json_text(payload)
    if args.out is not None:
        write_folder(args.out, "explore", _fill({"matrix.txt": saved + "\n", "matrix.md": render_markdown(mx),
                                                 "matrix.html": render_html(mx), "matrix.json": blob,
                                                 "dinh.txt": _dinh_table(mx, 100) + "\n"}, mx))
        say(f"wrote {args.out}/ (matrix.txt, matrix.md, matrix.html, matrix.json, dinh.txt, figures/)")
    if args.json is not None:
        write_file(args.json, blob + "\n")
    say(f"explore finished in {seconds:.1f}s")
    return 0
