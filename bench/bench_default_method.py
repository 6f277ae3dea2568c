"""Benchmark: ``diagnose``'s default ``method``: ``"gram"`` against ``"dense"``.

For each model (trained here, deterministically, float64, on the training split), ``diagnose`` runs
with ``method="dense"`` and ``method="gram"``; the two are timed alternately in one process, on one
thread, and the median of ``--repeats`` runs is printed with the ratio gram / dense. Agreement is
the largest relative difference of ``D⁺`` over the blocks both compute (ranks that differ are
listed); "D⁺ d/g" counts the blocks with a ``D⁺`` under each method (dense gives ``None`` above
``max_dense``); ``D`` must agree bit for bit (both take ``wᵀHw`` from the same Hessian-vector products).
A block the Gram route refuses is listed with its reason (e.g. an "indefinite" output Hessian on a
well-trained cross-entropy net). For the small piecewise-linear MLPs a 50-digit reference
(:mod:`coupled_curvature.numeric.highprec`, same cutoff 1e-10) says which of the two is closer
to the exact ``D⁺``.

"gram blk" counts the blocks the Gram route took. Torch and numpy's BLAS run on one thread each.

Measured on 2 shared cores (CPU-time ratios gram / dense): 1.1-1.9x on the small nets; 0.52x on
2560-parameter blocks where G = BBᵀ is the smaller side; 8.3x above max_dense, where dense has no D⁺
on those blocks. D⁺ agreed to 4e-11 or better on well-conditioned blocks, and to the conditioning
floor ε/λ_min,kept elsewhere (3e-8, 7e-7). A first run found every net with training loss ≲ 1e-4
refused as "indefinite" output Hessian, which was round-off: S_n's entries carry absolute error
~ε·ω (ω one sample's weight in the loss), above the old cut 64ε·max|μ| when every sample is
confident. With the cut at 64ε·max(max|μ|, ω) (numeric/factors/outputs.py), --quick on 2026-12-01:
Gram takes every block of the trained wine and breast-cancer nets (1.1-1.6x the dense CPU time), and
against 50 digits its D⁺ is the more accurate: 2.1e-13 / 5.9e-8 / 3.2e-6 off after 300 / 1000 /
3000 epochs, against dense's 5.8e-12 / 2.6e-7 / 2.2e-4. So the default became "gram".

Run: python bench/bench_default_method.py [--repeats 5] [--quick] [--no-reference]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
from threadpoolctl import threadpool_info, threadpool_limits
from torch import nn

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.models.factory import build_for, make_mlp
from coupled_curvature.numeric.models.training import fit

LOSS = nn.CrossEntropyLoss()


@dataclass
class Case:
    label: str
    model: nn.Module
    X: torch.Tensor
    y: torch.Tensor
    reference: bool  # a 50-digit reference is affordable (small bias-ful ReLU MLP)


def _trained(label, model, data, epochs, seed=0, samples=None, reference=False, lr=3e-3):
    X, y = data.X_train, data.y_train
    fit(model, X, y, epochs=epochs, seed=seed, lr=lr)
    model.eval()
    if samples is not None:
        X, y = X[:samples], y[:samples]
    return Case(label, model, X, y, reference)


def cases(quick: bool) -> list[Case]:
    wine, bc = load("wine"), load("breast_cancer")
    out = [
        _trained("wine ReLU 13-6-5-3, 300 ep", make_mlp(13, [6, 5], 3, seed=0), wine, 300, reference=True),
        _trained("wine ReLU 13-6-5-3, 1000 ep", make_mlp(13, [6, 5], 3, seed=0), wine, 1000, reference=True),
        _trained("wine ReLU 13-6-5-3, 3000 ep", make_mlp(13, [6, 5], 3, seed=0), wine, 3000, reference=True),
        _trained("wine ReLU 13-16-16-3, 1000 ep", make_mlp(13, [16, 16], 3, seed=1), wine, 1000),
        _trained("breast_cancer ReLU 30-16-16-2, 1000 ep", make_mlp(30, [16, 16], 2, seed=0), bc, 1000),
        _trained("wine tanh 13-8-8-3, 500 ep", make_mlp(13, [8, 8], 3, activation="tanh", seed=0), wine, 500),
        _trained("wine mlp-bn 13-8-8-3 (eval), 300 ep", build_for("mlp-bn", (8, 8), wine, seed=0), wine, 300),
    ]
    if not quick:
        digits, images = load("digits"), load("digits", image=True)
        out += [
            _trained("digits ReLU 64-32-32-10, 200 ep", make_mlp(64, [32, 32], 10, seed=0), digits, 200),
            _trained("digits cnn:8,16, 60 ep", build_for("cnn", (8, 16), images, seed=0), images, 60),
            # blocks of 1600-2560 parameters; 160 samples so that G = BBᵀ (1440 x 1440) is the smaller side
            _trained("digits ReLU 64-40-40-10, 200 ep, 160 samples", make_mlp(64, [40, 40], 10, seed=0), digits, 200,
                     samples=160),
            # the same after 20 epochs (training loss ~1e-1: the Gram route applies), and a 96-wide net whose
            # 9216-parameter middle block is above max_dense (dense: D⁺ None there; Gram: exact)
            _trained("digits ReLU 64-40-40-10, 20 ep, 160 samples", make_mlp(64, [40, 40], 10, seed=0), digits, 20,
                     samples=160),
            _trained("digits ReLU 64-96-96-10, 20 ep, 160 samples", make_mlp(64, [96, 96], 10, seed=0), digits, 20,
                     samples=160),
        ]
    return out


def rel(a, b) -> float:
    if a is None or b is None:
        return float("nan")
    scale = max(abs(float(a)), abs(float(b)))
    return 0.0 if scale == 0.0 else abs(float(a) - float(b)) / scale


def median_times(case: Case, repeats: int) -> tuple[dict, dict, dict]:
    """Medians of wall time and of this process's CPU time per method (on one thread the CPU time is
    what the work costs; the wall time also counts waiting for a core on a shared machine)."""
    run = {m: (lambda m=m: diagnose(case.model, LOSS, (case.X, case.y), method=m)) for m in ("dense", "gram")}
    results = {m: f() for m, f in run.items()}  # warm-up, and the results compared
    wall: dict[str, list[float]] = {"dense": [], "gram": []}
    cpu: dict[str, list[float]] = {"dense": [], "gram": []}
    for i in range(repeats):
        for m in (("dense", "gram") if i % 2 == 0 else ("gram", "dense")):  # alternate the order
            t0, c0 = time.perf_counter(), time.process_time()
            run[m]()
            wall[m].append(time.perf_counter() - t0)
            cpu[m].append(time.process_time() - c0)
    return ({m: statistics.median(v) for m, v in wall.items()}, {m: statistics.median(v) for m, v in cpu.items()},
            results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="only the wine and breast_cancer nets")
    ap.add_argument("--no-reference", action="store_true", help="skip the 50-digit references")
    args = ap.parse_args()
    torch.set_num_threads(1)
    _limits = threadpool_limits(1)  # numpy's BLAS/LAPACK too (the Gram spectra), kept for the whole run
    blas = sorted({p["num_threads"] for p in threadpool_info()})
    print(f"threads: torch {torch.get_num_threads()}, BLAS/OpenMP pools {blas}, repeats: {args.repeats} "
          "(medians, dense and gram alternated)")
    rows, details = [], []
    for case in cases(args.quick):
        with torch.no_grad():
            train_loss = float(LOSS(case.model(case.X), case.y))
        wall, cpu, res = median_times(case, args.repeats)
        dense, gram = res["dense"], res["gram"]
        n_gram = sum(b.method == "gram" for b in gram)
        covered = {m: sum(b.inverse_coupled is not None for b in res[m]) for m in ("dense", "gram")}
        worst, worst_block, rank_diff, d_diff = 0.0, "-", [], 0.0
        for bd, bg in zip(dense, gram):
            d_diff = max(d_diff, rel(bd.coupled, bg.coupled) if bd.coupled is not None else 0.0)
            if bd.inverse_coupled is None or bg.inverse_coupled is None:
                continue
            if bd.rank != bg.rank:
                rank_diff.append(f"{bd.name} {bd.rank}/{bg.rank}")
            r = rel(bd.inverse_coupled, bg.inverse_coupled)
            if r > worst:
                worst, worst_block = r, bd.name
        ref = ""
        if case.reference and not args.no_reference:
            from coupled_curvature.numeric.highprec.engine import diagnose as hp_diagnose

            exact = hp_diagnose(case.model, LOSS, (case.X, case.y), dps=50, pinv_rtol="1e-10")
            err = {m: max(rel(b.inverse_coupled, e.inverse_coupled) for b, e in zip(res[m], exact))
                   for m in ("dense", "gram")}
            ref = f"vs 50 digits: dense {err['dense']:.1e}, gram {err['gram']:.1e}"
        max_size = max(b.size for b in dense)
        rows.append((case.label, sum(b.size for b in dense), max_size, len(case.X), train_loss,
                     wall, cpu, f"{n_gram}/{len(gram)}",
                     f"{covered['dense']}/{covered['gram']}", worst, worst_block, d_diff))
        refused = sorted({n for b in gram for n in b.notes if n.startswith("the Gram route does not apply")})
        details.append((case.label, refused, rank_diff, ref))

    print("times in ms; cpu = this process's CPU time (one thread), wall = elapsed; ratio = gram / dense")
    head = (f"{'model':46s} {'params':>6s} {'max blk':>7s} {'N':>5s} {'train loss':>10s} {'dense cpu':>9s} "
            f"{'gram cpu':>9s} {'ratio':>5s} {'dense wall':>10s} {'gram wall':>9s} {'ratio':>5s} {'gram blk':>8s} "
            f"{'D⁺ d/g':>6s} {'max rel ΔD⁺':>11s} {'(block)':9s} {'max rel ΔD':>10s}")
    print(head)
    for (label, n, mx, N, loss, wall, cpu, ng, cov, worst, wb, dd) in rows:
        print(f"{label:46s} {n:6d} {mx:7d} {N:5d} {loss:10.2e} {cpu['dense'] * 1e3:9.1f} {cpu['gram'] * 1e3:9.1f} "
              f"{cpu['gram'] / cpu['dense']:5.2f} {wall['dense'] * 1e3:10.1f} {wall['gram'] * 1e3:9.1f} "
              f"{wall['gram'] / wall['dense']:5.2f} {ng:>8s} {cov:>6s} {worst:11.1e} {wb:9s} {dd:10.1e}")
    print()
    for label, refused, rank_diff, ref in details:
        extra = [f"Gram refused: {'; '.join(refused)}" if refused else "Gram applied on every block"]
        if rank_diff:
            extra.append(f"ranks differ (dense/gram): {', '.join(rank_diff)}")
        if ref:
            extra.append(ref)
        print(f"{label}: " + " | ".join(extra))


if __name__ == "__main__":
    main()
