"""Benchmark: certified ball-arithmetic diagnostics (numeric/certify, python-flint's arb), issue 24.

Measured in one run and printed as measured (targets in brackets):
  * The 14 x 95 ReLU MLP (make_mlp(64, [95]*14, 10, seed=0), 125,695 parameters), at initialization and trained
    30 epochs (train_mlp, seed 0; training not timed), on the first 256 digits training samples: D of every block
    certified at 256 bits (certify(..., inverse=False)) [≤ 120 s on 2 cores]; the widest relative width of a D
    ball; the refusals (kinks) if any.
  * The same 502-parameter net as bench/bench_highprec.py (ReLU MLP 64-6-6-10 trained 30 epochs on digits,
    first 200 samples): certify(inverse=True) against the mpmath engine highprec.diagnose(inverse=True)
    at the same precision (256 bits = 77 digits), and the ratio of the median warm times [≥ 50x]; then both with
    inverse=False (D only); the load average; with --profile, where certify's time goes.
  * A residual CNN with eval BatchNorm (conv-BN-ReLU stem, one residual block with two conv-BN, max pool,
    adaptive average pool, Linear; 8 channels) on 64 digits images 1x8x8: certify(inverse=True), time.
Run (from the repository root): PYTHONPATH=src OMP_NUM_THREADS=1 python bench/bench_certify.py [--skip-mlp] [--skip-cnn]
[--repeats 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections.abc import Callable

import torch
from torch import nn

from bench_diagnose import median_time  # the benches' warm-up-then-median timer

from coupled_curvature.numeric.certify.api import certify
from coupled_curvature.numeric.highprec import engine as highprec
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.models.factory import make_mlp, randomize_batchnorm
from coupled_curvature.numeric.models.training import train_mlp

PREC = 256
TARGET_MLP_S, TARGET_RATIO = 120.0, 50.0


class ResidualCNN(nn.Module):
    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width)
        self.conv1, self.bn1 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)
        self.pool, self.avg, self.fc = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Linear(width, classes)

    def forward(self, x):
        h = torch.relu(self.bn0(self.stem(x)))
        h = torch.relu(h + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(h))))))
        return self.fc(torch.flatten(self.avg(self.pool(h)), 1))


def refusals(cert) -> str:
    bad = [b for b in cert if b.coupled is None]
    if not bad:
        return "none"
    return "; ".join(f"{b.name}: {b.reason}" for b in bad)


def dplus_summary(cert) -> str:
    got = [b for b in cert if b.inverse_coupled is not None]
    worst = max((b.inverse_coupled.relative_width for b in got), default=float("nan"))
    missing = "; ".join(f"{b.name}: {b.inverse_reason}" for b in cert if b.inverse_coupled is None) or "none"
    return f"D⁺ certified on {len(got)}/{len(cert)} blocks (widest relative width {worst:.1e}); missing: {missing}"


def profile(fn: Callable[[], object], top: int = 12) -> str:
    """The functions with the most own time in one call (cProfile)."""
    pr = cProfile.Profile()
    pr.runcall(fn)
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(top)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-mlp", action="store_true")
    ap.add_argument("--skip-cnn", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="runs per timing of the 502-parameter net (median)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of certify on the 502-parameter net")
    args = ap.parse_args()
    digits = load("digits", seed=0)
    ce = nn.CrossEntropyLoss()

    if not args.skip_mlp:
        data = (digits.X_train[:256], digits.y_train[:256])
        nets = [("at initialization", make_mlp(64, [95] * 14, 10, seed=0)),
                ("trained 30 epochs", train_mlp(digits, [95] * 14, seed=0, epochs=30).model)]
        for label, model in nets:
            n = sum(p.numel() for p in model.parameters())
            t0 = time.perf_counter()
            cert = certify(model, ce, data, prec=PREC, inverse=False)
            dt = time.perf_counter() - t0
            done = [b for b in cert if b.coupled is not None]
            widest = max((b.coupled.relative_width for b in done), default=float("nan"))
            print(f"126k MLP 64-[95x14]-10 {label} ({n} parameters), 256 samples, {PREC} bits: D of {len(done)}/{len(cert)} "
                  f"blocks certified in {dt:.1f} s (prec used {cert.prec_used}; widest relative width {widest:.1e}); "
                  f"target ≤ {TARGET_MLP_S:.0f} s: {'PASS' if dt <= TARGET_MLP_S else 'MISS'}; refusals: {refusals(cert)}")

    net = train_mlp(digits, (6, 6), seed=0, epochs=30).model
    data = (digits.X_train[:200], digits.y_train[:200])
    dps = int(PREC * 0.30103)  # 77 digits: the same precision as 256 bits
    for inverse, what, reps in ((True, "D and D⁺", args.repeats), (False, "D only", 3 * args.repeats)):
        certs: list = []
        t_cert = median_time(lambda inv=inverse, out=certs: out.append(certify(net, ce, data, prec=PREC, inverse=inv)),
                             reps)
        t_mp = median_time(lambda inv=inverse: highprec.diagnose(net, ce, data, dps=dps, inverse=inv, pinv_rtol=1e-10),
                           reps)
        cert = certs[-1]
        ratio = t_mp / t_cert
        print(f"502-parameter MLP, 200 samples, {what} (inverse={inverse} both): certify {t_cert:.3f} s ({PREC} bits) vs "
              f"mpmath engine {t_mp:.2f} s (dps {dps}), medians of {reps} after a warm-up: {ratio:.1f}x; target ≥ {TARGET_RATIO:.0f}x: "
              f"{'PASS' if ratio >= TARGET_RATIO else 'MISS'}")
        if inverse:
            print(f"  refusals: {refusals(cert)}; {dplus_summary(cert)}")
        if args.profile:
            print(profile(lambda inv=inverse: certify(net, ce, data, prec=PREC, inverse=inv)))
    print(f"  load average during the run (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")

    if args.skip_cnn:
        return
    torch.manual_seed(0)
    res = randomize_batchnorm(ResidualCNN().double(), seed=0).eval()
    img = load("digits", seed=0, image=True)
    data = (img.X_train[:64], img.y_train[:64])
    t0 = time.perf_counter()
    cert = certify(res, ce, data, prec=PREC)
    dt = time.perf_counter() - t0
    n = sum(p.numel() for p in res.parameters())
    print(f"residual CNN with eval BatchNorm ({n} parameters, {len(cert)} blocks), 64 images 1x8x8, {PREC} bits: "
          f"{dt:.1f} s (prec used {cert.prec_used}); refusals: {refusals(cert)}")
    print(f"  {dplus_summary(cert)}")


if __name__ == "__main__":
    main()
