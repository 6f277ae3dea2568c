"""Benchmark: exact D⁺ of every block of a ResNet-18 by the Gram route (numeric/factors/gram.py).

Measured in one run and printed as measured (the targets in brackets):
  * ResNet-18 with torchvision's layer structure (BasicBlock, BatchNorm, 1x1-conv downsample shortcuts,
    3x3 stem without max-pooling for CIFAR-size 32x32 inputs, 10 classes; 62 parameter tensors), eval
    mode, float64, 32 random samples: one float64 gradient; D only (diagnose(inverse=False)); D and D⁺
    of all 62 blocks by diagnose(method="gram") [≤ 600 s on 2 cores, ≤ 12 GiB]; peak RSS
    (resource.getrusage, the process maximum so far); the ratios to the gradient; the route per block.
  * The 14 x 95 ReLU MLP (make_mlp(64, [95]*14, 10), 125,695 parameters) on full digits (1797 samples):
    D⁺ by the Gram route on --mlp-blocks (default: all 30), against the dense route's 335 s of the README
    (bench/bench_inverse.py) [≥ 10x faster]. Here every block has n_b ≤ m = 1797·9 rows of B, so the
    Gram route forms BᵀB (n_b x n_b), the same size as the dense route's block: no gain is expected.
The ResNet-18 is defined here because torchvision's CPU wheels do not import with this machine's CPU
torch build (torch 2.13.0+cpu); when torchvision imports, torchvision.models.resnet18(num_classes=10) is
measured too (its 7x7 stem and max-pooling, on the same 32x32 inputs).
With --quick: a ResNet-18 of widths 8-16-32-64 on 8 samples and the MLP's first 3 blocks (a minute).
Measured 2026-12-03 (load 1.0-1.3), 2 threads, --skip-mlp: gradient 1.471 s; D only 11.4 s = 7.8x as the process's first
call (warm calls 6.3-6.8 s); D and D⁺ by the Gram route 35.9 s = 24.4x, peak RSS 5.77 GiB, 62/62 gram (31 BᵀB, 31 G = BBᵀ,
the last stage's G from factored rows, numeric/factors/patch_gram.py); with 1 thread 57.6 s, 5.33 GiB.
Earlier, 2026-12-01 on the quiet 2-core machine, 2 threads (--skip-mlp): ResNet-18, 32 samples: gradient 1.812 s;
D only 8.0 s = 4.4x (all 62 blocks on the tangent route of numeric/factors/tangent_forms.py; 77.2 s = 45.5x
by one Hessian-vector product per block before it); D and D⁺ of all 62 blocks by the Gram route 173.1 s
(95.5x), peak RSS 9.71 GiB; 62/62 blocks gram (31 BᵀB, 31 G = BBᵀ); max |ΔD|/D between the two runs 1.9e-15;
the three 2,359,296-parameter blocks have rank 288 = 32·9. --quick: Gram against dense D⁺ on the 54 blocks
<= max_dense: max relative difference 2.6e-10, equal ranks. MLP (--mlp-blocks 2.weight,2.bias): 50.8 s, 4.02
GiB for one 9025-parameter block and its bias (BᵀB side): slower than the dense route's ~24 s per such
block (bench/bench_inverse.py), so the >= 10x MLP target is missed; it is out of reach for any exact route
on this machine (see docs/benchmarks.md).
On one NVIDIA H200 (--device cuda --repeat-d 3 --threads 8, torch 2.11.0+cu130, 2026-12-04): gradient 0.028 s; D only 2.7 s
at the first call (CUDA warm-up), 0.32 s = 11.7x warm; D and D⁺ by the Gram route 3.7 s, 62/62 gram, ΔD 4.5e-16;
torchvision's resnet18 there: gradient 0.010 s, D 0.1 s, D and D⁺ 0.7 s.
torchvision.models.resnet18(num_classes=10), measured in a separate venv with torch 2.14.1 and torchvision
0.29.1 (CPU, 1 thread, load 3-5, alone in its process): gradient 0.536 s; D only 3.0 s = 5.7x (62/62 blocks
tangent; against the Hessian-vector-product route wᵀHw and D agree to 2.0e-15 on 8 samples); D and D⁺ by
the Gram route 154.5 s, peak RSS 9.54 GiB, 62/62 gram (31 BᵀB, 31 G = BBᵀ).
Run (from the repository root): PYTHONPATH=src nice python bench/bench_resnet.py [--quick] [--samples 32] [--threads 2] [--mlp-blocks all|NAME,...]
     [--skip-mlp] [--skip-resnet] [--gram-memory BYTES] [--device cuda] [--repeat-d N]
"""

from __future__ import annotations

import argparse
import collections
import resource
import time

import torch
from torch import nn

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.factors.gram import MEMORY_BUDGET
from coupled_curvature.numeric.models.factory import randomize_batchnorm
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.models.factory import make_mlp

README_DENSE_MLP_S = 335.0


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision's ResNet-18 layout (layers of 2 BasicBlocks) with the CIFAR 3x3 stem."""

    def __init__(self, widths: tuple[int, ...] = (64, 128, 256, 512), classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        cin, layers = widths[0], []
        for i, w in enumerate(widths):
            layers.append(nn.Sequential(BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gradient_s(model: nn.Module, loss_fn, X, y, repeats: int = 3) -> float:
    device = str(X.device)
    times = []
    for _ in range(repeats + (1 if device.startswith("cuda") else 0)):  # on CUDA the first one warms up
        model.zero_grad(set_to_none=True)
        _sync(device)
        t = time.perf_counter()
        loss_fn(model(X), y).backward()
        _sync(device)
        times.append(time.perf_counter() - t)
    times = times[-repeats:]
    model.zero_grad(set_to_none=True)
    return sorted(times)[len(times) // 2]


def routes(d) -> str:
    count = collections.Counter(b.method for b in d)
    sides = collections.Counter(n.split("(")[1].split(" from")[0] for b in d for n in b.notes
                                if n.startswith("D⁺ by the exact Gram route"))
    why = collections.Counter(n.split(": ", 1)[1][:90] for b in d for n in b.notes if "Gram route does not apply" in n)
    out = ", ".join(f"{k}: {v}" for k, v in sorted(count.items()))
    if sides:
        out += " (Gram sides: " + ", ".join(f"{k} {v}" for k, v in sorted(sides.items())) + ")"
    for reason, n in why.items():
        out += f"\n      fallback x{n}: {reason}"
    return out


def run_model(label: str, model: nn.Module, n: int, side: int, memory: int, dense_check: bool = False,
              device: str = "cpu", repeat_d: int = 1) -> None:
    model = randomize_batchnorm(model.double()).eval().to(device)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, side, side, generator=g, dtype=torch.float64).to(device)
    y = torch.randint(0, 10, (n,), generator=g).to(device)
    loss_fn = nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())
    n_tensors = len(list(model.parameters()))
    grad_s = gradient_s(model, loss_fn, X, y)
    print(f"{label}: {n_params:,} parameters, {n_tensors} tensors, {n} samples, float64, eval mode, on {device}")
    print(f"  one float64 gradient:         {grad_s:8.3f} s")
    times = []
    for _ in range(max(1, repeat_d)):
        _sync(device)
        t = time.perf_counter()
        d_only = diagnose(model, loss_fn, (X, y), inverse=False)
        _sync(device)
        times.append(time.perf_counter() - t)
    d_s = times[0]
    print(f"  D only (inverse=False):       {d_s:8.1f} s = {d_s / grad_s:7.1f} x gradient   "
          f"peak RSS so far {rss_gib():.2f} GiB   [D: <= 20x]")
    if len(times) > 1:
        warm = sorted(times[1:])[(len(times) - 1) // 2]
        print(f"  D only, median of {len(times) - 1} warm call(s): {warm:8.2f} s = {warm / grad_s:7.1f} x gradient")
    taken = collections.Counter(b.wHw_route for b in d_only)
    print(f"  wᵀHw route per block (D only): {', '.join(f'{k}: {v}' for k, v in sorted(taken.items()))}")
    for block, reason in list(d_only.meta.get("tangent_refused", {}).items())[:3]:
        print(f"      refused {block}: {reason[:90]}")
    _sync(device)
    t = time.perf_counter()
    full = diagnose(model, loss_fn, (X, y), method="gram", gram_memory=memory)
    _sync(device)
    f_s = time.perf_counter() - t
    print(f"  D and D⁺, method='gram':      {f_s:8.1f} s = {f_s / grad_s:7.1f} x gradient   "
          f"peak RSS so far {rss_gib():.2f} GiB   [<= 600 s, <= 12 GiB]")
    print(f"  route per block: {routes(full)}")
    missing = [b.name for b in full if b.inverse_coupled is None]
    worst = max((abs(b.coupled - d_only[b.name].coupled) / abs(d_only[b.name].coupled) for b in full
                 if b.coupled is not None and d_only[b.name].coupled), default=0.0)
    undefined = [b.name for b in full if b.coupled is None]
    if undefined:
        print(f"  D undefined on {len(undefined)} block(s) (g = 0 or w = 0): {', '.join(undefined[:4])}")
    print(f"  blocks without D⁺: {len(missing)}; max |ΔD|/D between the two runs: {worst:.1e}")
    if dense_check:
        t = time.perf_counter()
        dense = diagnose(model, loss_fn, (X, y), method="dense")
        both = [b for b in dense if b.inverse_coupled is not None and full[b.name].inverse_coupled is not None]
        gap = max((abs(full[b.name].inverse_coupled - b.inverse_coupled) / abs(b.inverse_coupled) for b in both
                   if b.inverse_coupled), default=0.0)
        print(f"  Gram against the dense route on the {len(both)} block(s) <= max_dense: max |ΔD⁺|/D⁺ {gap:.1e}, "
              f"ranks equal on {sum(b.rank == full[b.name].rank for b in both)} ({time.perf_counter() - t:.1f} s)")
    top = sorted(full, key=lambda b: -b.size)[:3]
    for b in top:
        print(f"    {b.name:28s} n_b = {b.size:9,d}  D = {b.coupled}  D⁺ = {b.inverse_coupled}  rank {b.rank}")


def run_mlp(blocks: str, memory: int) -> None:
    data = load("digits")
    X = torch.cat([data.X_train, data.X_test])
    y = torch.cat([data.y_train, data.y_test])
    net = make_mlp(64, [95] * 14, 10)
    loss_fn = nn.CrossEntropyLoss()
    names = [n for n, _ in net.named_parameters()]
    chosen = names if blocks == "all" else [b for b in blocks.split(",") if b]
    grad_s = gradient_s(net, loss_fn, X, y, repeats=5)
    print(f"14x95 MLP: {sum(p.numel() for p in net.parameters()):,} parameters, {len(names)} tensors, "
          f"{X.shape[0]} samples (full digits), at initialisation")
    print(f"  one float64 gradient:         {grad_s:8.3f} s")
    t = time.perf_counter()
    d = diagnose(net, loss_fn, (X, y), method="gram", blocks={b: [b] for b in chosen}, max_dense=10000,
                 gram_memory=memory)
    s = time.perf_counter() - t
    n_b = sum(b.size for b in d)
    print(f"  D and D⁺ of {len(chosen)} block(s) ({n_b:,} parameters), method='gram': {s:8.1f} s = "
          f"{s / grad_s:8.1f} x gradient   peak RSS so far {rss_gib():.2f} GiB")
    print(f"  dense route of the README, all 30 blocks (trained net): {README_DENSE_MLP_S:.0f} s; "
          f"ratio README-dense / this run: {README_DENSE_MLP_S / s:.2f} (this run covers "
          f"{n_b / 125695:.0%} of the parameters)   [>= 10x]")
    print(f"  route per block: {routes(d)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="narrow ResNet-18 on 8 samples, 3 MLP blocks")
    ap.add_argument("--samples", type=int, default=None, help="ResNet samples (32; 8 with --quick)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    ap.add_argument("--mlp-blocks", default=None, help="'all' or a comma list (all; 3 with --quick)")
    ap.add_argument("--skip-mlp", action="store_true")
    ap.add_argument("--dense-check", action="store_true", help="also the dense route, to compare D⁺ (on with --quick)")
    ap.add_argument("--skip-resnet", action="store_true")
    ap.add_argument("--gram-memory", type=int, default=MEMORY_BUDGET, help="bytes of B rows held at once")
    ap.add_argument("--device", default="cpu", help="where the ResNet runs, e.g. cuda (cpu); the timings synchronize")
    ap.add_argument("--repeat-d", type=int, default=1, help="time D only this many times (warm calls after the first)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n = args.samples or (8 if args.quick else 32)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, gram_memory {args.gram_memory / 2**30:.2f} GiB")
    if not args.skip_resnet:
        widths = (8, 16, 32, 64) if args.quick else (64, 128, 256, 512)
        torch.manual_seed(0)
        run_model(f"ResNet-18 (bench's own, widths {widths})", ResNet18(widths), n, 32, args.gram_memory,
                  dense_check=args.quick or args.dense_check, device=args.device, repeat_d=args.repeat_d)
        try:
            import torchvision
        except Exception as e:  # noqa: BLE001 - any import failure means: not available here
            print(f"torchvision.models.resnet18: not measured (torchvision does not import: {type(e).__name__})")
        else:
            if not args.quick:
                torch.manual_seed(0)
                run_model("torchvision.models.resnet18(num_classes=10)",
                          torchvision.models.resnet18(num_classes=10), n, 32, args.gram_memory, device=args.device)
    if not args.skip_mlp:
        run_mlp(args.mlp_blocks or ("0.weight,0.bias,2.weight" if args.quick else "all"), args.gram_memory)


if __name__ == "__main__":
    main()
