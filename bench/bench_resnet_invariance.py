"""Benchmark: D, D⁺ and the spectral profile of all 62 blocks of a full-width ResNet-18 under rescalings
inside its residual branches (issue 15).

The net is bench/bench_resnet.py's ResNet-18 (torchvision's layout: 3x3 CIFAR stem, 4 stages of 2
BasicBlocks, 1x1-conv + BatchNorm downsample shortcuts, 10 classes; widths 64-128-256-512, 11.2 M
parameters, 62 tensors), float64, eval mode with randomized BatchNorm statistics
(numeric/models/factory.py: randomize_batchnorm), on random CIFAR-size 3x32x32 inputs. For the original
and for each function-preserving map of RESCALINGS it runs diagnose(method="gram") (D, D⁺ of every block)
and spectral_profile(method="gram") (the profile μ_w and ρ/‖g‖²), then prints per map:
  * the relative function gap max|f − f'| / max|f| on the samples;
  * the maximum over all 62 blocks (blocks matched by parameter name: every map keeps the names, and a
    permutation maps each block onto itself orthogonally, so D of a block is invariant as a scalar) of
    |ΔD|/D, of |ΔD⁺|/D⁺, and of |ΔD⁺|/D⁺ divided by the float64 conditioning bound ε/x_min
    (x_min = the block's smallest kept relative eigenvalue), the number of blocks whose rank moved;
  * the profile: blocks whose atom count moved, max |Δx| and max |Δp| over all atoms (x = λ/ρ and the
    weights p, both on an absolute scale of 1), max relative change of ρ/‖g‖²;
  * the raw quantities of the rescaled blocks: RQ and ρ = λ_max(H_bb) after / before, against T3's
    c^∓2, and the largest relative change of wᵀHw (T1: invariant);
  * the route per block (diagnose and profile), the wall time per model and the peak RSS
    (resource.getrusage: the process maximum so far).
With --control it also runs (--control-only: only it, after the original) a non-uniform (but compensated,
so function-preserving) neuron_rescale, which is not conformal on its blocks (T5): D must move there and
nowhere else.

Measured 2026-12-01, 8 samples, 1 thread, `nice`, on the shared 2-core machine with other jobs running
(load average 2.5-3.4, so the wall times vary by up to 2x between equal runs): 62/62 blocks on the Gram
route in diagnose and in the profile for every model; ranks {9: 1, 60: 2, 63: 4, 64: 4, 72: 51} of
m = N(C−1) = 72, smallest kept relative eigenvalue 1.4e-10 (above the 1e-10 cutoff by far more than its
rounding error, ~1e-15), no rank and
no atom count moved under any map; per model diagnose 124-232 s + profile 129-227 s; total 1052.8 s
(17.5 min, above the 10 min aimed at: the machine was loaded), peak RSS 5.21 GiB.
  layer_rescale(layer1.0.bn1 -> conv2, 3.7): function gap 4.5e-16; max over 62 blocks |ΔD|/D 2.2e-15,
    |ΔD⁺|/D⁺ 4.9e-09 (layer1.0.bn1.weight) = 2.16 ε/x_min; profile max |Δx| 1.3e-15, |Δp| 1.0e-11,
    |Δ(ρ/‖g‖²)|/(ρ/‖g‖²) 8.9e-16; RQ and λ_max x 0.073046 (bn1) and x 13.69 (conv2) = c^∓2.
  layer_rescale(layer3.1, 0.25) + uniform neuron_rescale(layer2.0, 1.9) + permute_neurons(layer4.0):
    function gap 5.1e-16; |ΔD|/D 8.3e-15; |ΔD⁺|/D⁺ 4.0e-09 = 1.35 ε/x_min; |Δx| 1.6e-15, |Δp| 8.5e-12,
    |Δ(ρ/‖g‖²)|/(ρ/‖g‖²) 1.3e-15; RQ and λ_max x 16 / 0.0625 and x 0.277008 / 3.61 as predicted, x 1 on
    the permuted blocks; wᵀHw unchanged on every rescaled block (≤ 3.8e-15, T1).
  CONTROL (--control-only, a second run: original again, then the control; total 543.9 s, 5.26 GiB):
    non-uniform neuron_rescale(layer2.1.bn1 -> conv2, a in [0.3, 3]): function gap 3.8e-16, but |ΔD|/D
    0.92 / 0.78 / 0.82 on layer2.1.bn1.weight / .bias / conv2.weight (7.8e-16 on the 59 other blocks),
    |ΔD⁺|/D⁺ up to 15 (6e11 ε/x_min), profile |Δx| up to 0.32 and ρ/‖g‖² up to 0.47; wᵀHw still
    unchanged.
Run (from the repository root):
  PYTHONPATH=src nice python bench/bench_resnet_invariance.py [--samples 8] [--threads 1] [--widths 64-128-256-512]
      [--control | --control-only] [--gram-memory BYTES]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from coupled_curvature.numeric.linalg.tolerance import EPS64, relative_change
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.profile import spectral_profile
from coupled_curvature.numeric.factors.gram import MEMORY_BUDGET
from coupled_curvature.numeric.models.factory import randomize_batchnorm
from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale, neuron_rescale, permute_neurons

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_resnet import ResNet18, rss_gib  # noqa: E402  (the one ResNet-18 definition of the benches)

CLASSES = 10


def _channels(net: nn.Module, bn: str) -> int:
    return net.get_submodule(bn).weight.numel()


def _scales(n: int) -> torch.Tensor:
    """A fixed positive non-uniform per-channel vector in [0.3, 3]."""
    return torch.tensor([0.3 + 2.7 * ((7 * i) % 11) / 10 for i in range(n)], dtype=torch.float64)


def _reversed(n: int) -> list[int]:
    return list(range(n))[::-1]


# name -> (map, {block: predicted factor of RQ}); factor None: RQ must not move (a permutation)
def rescalings(net: nn.Module) -> dict[str, tuple]:
    c1, c2 = 3.7, 0.25
    a = ("layer1.0.bn1", "layer1.0.conv2")
    b = ("layer3.1.bn1", "layer3.1.conv2")
    p = ("layer4.0.conv1", "layer4.0.conv2")
    return {
        f"layer_rescale({a}, {c1})": (
            lambda m: layer_rescale(m, a, c1),
            {f"{a[0]}.weight": c1**-2, f"{a[0]}.bias": c1**-2, f"{a[1]}.weight": c1**2}),
        f"layer_rescale({b}, {c2}) + uniform neuron_rescale(layer2.0.bn1 -> conv2, 1.9) + "
        f"permute_neurons({p}, reversed)": (
            lambda m: permute_neurons(
                neuron_rescale(layer_rescale(m, b, c2), ("layer2.0.bn1", "layer2.0.conv2"),
                               [1.9] * _channels(m, "layer2.0.bn1")),
                p, _reversed(_channels(m, "layer4.0.bn1"))),
            {f"{b[0]}.weight": c2**-2, f"{b[0]}.bias": c2**-2, f"{b[1]}.weight": c2**2,
             "layer2.0.bn1.weight": 1.9**-2, "layer2.0.bn1.bias": 1.9**-2, "layer2.0.conv2.weight": 1.9**2,
             "layer4.0.conv1.weight": None, "layer4.0.bn1.weight": None, "layer4.0.bn1.bias": None,
             "layer4.0.conv2.weight": None}),
    }


def control(net: nn.Module) -> tuple[str, tuple]:
    a = ("layer2.1.bn1", "layer2.1.conv2")
    return (f"CONTROL non-uniform neuron_rescale({a}, a in [0.3, 3])",
            (lambda m: neuron_rescale(m, a, _scales(_channels(m, a[0]))),
             {f"{a[0]}.weight": 0.0, f"{a[0]}.bias": 0.0, f"{a[1]}.weight": 0.0}))


def measure(model: nn.Module, X, y, memory: int) -> tuple:
    loss = nn.CrossEntropyLoss()
    t = time.perf_counter()
    d = diagnose(model, loss, (X, y), method="gram", gram_memory=memory)
    t_d = time.perf_counter() - t
    t = time.perf_counter()
    p = spectral_profile(model, loss, (X, y), method="gram", gram_memory=memory)
    return d, p, t_d, time.perf_counter() - t


def _max(values) -> float:
    values = [v for v in values if v is not None]
    return max(values) if values else float("nan")


def profile_change(a, b) -> tuple[list[str], float, float, float]:
    """(blocks whose atom count moved, max |Δx|, max |Δp| over the others, max rel. change of ρ/‖g‖²)."""
    moved, dx, dp, lr = [], 0.0, 0.0, 0.0
    for u, v in zip(a, b):
        lr = max(lr, relative_change(u.lambda_ratio, v.lambda_ratio) or 0.0)
        if u.rel_eigs.size != v.rel_eigs.size:
            moved.append(u.name)
            continue
        dx = max(dx, float(np.abs(u.rel_eigs - v.rel_eigs).max()))
        dp = max(dp, float(np.abs(u.weights - v.weights).max()))
    return moved, dx, dp, lr


def report(label: str, d0, p0, d1, p1, raw: dict, gap: float, times: tuple) -> None:
    assert d0.names() == d1.names() == p0.names() == p1.names()
    dD = {b.name: relative_change(b.coupled, e.coupled) for b, e in zip(d0, d1)}
    dP = {b.name: relative_change(b.inverse_coupled, e.inverse_coupled) for b, e in zip(d0, d1)}
    bound = {b.name: EPS64 / b.min_kept_rel_eig for b in d0 if b.min_kept_rel_eig}
    ranks = [b.name for b, e in zip(d0, d1) if b.rank != e.rank]
    moved, dx, dp, lr = profile_change(p0, p1)
    untouched = [n for n in dD if n not in raw]
    print(f"{label}")
    print(f"  function gap max|Δf|/max|f| = {gap:.1e}; diagnose {times[0]:.1f} s, profile {times[1]:.1f} s, "
          f"peak RSS so far {rss_gib():.2f} GiB")
    print(f"  over all {len(dD)} blocks: max |ΔD|/D = {_max(dD.values()):.1e} "
          f"(untouched blocks {_max(dD[n] for n in untouched):.1e}); max |ΔD⁺|/D⁺ = {_max(dP.values()):.1e} "
          f"(at {max(dP, key=lambda n: dP[n] or 0.0)}); max (|ΔD⁺|/D⁺)/(ε/x_min) = "
          f"{_max(dP[n] / bound[n] for n in bound if dP[n] is not None):.2f}; rank moved on {len(ranks)} block(s)"
          + (f": {', '.join(ranks)}" if ranks else ""))
    print(f"  profile: atom count moved on {len(moved)} block(s){': ' + ', '.join(moved) if moved else ''}; "
          f"max |Δx| = {dx:.1e}, max |Δp| = {dp:.1e}, max |Δ(ρ/‖g‖²)|/(ρ/‖g‖²) = {lr:.1e}")
    for name, factor in raw.items():
        b, e = d0[name], d1[name]
        rq, rho = e.rayleigh / b.rayleigh, p1[name].radius / p0[name].radius
        want = "unchanged" if factor is None else ("T5: not conformal" if factor == 0.0 else f"c^∓2 = {factor:.6g}")
        print(f"    {name:26s} RQ x {rq:.6g}, λ_max x {rho:.6g} [{want}]; |ΔwᵀHw|/wᵀHw = "
              f"{relative_change(b.wHw, e.wHw):.1e}, |ΔD|/D = {dD[name]:.1e}, |ΔD⁺|/D⁺ = {dP[name]:.1e}")


def routes(d, p) -> str:
    return (f"diagnose {dict(collections.Counter(b.method for b in d))}, "
            f"profile {dict(collections.Counter(b.route for b in p))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8, help="random 3x32x32 inputs (8)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    ap.add_argument("--widths", default="64-128-256-512", help="stage widths (64-128-256-512)")
    ap.add_argument("--control", action="store_true", help="also the non-uniform neuron_rescale control")
    ap.add_argument("--control-only", action="store_true", help="the control alone (with the original)")
    ap.add_argument("--gram-memory", type=int, default=MEMORY_BUDGET, help="bytes of B rows held at once")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    widths = tuple(int(w) for w in args.widths.split("-"))
    torch.manual_seed(0)
    net = randomize_batchnorm(ResNet18(widths, CLASSES).double()).eval()
    g = torch.Generator().manual_seed(1)
    X = torch.randn(args.samples, 3, 32, 32, generator=g, dtype=torch.float64)
    y = torch.randint(0, CLASSES, (args.samples,), generator=g)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); ResNet-18 widths {widths}, "
          f"{sum(p.numel() for p in net.parameters()):,} parameters, {len(list(net.parameters()))} tensors, "
          f"{args.samples} samples 3x32x32, {CLASSES} classes, float64, eval mode; pinv_rtol 1e-10")
    start = time.perf_counter()
    d0, p0, t_d, t_p = measure(net, X, y, args.gram_memory)
    print(f"original: diagnose {t_d:.1f} s, profile {t_p:.1f} s, peak RSS so far {rss_gib():.2f} GiB; "
          f"routes: {routes(d0, p0)}")
    print(f"  ranks: {dict(sorted(collections.Counter(b.rank for b in d0).items()))} (m = N(C−1) = "
          f"{args.samples * (CLASSES - 1)}); smallest kept relative eigenvalue over blocks "
          f"{min(b.min_kept_rel_eig for b in d0 if b.min_kept_rel_eig):.1e}")
    maps = {} if args.control_only else rescalings(net)
    if args.control or args.control_only:
        maps.update([control(net)])
    for label, (transform, raw) in maps.items():
        moved = transform(net)
        with torch.no_grad():
            f0, f1 = net(X), moved(X)
        gap = float((f0 - f1).abs().max() / f0.abs().max())
        d1, p1, t_d, t_p = measure(moved, X, y, args.gram_memory)
        report(label, d0, p0, d1, p1, raw, gap, (t_d, t_p))
        print(f"  routes: {routes(d1, p1)}")
    print(f"total {time.perf_counter() - start:.1f} s, peak RSS {rss_gib():.2f} GiB")


if __name__ == "__main__":
    main()
