"""Benchmark: D⁺ of every per-head block of small GPT-2 configs (issue 33, item 7).

Measured in one run and printed as measured (targets in brackets):
  * GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32), float64, eval mode, random init,
    a causal LM loss (position t predicts token t + 1) on --seqs sequences of --tokens tokens: D⁺ of every per-head
    block (blocks="head": q, k, v of 64×16 + 16 entries, o of 16×64) by the exact dense route, which for head
    blocks is the per-head projection route (numeric/factors/head_hessians.py: each H_bb from Hessians at the
    attention projections' outputs per sequence, then its eigendecomposition), the median of --repeats runs
    [≤ 20 s in all]; then --old of the same blocks by the route it replaced (H_bb assembled from one batched
    Hessian-vector product per entry on the retained graph; the new route switched off), the ratio of the
    per-block times and the largest relative D⁺ difference between the two; the
    time per block kind and per route, and the whole-tensor blocks (c_attn.weight 64×192, c_proj.weight 64×64)
    by method="auto" (dense up to max_dense, Krylov above) for comparison.
  * With --big: n_layer=4, n_embd=128 (per-head q/k/v blocks of 128×32 + 32 = 4,128 entries, o of 32×128) by
    method="auto" at the default max_dense=4096: a q/k/v block's Hessian lies in R^32 ⊗ span(rows of its
    projection input X̃ = [X, 1]), at most 64 tokens here, so the per-head route keeps it as H_bb = PMPᵀ (exact)
    and eigendecomposes M, at most 32·64 = 2,048 rows; planning sends the block to that dense route because
    2,048 ≤ max_dense (numeric/core/planning.py). It prints how many of the measured blocks got an exact D⁺ and
    the time per block; then --big-krylov of them by Krylov (method="krylov": D⁺ when converged, else None with
    the reason diagnose gives) and --big-exact by the full 4,128-row eigendecomposition (projection switched
    off, max_dense raised), timed, with the largest relative D⁺ difference from the projected route.
--limit N diagnoses only N head blocks, evenly spread over the list (q, k, v, o of each layer in turn); the time
of all of them is then the measured time per block times their number, printed as an extrapolation, never as a
measurement.
Run (from the repository root): PYTHONPATH=src OMP_NUM_THREADS=1 python bench/bench_attention.py [--limit N] [--big]
[--big-krylov N] [--big-exact N]

Measured (2 shared CPU cores, load average 2.1, 1 torch thread; 4 x 16 tokens; --skip-whole): all 32 head
blocks by the per-head projection route in 14.1, 12.1 and 12.6 s, median 12.6 s (0.39 s per block), every one
with a D⁺: the 20 s target is met. The old route on 2 of them (q[0] of each layer): 20.0 s, 10.0 s per block,
so all 32 would take about 320 s (extrapolated); ratio 25x per block; their D⁺ agree to 1.4e-12 relative. Why
it is faster: the old route takes one product through the whole graph per block entry (1,040 per block, ~33,000
in all); the new one takes T·E = 1,024 products per attention module through the layers above it (G at c_proj's
output, shared by the module's 12 q/k/v and 4 o blocks, with a tangent on every sequence at once) plus
products through attention alone (J and the second derivative of <∂L/∂A, A>), and contracts with the
projection inputs. In a separate profiled run of the route alone (load ~2.8), those 2,048 products took 8.3 s
(GELU's second derivative in float64 dominates them); one eigendecomposition of 1,040 x 1,040 takes about 0.11 s
(3.5 s for 32). Not re-measured here: the
whole-tensor comparison (earlier: 132 s for the 4 attention tensors, c_attn.weight by Krylov not converged).

--big before the projection (2026-12-05, --limit 8 --big-exact 2 --repeats 1 --old 0 --skip-whole, load average
2.9-3.6 from other jobs, 1 torch thread): 4 x 128 (810,240 parameters, 64 head blocks; the 8 measured are q[0] and
v[0] of each layer): at max_dense=4096 all 8 went to Krylov, 3.7 s per block (310-318 products each), none
converged (estimated relative errors 3e8 to 5e9), so every one was D⁺ = None with that reason; the exact per-head
route on 2 of them with max_dense raised to 4128: 73.9 s per block, of which one 4,128 x 4,128 eigendecomposition
took 18.3 s (2,048: 2.0 s).

--big with the projection (2026-12-05, 1 torch thread, no other jobs): all 64 head blocks (--limit 0, load average
1.3 at the start) at the default max_dense: 64 of 64 with an exact D⁺ (48 q/k/v blocks projected to M of at most
2,048 rows, the 16 o blocks of 4,096 entries dense as before) in 272.8 s, 4.3 s per block; D⁺ of q[0] in layers 0
and 2 are 0.033682 and -0.38207, the values the full route gave before. With --limit 8 --big-krylov 8
--big-exact 2 (load average 0.4-0.9): the 8 blocks in 83.1 s, 10.4 s per block (each attention module's products
at its output are shared by its blocks, and here only 2 of its 16 are asked for), 8 of 8 exact; Krylov on the
same 8: 4.5 s per block, 0 of 8 converged (errors 3e8 to 5e9, as before), all None with the reason; the full
4,128-row eigendecomposition (projection off) on 2 of them: 32.7 s per block, D⁺ equal to the projected route's to
4.6e-12 relative. Where the time goes now (cProfile, one block, load 2.1: 41.3 s): 39 s in the batched
second-derivative products of the route (T·E = 2,048 at c_proj's output, plus those through attention), 0.7 s
in the eigendecomposition of M (against 18 s for the 4,128 x 4,128 block). The same run's 2 x 64 part: 8 head
blocks in 7.6 s (0.95 s per block); all 32 in 13.3 s (0.42 s per block) in the --limit 0 run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

import torch
from torch import nn

from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.head_blocks import head_blocks

TARGET_S = 20.0
CE = nn.CrossEntropyLoss()


def lm_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return CE(out[:, :-1].reshape(-1, out.shape[-1]), y[:, 1:].reshape(-1))


def gpt2(layers: int, width: int) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=100, n_positions=32, bos_token_id=0,
                     eos_token_id=0)
    return GPT2LMHeadModel(cfg).double().eval()


def _kind(name: str) -> str:
    return name.rpartition("[")[0].rpartition(".")[2] if name.endswith("]") else "tensor"


def spread(blocks: dict, limit: int) -> dict:
    """``limit`` blocks evenly spread over ``blocks`` (all of them when ``limit`` is 0)."""
    if not limit or limit >= len(blocks):
        return blocks
    items = list(blocks.items())
    return dict(items[i * len(items) // limit] for i in range(limit))


def run(label: str, model: nn.Module, data, blocks: dict, **kw) -> tuple[float, object]:
    t0 = time.perf_counter()
    d = diagnose(model, lm_loss, data, blocks=blocks, progress=False, **kw)
    dt = time.perf_counter() - t0
    routes = sorted({b.method.value for b in d})
    print(f"  {label}: {len(blocks)} block(s) in {dt:.1f} s ({dt / max(len(blocks), 1):.2f} s per block), "
          f"route(s) {', '.join(routes)}")
    return dt, d


def show(d, big: bool) -> None:
    for b in d:
        if b.inverse_coupled is None:  # diagnose gives an unconverged Krylov block None, with the reason
            why = b.dplus_missing or "no value"
            print(f"    {b.name:42s} {b.size:6d}  D = {b.coupled!s:>12.12}  D⁺ = None ({why})")
        else:
            it = f", {b.krylov_iterations} Krylov products" if b.krylov_iterations else ""
            print(f"    {b.name:42s} {b.size:6d}  D = {b.coupled:12.5g}  D⁺ = {b.inverse_coupled:12.5g}  "
                  f"[{b.method.value}{it}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", type=int, default=4, help="sequences in the probe batch")
    ap.add_argument("--tokens", type=int, default=16, help="tokens per sequence (≤ 32)")
    ap.add_argument("--limit", type=int, default=0, help="diagnose only the first N head blocks (0: all)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the head blocks (the median is quoted)")
    ap.add_argument("--old", type=int, default=2, help="head blocks timed by the old route (0: none)")
    ap.add_argument("--skip-whole", action="store_true", help="skip the whole-tensor comparison")
    ap.add_argument("--big", action="store_true", help="also the 4-layer, 128-wide model (Krylov)")
    ap.add_argument("--krylov-max-iter", type=int, default=300, help="Lanczos products per block (--big)")
    ap.add_argument("--big-krylov", type=int, default=0,
                    help="with --big: this many head blocks also by Krylov (method='krylov')")
    ap.add_argument("--big-exact", type=int, default=0,
                    help="with --big: this many head blocks also by the full eigendecomposition (projection off)")
    args = ap.parse_args()
    X = torch.randint(0, 100, (args.seqs, args.tokens), generator=torch.Generator().manual_seed(0))
    data = (X, X)
    print(f"GPT-2 LM loss on {args.seqs} x {args.tokens} tokens; {torch.get_num_threads()} torch thread(s), "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}")
    model = gpt2(2, 64)
    heads = {b: ms for b, ms in head_blocks(model).blocks.items() if b.endswith("]")}
    todo = spread(heads, args.limit)
    print(f"2 layers x 64 wide ({sum(p.numel() for p in model.parameters()):,} parameters), {len(heads)} head blocks")
    times = []
    for _ in range(max(args.repeats, 1)):
        dt, d = run("head blocks, method='dense' (per-head projection route)", model, data, todo, method="dense",
                    max_dense=1100)
        times.append(dt)
    total = statistics.median(times)
    print(f"  median of {len(times)}: {total:.1f} s ({total / len(todo):.3f} s per block)")
    by_kind: dict[str, list[float]] = {}
    for b in d:
        by_kind.setdefault(_kind(b.name), []).append(b.size)
    print("    kinds: " + ", ".join(f"{k}: {len(v)} of {v[0]} entries" for k, v in by_kind.items()))
    show(d, False)
    if len(todo) < len(heads):
        est = total / len(todo) * len(heads)
        print(f"  extrapolated (not measured): all {len(heads)} head blocks ≈ {est:.0f} s")
    else:
        est = total
    print(f"  target ≤ {TARGET_S:.0f} s: {'met' if est <= TARGET_S else f'missed by {est / TARGET_S:.1f}x'}")
    if args.old:
        old = spread(heads, args.old)
        with mock.patch("coupled_curvature.numeric.core.hvp.head_block_requests", lambda *a, **k: {}):
            dt_old, d_old = run("the same blocks assembled from Hessian-vector products (route switched off)", model,
                                data, old, method="dense", max_dense=1100)
        new = {b.name: b for b in d}
        gap = max(abs(b.inverse_coupled - new[b.name].inverse_coupled) / max(abs(b.inverse_coupled), 1e-300)
                  for b in d_old)
        per_old, per_new = dt_old / len(old), total / len(todo)
        print(f"  old route {per_old:.2f} s per block, new {per_new:.3f} s per block: ratio {per_old / per_new:.0f}x "
              f"(all {len(heads)} by the old route ≈ {per_old * len(heads):.0f} s, extrapolated); largest relative "
              f"D⁺ difference on these {len(old)}: {gap:.1e}")
    if not args.skip_whole:
        whole = {n: [n] for n in (f"transformer.h.{i}.attn.{m}.weight" for i in range(2) for m in ("c_attn", "c_proj"))}
        _, dw = run("whole attention tensors, method='auto'", model, data, whole, method="auto")
        show(dw, False)
    if args.big:
        big = gpt2(4, 128)
        heads = {b: ms for b, ms in head_blocks(big).blocks.items() if b.endswith("]")}
        todo = spread(heads, args.limit)
        print(f"4 layers x 128 wide ({sum(p.numel() for p in big.parameters()):,} parameters), {len(heads)} head blocks")
        dt_p, dp = run("head blocks, method='auto', default max_dense (the projected dense route)", big, data, todo,
                       method="auto", krylov_max_iter=args.krylov_max_iter)
        show(dp, True)
        exact_n = sum(1 for b in dp if b.inverse_coupled is not None and b.method.value == "dense")
        print(f"  {exact_n} of {len(todo)} with an exact D⁺ (dense), {dt_p / len(todo):.1f} s per block" + (
              f"; all {len(heads)} ≈ {dt_p / len(todo) * len(heads):.0f} s (extrapolated linearly: an overstatement, "
              "the products at each module's output are shared by all its head blocks)" if len(todo) < len(heads)
              else ""))
        if args.big_krylov:
            some = spread(todo, args.big_krylov)
            dt_k, dk = run("the same blocks by Krylov (method='krylov')", big, data, some, method="krylov",
                           krylov_max_iter=args.krylov_max_iter)
            show(dk, True)
            none = [b.name for b in dk if b.inverse_coupled is None]
            print(f"  Krylov: {len(some) - len(none)} of {len(some)} with a converged D⁺, {len(none)} None with the "
                  f"reason; {dt_k / len(some):.1f} s per block")
        if args.big_exact:
            exact = spread(todo, args.big_exact)
            size = max(b.size for b in dp if b.name in exact)
            with mock.patch("coupled_curvature.numeric.factors.head_hessians.row_basis", lambda X: None):
                dt_e, de = run(f"{len(exact)} of them with the projection switched off (the full {size:,}-row "
                               f"eigendecomposition, max_dense={size})", big, data, exact, method="dense",
                               max_dense=size)
            show(de, True)
            projected = {b.name: b for b in dp}
            gap = max(abs(b.inverse_coupled - projected[b.name].inverse_coupled) / abs(b.inverse_coupled)
                      for b in de)
            print(f"  full route: {dt_e / len(exact):.1f} s per block; largest relative D⁺ difference from the "
                  f"projected route: {gap:.1e}")

if __name__ == "__main__":
    main()
