"""``ccurv explore``: the invariance matrix of sharpness measures under reparameterizations.

Rows are measures, columns symmetries acting on the last hidden layer of a trained network;
each cell is the maximum relative deviation over a sweep of the symmetry's parameter, with the
theory's prediction (citing theorem ids T1–T12) and an agreement flag. The ``bn`` column runs on a
BatchNorm twin of an ``mlp`` arch (``Linear(bias=False) -> BatchNorm1d -> ReLU`` blocks, widths
capped at 8 so the acted-on blocks are dense, trained and measured in batch-statistics mode).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import time
from pathlib import Path

from coupled_curvature.commands._common import count, nonnegative, positive_float, say, seed
from coupled_curvature.errors import InvalidInputError
from coupled_curvature.output import check_file, check_folder, write_file, write_folder

ARCHS = ("mlp:64x3", "mlp-nobias:32x4", "cnn", "linear:16x3", "mlp-bn:32x3")
APPLICABLE = {
    "mlp": ("layer", "neuron", "perm", "bn", "nonlinear", "loss"),
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
    from torch import nn

    base = SWEEP_OPTIONS if base is None else base
    factored = {id(p) for m in model.modules()
                if type(m) is nn.Linear or (type(m) is nn.Conv2d and m.groups == 1)
                for p in m.parameters(recurse=False)}
    largest = max((p.numel() for p in model.parameters() if id(p) not in factored), default=0)
    out = {m: dict(o) for m, o in base.items()}
    for m in DIAGONAL_MEASURES:
        opts = out.setdefault(m, {})
        opts["max_dense"] = max(int(opts.get("max_dense", 4096)), largest)
    return out


DINH = ("top_eig", "trace", "sam", "D", "Dplus", "adaptive_avg", "fisher_rao", "lambda")


def parse_arch(text: str) -> tuple[str, list[int]]:
    """``"mlp:64x3"`` -> ``("mlp", [64, 64, 64])``; ``"cnn"`` -> ``("cnn", [])``."""
    kind, _, shape = text.partition(":")
    if kind == "cnn" and not shape:
        return "cnn", []
    if kind in ("mlp", "mlp-nobias", "linear", "mlp-bn") and shape:
        try:
            width, depth = (int(v) for v in shape.split("x"))
        except ValueError:
            width = depth = 0
        if width > 0 and depth > 0:
            return kind, [width] * depth
    raise InvalidInputError(f"unknown arch {text!r}; available: {', '.join(ARCHS)} (any WIDTHxDEPTH)")


def build(kind: str, hidden: list[int], n_in: int, n_out: int, *, seed: int, bn_eps: float = 1e-12):
    import torch
    from torch import nn

    from coupled_curvature.numeric.training import make_mlp

    if kind in ("mlp", "mlp-nobias", "linear"):
        return make_mlp(n_in, hidden, n_out, bias=kind != "mlp-nobias",
                        activation="identity" if kind == "linear" else "relu", seed=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "cnn":
            return nn.Sequential(
                nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(16 * 2 * 2, n_out),
            ).to(torch.float64)
        layers: list[nn.Module] = []
        widths = [n_in, *hidden]
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b, bias=False), nn.BatchNorm1d(b, eps=bn_eps), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], n_out))
        return nn.Sequential(*layers).to(torch.float64)


def train(model, X, y, *, epochs: int, seed: int, lr: float = 3e-3, batch_size: int = 128):
    """Adam on cross-entropy, deterministic under ``seed`` (BatchNorm models stay in train mode)."""
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed + 1)
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=gen)
        for s in range(0, len(X), batch_size):
            idx = order[s:s + batch_size]
            if len(idx) < 2:
                continue
            opt.zero_grad()
            loss_fn(model(X[idx]), y[idx]).backward()
            opt.step()
    return model


def resolve_symmetries(text: str | None, kind: str) -> list[str]:
    from coupled_curvature.numeric.explore import SYMMETRIES

    ok = APPLICABLE[kind]
    if not text or text == "all":
        return list(ok)
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SYMMETRIES]
    if unknown:
        raise InvalidInputError(f"unknown symmetry(ies): {', '.join(unknown)}; available: all, {', '.join(SYMMETRIES)}")
    bad = [s for s in names if s not in ok]
    if bad:
        why = {"bn": "it has no BatchNorm (use an mlp or mlp-bn arch)",
               "orthogonal": "mixing needs a deep linear net (use linear:WxD)", "gl": "mixing needs a deep linear net (use linear:WxD)"}
        reasons = "; ".join(f"{s}: {why.get(s, 'an unsupported layer sits between the weight layers')}" for s in bad)
        raise InvalidInputError(f"symmetry(ies) {', '.join(bad)} do not apply to arch {kind!r} ({reasons}); "
                                f"applicable: {', '.join(ok)}")
    return [s for s in SYMMETRIES if s in names]


# ---------------------------------------------------------------------------- rendering


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.1e}"


def _mark(cell) -> str:
    short = {"invariant": "inv", "moves": "mov", "degenerate": "deg"}[cell.predicted]
    return f"{_fmt(cell.deviation)} {short} {'ok' if cell.agrees else 'NO'}"


def render_text(mx) -> str:
    lines = []
    dis = mx.disagreements
    lines.append(f"=== DISAGREEMENTS ({len(dis)}) ===")
    for c in dis:
        lines.append(f"  {c.measure} × {c.symmetry}: deviation {_fmt(c.deviation)}, predicted {c.predicted} "
                     f"({c.reason}) {c.note}")
    if not dis:
        lines.append("  none")
    lines.append("")
    head = ["measure"] + mx.symmetries
    rows = [head] + [[m] + [_mark(mx.cell(m, s)) for s in mx.symmetries] for m in mx.measures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines.append("Invariance matrix: max relative deviation over the sweep, prediction, agreement")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    lines.append("tolerances of 'invariant' cells (1e-9 unless listed):")
    for c in mx.cells:
        if c.predicted == "invariant" and c.tolerance is not None and c.tolerance != 1e-9:
            lines.append(f"  {c.measure} × {c.symmetry}: ≤ {c.tolerance:.1e} ({c.tolerance_reason})")
    agree = sum(c.agrees for c in mx.cells)
    lines.append(f"agreement: {agree}/{len(mx.cells)} cells ({100.0 * agree / max(len(mx.cells), 1):.1f}%)")
    return "\n".join(lines)


def render_markdown(mx) -> str:
    out = ["| measure | " + " | ".join(mx.symmetries) + " |", "|---" * (len(mx.symmetries) + 1) + "|"]
    for m in mx.measures:
        out.append(f"| {m} | " + " | ".join(_mark(mx.cell(m, s)) for s in mx.symmetries) + " |")
    return "\n".join(out) + "\n"


def render_html(mx) -> str:
    rows = []
    for m in mx.measures:
        tds = []
        for s in mx.symmetries:
            c = mx.cell(m, s)
            color = "#dfd" if c.agrees else "#fbb"
            tds.append(f'<td style="background:{color}" title="{html.escape(c.reason)}">{html.escape(_mark(c))}</td>')
        rows.append(f"<tr><th>{html.escape(m)}</th>{''.join(tds)}</tr>")
    head = "".join(f"<th>{html.escape(s)}</th>" for s in mx.symmetries)
    return ("<!doctype html><meta charset='utf-8'><title>invariance matrix</title>"
            f"<table border=1 cellpadding=4><tr><th>measure</th>{head}</tr>{''.join(rows)}</table>\n")


def render_eps(mx) -> str:
    ev = mx.eps_sweep
    if ev is None:
        return ""
    names = list(ev.deviations)
    lines = ["BatchNorm eps evidence: the bn column's disagreeing cells re-measured with every BatchNorm eps set to "
             "each value (same weights); an eps effect falls ∝ eps (log–log slope 1)",
             "eps".ljust(10) + "fn gap".rjust(10) + "".join(m.rjust(16) for m in names)]
    for i, eps in enumerate(ev.eps):
        lines.append(f"{eps:<10.0e}" + _fmt(ev.gaps[i]).rjust(10)
                     + "".join(_fmt(ev.deviations[m][i]).rjust(16) for m in names))
    lines.append("slope".ljust(10) + _fmt_slope(_slope_of(ev.eps, ev.gaps)).rjust(10)
                 + "".join(_fmt_slope(ev.slopes[m]).rjust(16) for m in names))
    return "\n".join(lines)


def _fmt_slope(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def _slope_of(xs, ys):
    from coupled_curvature.numeric.explore import _slope

    return _slope(xs, ys)


def bn_evidence(mx, target, *, seed: int, quick: bool) -> None:
    """Re-run the ``bn`` cells predicted invariant that disagree at eps ×1e4, ×1e2, ×1, ×1e-2 and
    annotate them with the log–log slope of deviation against eps (:func:`numeric.explore.eps_sweep`)."""
    from coupled_curvature.numeric.explore import batchnorm_eps, eps_sweep
    from coupled_curvature.numeric.symmetries import weight_layers

    bad = [c for c in mx.cells if c.symmetry == "bn" and c.predicted == "invariant" and not c.agrees]
    model, loss_fn, data, _ = target
    eps = batchnorm_eps(model)
    if not bad or eps is None:
        return
    say(f"bn: {len(bad)} invariant-predicted cell(s) disagree; eps sweep as evidence")
    values = [eps * f for f in (1e4, 1e2, 1.0, 1e-2)]
    start = time.perf_counter()
    ev = eps_sweep(model, loss_fn, data, [c.measure for c in bad], values,
                   layer=len(weight_layers(model)) - 2, options=BN_OPTIONS, seed=seed, quick=quick)
    mx.seconds += time.perf_counter() - start
    mx.eps_sweep = ev
    for c in bad:
        slope = ev.slopes[c.measure]
        last = ev.deviations[c.measure][-1]
        c.note = (f"eps-limited: deviation ∝ eps^{_fmt_slope(slope)} over eps {values[0]:.0e}…{values[-1]:.0e} "
                  f"(at eps={values[-1]:.0e}: {_fmt(last)}); the symmetry is exact only as eps -> 0")


def render_dinh(mx) -> str:
    if "layer" not in mx.values:
        return ""
    lines = ["Dinh demonstration: α-scale map W_l -> αW_l, W_{l+1} -> W_{l+1}/α at the trained minimum"]
    vals = mx.values["layer"]
    xs = sorted({x for x, _ in next(iter(vals.values()))})
    lines.append("measure".ljust(14) + "".join(f"α={x:g}".rjust(13) for x in xs) + "   max/min")
    for m in DINH:
        if m not in vals:
            continue
        d = dict(vals[m])
        got = [d.get(x) for x in xs]
        finite = [abs(v) for v in got if v]
        ratio = max(finite) / min(finite) if finite and min(finite) > 0 else float("nan")
        lines.append(m.ljust(14) + "".join(_fmt(v).rjust(13) for v in got) + f"   {ratio:.3g}")
    return "\n".join(lines)


def figures(mx, folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for sym, per in mx.values.items():
        fig, ax = plt.subplots(figsize=(7, 5))
        for m, pts in per.items():
            pts = sorted((x, abs(v)) for x, v in pts if v)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{sym} parameter")
        ax.set_ylabel("|measure| (per-block measures: mean |block value|)")
        ax.set_title(f"measures under the {sym} symmetry")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        name = f"{sym}.png"
        fig.savefig(folder / name, dpi=90)
        plt.close(fig)
        made.append(name)
    return made


def _fill(files: dict[str, str], mx):
    """What ``explore --out`` writes into its (temporary) folder."""
    def fill(tmp: str) -> None:
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        os.mkdir(os.path.join(tmp, "figures"))
        figures(mx, Path(tmp) / "figures")
    return fill


# ---------------------------------------------------------------------------- command


def explore(args: argparse.Namespace):
    """Build, train and sweep; returns the Matrix and the text report."""
    import torch

    from coupled_curvature.numeric import measures as M
    from coupled_curvature.numeric.datasets import load
    from coupled_curvature.numeric.explore import invariance_matrix

    kind, hidden = parse_arch(args.arch)
    measures = M.select(args.measures or "all")
    symmetries = resolve_symmetries(args.symmetries, kind)
    if kind == "cnn" and args.dataset != "digits":
        raise InvalidInputError("arch cnn needs the 8×8 images of --dataset digits")
    data = load(args.dataset, seed=args.seed, image=kind == "cnn")
    n = min(args.samples, len(data.X_train))
    Xs, ys = data.X_train[:n], data.y_train[:n]
    loss_fn = torch.nn.CrossEntropyLoss()
    targets = {}
    if kind != "mlp-bn":
        say(f"training {args.arch} on {args.dataset} ({args.epochs} epochs, seed {args.seed})")
        model = train(build(kind, hidden, data.n_features, data.n_classes, seed=args.seed),
                      data.X_train, data.y_train, epochs=args.epochs, seed=args.seed)
        model.eval()
        targets["*"] = (model, loss_fn, (Xs, ys), False)
    if "bn" in symmetries or kind == "mlp-bn":
        twin = [min(h, BN_TWIN_WIDTH) for h in hidden]
        say(f"training the BatchNorm twin mlp-bn:{twin[0]}x{len(twin)} (eps={args.bn_eps:g}, batch statistics)")
        bn = train(build("mlp-bn", twin, data.n_features, data.n_classes, seed=args.seed, bn_eps=args.bn_eps),
                   data.X_train.reshape(len(data.X_train), -1), data.y_train, epochs=args.epochs, seed=args.seed)
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
        f"bn column: BatchNorm twin of width {BN_TWIN_WIDTH} with eps={args.bn_eps:g} (torch requires eps > 0 "
        "in train mode; the symmetry is exact only as eps -> 0); no Kronecker factors under batch statistics, "
        "so pseudo-inverse measures, log det, trace and normalized flatness use dense blocks ≤ 256 "
        "(Hutchinson, 8 probes per block, above: per-block probes scale exactly with a uniform block scaling)",
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
    gaps = "; ".join(f"{s}: {max(g for _, g in v):.1e}" for s, v in mx.gaps.items() if v)
    notes.append(f"function gap (max over the sweep): {gaps}")
    text = "\n".join([render_text(mx), "", render_eps(mx), "", render_dinh(mx), "", "notes:"] + [f"  - {x}" for x in notes])
    total = sum(mx.measure_seconds.values()) or 1.0
    shares = "\n".join(f"  {m:15s} {t:7.1f}s  {100 * t / total:5.1f}%" for m, t in
                       sorted(mx.measure_seconds.items(), key=lambda kv: -kv[1]))
    text += f"\n\nsweep time {mx.seconds:.1f}s; time per measure:\n{shares}"
    mx.notes = notes
    return mx, text


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_folder(args.out, "explore")  # before any training
    if args.json is not None:
        check_file(args.json)
    start = time.perf_counter()
    mx, text = explore(args)
    seconds = time.perf_counter() - start
    print(text)
    payload = {"cells": [c.to_dict() for c in mx.cells], "seconds": seconds,
               "measure_seconds": mx.measure_seconds, "notes": mx.notes,
               "function_gaps": {s: v for s, v in mx.gaps.items()}}
    if mx.eps_sweep is not None:
        ev = mx.eps_sweep
        payload["bn_eps_sweep"] = {"eps": ev.eps, "function_gap": ev.gaps, "deviations": ev.deviations,
                                   "slopes": ev.slopes}
    blob = json.dumps(payload, indent=2)
    if args.out is not None:
        write_folder(args.out, "explore", _fill({"matrix.txt": text + "\n", "matrix.md": render_markdown(mx),
                                                 "matrix.html": render_html(mx), "matrix.json": blob,
                                                 "dinh.txt": render_dinh(mx) + "\n"}, mx))
        say(f"wrote {args.out}/ (matrix.txt, matrix.md, matrix.html, matrix.json, dinh.txt, figures/)")
    if args.json is not None:
        write_file(args.json, blob + "\n")
    say(f"explore finished in {seconds:.1f}s")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explore", help="invariance matrix of sharpness measures under reparameterizations")
    p.add_argument("--dataset", default="digits", choices=("digits", "breast_cancer", "wine"))
    p.add_argument("--arch", default="mlp:64x3", help=f"one of {', '.join(ARCHS)} (any WIDTHxDEPTH)")
    p.add_argument("--symmetries", default="all", help="comma list of layer,neuron,perm,bn,orthogonal,gl,nonlinear,loss or all (the applicable ones)")
    p.add_argument("--measures", default="all", help="comma list of measure names or all")
    p.add_argument("--out", default=None, help="folder for matrix.{txt,md,html,json}, dinh.txt and figures/")
    p.add_argument("--json", default=None, help="also write the JSON cells here")
    p.add_argument("--seed", type=seed, default=0, help="seed for data split, training and the sweeps")
    p.add_argument("--epochs", type=nonnegative, default=30, help="training epochs (Adam, lr 3e-3, batch 128)")
    p.add_argument("--samples", type=count, default=512, help="training samples the measures use")
    p.add_argument("--bn-eps", type=positive_float, default=1e-12, help="BatchNorm eps of the bn twin (>0)")
    p.add_argument("--quick", action="store_true", help="one sweep point per symmetry")
    p.set_defaults(func=run)
