"""Benchmark against curvlinops: D and D⁺ per tensor block, ours vs a Hessian operator per block.

Nets (ReLU MLPs, float64, trained briefly on the digits training split; see TRAINING) are measured on the
full digits set (1797 samples) as one batch, with mean cross-entropy:
  3x64   64-[64,64,64]-10       (13,130 parameters)
  14x95  64-[95 x 14]-10        (125,695 parameters)

Per tensor block:
  ours        diagnose(model, loss, (X, y), inverse=False)  -> wᵀHw, ‖g‖², D
              diagnose(..., inverse=True)                   -> wᵀH⁺w, D⁺  (dense, relative cutoff pinv_rtol=1e-10)
  curvlinops  HessianLinearOperator(model, loss, [that tensor], [(X, y)], check_deterministic=False,
              num_data=N): wᵀHw = w·(H @ w); ‖g‖² from one separate torch gradient of the loss;
              wᵀH⁺w = wᵀx with x from SciPy on H.to_scipy():
                minres(H, w, rtol=--solver-rtol, maxiter)      stopped early, in the peer's favour, at the first
                                                               iterate whose wᵀx is within --accuracy of ours
                lsmr(H, w, atol=btol=--solver-rtol, conlim=1/pinv_rtol, maxiter)   (minimum-norm solution)
Each method runs in its own subprocess (peak RSS per method; ru_maxrss), after a warm-up on a tiny net, and is
timed as the median of k runs. Targets: D >= 10x faster than curvlinops on 14x95; D⁺ >= 5x faster at equal
accuracy on 3x64 (judged on MINRES's time to the accuracy; a block it never reaches counts its whole run, so the
ratio is then a lower bound). Timings depend on load (the load average is printed; on a machine loaded beyond
its cores use --threads 1, as waiting OpenMP threads make 2 threads ~10x slower); CPU time is printed too, the
steadier measure there. Last measured 2026-12-06 on a quiet machine (torch 2.13.0, curvlinops 3.0.1, load
0.1 at start, medians of 7), D on 14x95, 1,797 samples: --threads 1, two runs, ours 0.40 / 0.37 s, curvlinops
1.78 / 1.70 s = 4.5x / 4.6x; --threads 2, ours 0.29 s, curvlinops 1.31 s = 4.5x wall, 4.7x CPU time. The 7.7x-10.7x
of 2026-12-05 came from load slowing curvlinops more than ours. 10x is missed: D is 11 cotangent-row passes (9 of
the cross-entropy factor, the sample-independence check, |r|) plus the gradient, and at one thread those passes
with their per-block contractions take about 0.22 s (profiled), more than a tenth of curvlinops' 1.78 s
(breakdown in docs/benchmarks.md).

Run:  python bench/bench_peers.py [--quick] [--samples N] [--threads 2] [--maxiter 1000] [--with-126k-inverse]
Needs the `bench` extra:  pip install '.[bench]'
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import torch

NETS = {"3x64": (64, 64, 64), "14x95": (95,) * 14, "1x16": (16,)}  # 1x16: a smoke test of the script only
TRAINING = {"3x64": 40, "14x95": 20, "1x16": 5}  # epochs; Adam lr 3e-3, batch 128, seed 0 (numeric.models.training.train_mlp)
PINV_RTOL = 1e-10
METHODS = ("ours_D", "cl_D", "ours_Dplus", "cl_Dplus")
INSTALL_HINT = "curvlinops is not installed: pip install '.[bench]'  (extra `bench` of coupled-curvature)"


# ----------------------------------------------------------------------------- data and nets


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    from coupled_curvature.numeric.models.datasets import load

    d = load("digits")
    return torch.cat([d.X_train, d.X_test]), torch.cat([d.y_train, d.y_test])


def _net(name: str) -> torch.nn.Sequential:
    from coupled_curvature.numeric.models.factory import make_mlp

    return make_mlp(64, NETS[name], 10, seed=0)


def _train(name: str, path: Path) -> dict:
    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.models.training import train_mlp

    t0 = time.perf_counter()
    r = train_mlp(load("digits"), hidden=NETS[name], epochs=TRAINING[name], seed=0)
    torch.save(r.model.state_dict(), path)
    return {"criterion": r.criterion + ", seed 0, digits training split", "train_acc": r.train_acc,
            "test_acc": r.test_acc, "train_loss": r.train_loss, "seconds": time.perf_counter() - t0,
            "params": sum(p.numel() for p in r.model.parameters())}


# ----------------------------------------------------------------------------- the four methods


def ours_D(model, X, y, ref, opts) -> dict:
    from coupled_curvature.numeric.core.diagnostics import diagnose

    d = diagnose(model, torch.nn.CrossEntropyLoss(), (X, y), inverse=False)
    return {b.name: {"size": b.size, "w_sq": b.w_sq, "g_sq": b.g_sq, "wHw": b.wHw, "D": b.coupled} for b in d}


def ours_Dplus(model, X, y, ref, opts) -> dict:
    from coupled_curvature.numeric.core.diagnostics import diagnose

    d = diagnose(model, torch.nn.CrossEntropyLoss(), (X, y), inverse=True, pinv_rtol=PINV_RTOL, max_dense=10_000)
    return {b.name: {"size": b.size, "wHw": b.wHw, "wHpinvw": b.wHpinvw, "Dplus": b.inverse_coupled,
                     "rank": b.rank} for b in d}


def _gradient_sq(model, X, y) -> dict[str, float]:
    params = dict(model.named_parameters())
    loss = torch.nn.CrossEntropyLoss()(model(X), y)
    grads = torch.autograd.grad(loss, list(params.values()))
    return {n: float(g.reshape(-1) @ g.reshape(-1)) for n, g in zip(params, grads)}


def _operator(model, p, X, y):
    from curvlinops import HessianLinearOperator

    return HessianLinearOperator(model, torch.nn.CrossEntropyLoss(), [p], [(X, y)],
                                 progressbar=False, check_deterministic=False, num_data=len(X))


def cl_D(model, X, y, ref, opts) -> dict:
    g_sq = _gradient_sq(model, X, y)
    out = {}
    for name, p in model.named_parameters():
        w = p.detach().reshape(-1)
        wHw = float(w @ (_operator(model, p, X, y) @ w).reshape(-1))
        w_sq = float(w @ w)
        out[name] = {"size": w.numel(), "w_sq": w_sq, "g_sq": g_sq[name], "wHw": wHw,
                     "D": wHw / w_sq / g_sq[name]}
    return out


class _Reached(Exception):
    pass


def _minres(A, w, target: float | None, opts) -> dict:
    from scipy.sparse.linalg import minres

    state = {"it": 0, "t_acc": None, "best": math.inf}
    t0 = time.perf_counter()

    def watch(x):
        state["it"] += 1
        if target is not None:
            err = _rel(float(w @ x), target)
            state["best"] = min(state["best"], err)
            if err <= opts["accuracy"]:
                state["t_acc"], state["x"] = time.perf_counter() - t0, x.copy()
                raise _Reached

    try:
        x, info = minres(A, w, rtol=opts["solver_rtol"], maxiter=opts["maxiter"] or len(w), callback=watch)
    except _Reached:
        x, info = state["x"], "reached"
    return {"value": float(w @ x), "iters": state["it"], "info": str(info), "seconds": time.perf_counter() - t0,
            "t_acc": state["t_acc"], "best_err": state["best"] if target is not None else None}


def _lsmr(A, w, opts) -> dict:
    from scipy.sparse.linalg import lsmr

    t0 = time.perf_counter()
    x, istop, itn = lsmr(A, w, atol=opts["solver_rtol"], btol=opts["solver_rtol"], conlim=1.0 / PINV_RTOL,
                         maxiter=opts["maxiter"] or len(w))[:3]
    return {"value": float(w @ x), "iters": int(itn), "info": str(istop), "seconds": time.perf_counter() - t0}


def cl_Dplus(model, X, y, ref, opts) -> dict:
    g_sq = _gradient_sq(model, X, y)
    out = {}
    for name, p in model.named_parameters():
        w = p.detach().reshape(-1).numpy()
        A = _operator(model, p, X, y).to_scipy()
        target = None if ref is None else ref[name]["wHpinvw"]
        row = {"size": w.size, "g_sq": g_sq[name]}
        if "minres" in opts["solvers"]:
            row["minres"] = _minres(A, w, target, opts)
        if "lsmr" in opts["solvers"]:
            row["lsmr"] = _lsmr(A, w, opts)
        out[name] = row
    return out


# ----------------------------------------------------------------------------- worker (one method, own process)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(args) -> None:
    torch.set_num_threads(args.threads)
    fn = globals()[args.worker]
    opts = {"accuracy": args.accuracy, "solver_rtol": args.solver_rtol, "maxiter": args.maxiter,
            "solvers": args.solvers.split(",")}
    X, y = _data()
    if args.samples:
        X, y = X[:args.samples], y[:args.samples]
    tiny = torch.nn.Sequential(torch.nn.Linear(64, 4, dtype=torch.float64), torch.nn.ReLU(),
                               torch.nn.Linear(4, 10, dtype=torch.float64))
    fn(tiny, X[:32], y[:32], None, {**opts, "maxiter": 3})  # warm-up: imports and lazy initialisation
    model = _net(args.net)
    model.load_state_dict(torch.load(args.state, weights_only=True))
    model.eval()
    ref = json.loads(Path(args.ref).read_text()) if args.ref else None
    base = _rss_mib()
    times, cpu, values = [], [], None
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        values = fn(model, X, y, ref, opts)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    result = {"seconds": statistics.median(times), "all_seconds": times, "cpu_seconds": statistics.median(cpu),
              "all_cpu_seconds": cpu, "rss_base_mib": base,
              "rss_peak_mib": _rss_mib(), "blocks": values}
    tmp = Path(args.out).with_suffix(".part")
    tmp.write_text(json.dumps(result))
    tmp.replace(args.out)


def _run_worker(method: str, net: str, state: Path, out: Path, args, repeats: int, ref: Path | None) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--net", net, "--state", str(state),
           "--out", str(out), "--repeats", str(repeats), "--threads", str(args.threads),
           "--accuracy", str(args.accuracy), "--solver-rtol", str(args.solver_rtol), "--solvers", args.solvers,
           "--samples", str(args.samples)]
    if args.maxiter:
        cmd += ["--maxiter", str(args.maxiter)]
    if ref is not None:
        cmd += ["--ref", str(ref)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    print(f"[{time.strftime('%H:%M:%S')}] {net}: {method} (x{repeats}) ...", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        sys.exit(f"bench_peers: worker {method} on {net} failed with exit code {proc.returncode}")
    return json.loads(out.read_text())


# ----------------------------------------------------------------------------- report


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _fmt_t(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g} s"


def _report_D(net: str, r: dict) -> tuple[float, float]:
    ours, cl = r["ours_D"], r["cl_D"]
    print(f"  D per block (wᵀHw, ‖g‖², D): relative difference curvlinops vs ours")
    print(f"    {'block':<10}{'size':>6}  {'wᵀHw (ours)':>13}  {'rel wᵀHw':>9}  {'rel ‖g‖²':>9}  {'rel D':>9}")
    worst = 0.0
    for name, o in ours["blocks"].items():
        c = cl["blocks"][name]
        rw, rg, rd = _rel(c["wHw"], o["wHw"]), _rel(c["g_sq"], o["g_sq"]), _rel(c["D"], o["D"])
        worst = max(worst, rw)
        print(f"    {name:<10}{o['size']:>6}  {o['wHw']:>13.6e}  {rw:>9.1e}  {rg:>9.1e}  {rd:>9.1e}")
    ratio = cl["seconds"] / ours["seconds"]
    print(f"  max relative difference of wᵀHw: {worst:.1e}  (target <= 1e-10: {'PASS' if worst <= 1e-10 else 'MISS'})")
    print(f"  time D: ours {_fmt_t(ours['seconds'])}, curvlinops {_fmt_t(cl['seconds'])}  ->  "
          f"curvlinops/ours = {ratio:.1f}x   (median of {len(ours['all_seconds'])})")
    print(f"  CPU time D (steadier under load): ours {_fmt_t(ours['cpu_seconds'])}, curvlinops "
          f"{_fmt_t(cl['cpu_seconds'])}  ->  {cl['cpu_seconds'] / ours['cpu_seconds']:.1f}x")
    _report_rss("D", ours, cl)
    return ratio, worst


def _report_rss(what: str, ours: dict, cl: dict) -> None:
    print(f"  peak RSS {what}: ours {ours['rss_peak_mib']:.0f} MiB (+{ours['rss_peak_mib'] - ours['rss_base_mib']:.0f} "
          f"over setup), curvlinops {cl['rss_peak_mib']:.0f} MiB (+{cl['rss_peak_mib'] - cl['rss_base_mib']:.0f})")


def _report_Dplus(net: str, r: dict, args) -> dict:
    ours, cl = r["ours_Dplus"], r["cl_Dplus"]
    solvers = args.solvers.split(",")
    print(f"  D⁺ per block: wᵀH⁺w, relative error of curvlinops+SciPy vs ours (dense, cutoff {PINV_RTOL:g}·max|λ|)")
    head = f"    {'block':<10}{'size':>6}{'rank':>6}  {'wᵀH⁺w (ours)':>13}"
    if "minres" in solvers:
        head += f"  {'MINRES err':>10} {'best':>8} {'info':>7} {'iters':>6} {'time':>9} {'t(acc)':>9}"
    if "lsmr" in solvers:
        head += f"  {'LSMR err':>9} {'istop':>5} {'iters':>6} {'time':>9}"
    print(head)
    tot = {s: 0.0 for s in solvers}
    t_acc, missing = 0.0, []
    for name, o in ours["blocks"].items():
        c = cl["blocks"][name]
        line = f"    {name:<10}{o['size']:>6}{o['rank']:>6}  {o['wHpinvw']:>13.6e}"
        if "minres" in solvers:
            m = c["minres"]
            tot["minres"] += m["seconds"]
            if m["t_acc"] is None:
                missing.append(name)
                t_acc += m["seconds"]
            else:
                t_acc += m["t_acc"]
            line += (f"  {_rel(m['value'], o['wHpinvw']):>10.1e} {m['best_err']:>8.1e} {m['info']:>7} {m['iters']:>6}"
                     f" {_fmt_t(m['seconds']):>9} {_fmt_t(m['t_acc']):>9}")
        if "lsmr" in solvers:
            s = c["lsmr"]
            tot["lsmr"] += s["seconds"]
            line += f"  {_rel(s['value'], o['wHpinvw']):>9.1e} {s['info']:>5} {s['iters']:>6} {_fmt_t(s['seconds']):>9}"
        print(line)
    print(f"  time D⁺: ours {_fmt_t(ours['seconds'])} (diagnose(inverse=True), all blocks), curvlinops run "
          f"{_fmt_t(cl['seconds'])} (gradient + every solver on every block; "
          + ", ".join(f"{s} {tot[s]:.3g} s" for s in solvers) + ")")
    _report_rss("D⁺", ours, cl)
    out = {"ours": ours["seconds"], "missing": missing}
    if "minres" in solvers:
        out["minres_to_acc"] = t_acc
        print(f"  MINRES time to |error| <= {args.accuracy:g} summed over blocks: {t_acc:.3g} s"
              + (f"  (not reached on {len(missing)} block(s): {', '.join(missing)}; their full run time counted,"
                 " so this is a lower bound)" if missing else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3x64 only, 1 repeat, MINRES/LSMR capped at 50 iterations")
    ap.add_argument("--repeats-small", type=int, default=3, help="runs per method on 3x64 (median; default 3)")
    ap.add_argument("--repeats-big", type=int, default=1, help="runs per method on 14x95 (default 1)")
    ap.add_argument("--repeats-krylov", type=int, default=1,
                    help="runs of the curvlinops+SciPy D⁺ solves (default 1: they take minutes per block)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads in every worker (default 2)")
    ap.add_argument("--with-126k-inverse", action="store_true", help="also D⁺ on 14x95 (long: dense 9025 blocks)")
    ap.add_argument("--accuracy", type=float, default=1e-6, help="equal accuracy: relative error of wᵀH⁺w")
    ap.add_argument("--solver-rtol", type=float, default=1e-12, help="MINRES rtol, LSMR atol=btol (default 1e-12)")
    ap.add_argument("--maxiter", type=int, default=0, help="solver iteration cap (default: the block size)")
    ap.add_argument("--solvers", default="minres,lsmr", help="comma list from minres, lsmr")
    ap.add_argument("--nets", default="3x64,14x95", help="comma list from: " + ", ".join(NETS))
    ap.add_argument("--samples", type=int, default=0,
                    help="the first N digits samples (default 0: all 1797; the D target is stated for 256)")
    ap.add_argument("--json", help="also write every measured number to this file")
    ap.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    ap.add_argument("--net", choices=tuple(NETS), help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--ref", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        import curvlinops  # noqa: F401
    except ImportError:
        sys.exit(f"bench_peers: {INSTALL_HINT}")
    if args.worker:
        return worker(args)
    if not set(args.solvers.split(",")) <= {"minres", "lsmr"}:
        sys.exit("bench_peers: --solvers takes a comma list from: minres, lsmr")
    torch.set_num_threads(args.threads)  # training in this process too
    if args.quick and not args.maxiter:
        args.maxiter = 50
    nets = ["3x64"] if args.quick else args.nets.split(",")
    if not nets or not set(nets) <= set(NETS):
        sys.exit("bench_peers: --nets takes a comma list from: " + ", ".join(NETS))
    print(f"bench_peers: torch {torch.__version__}, curvlinops {version('curvlinops-for-pytorch')}, {args.threads} threads per "
          f"worker, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    what = f"the first {args.samples} digits samples" if args.samples else "full digits (1797 samples)"
    print(f"data: {what} (x 64, 10 classes) as one batch, mean cross-entropy, float64; "
          f"curvlinops check_deterministic=False (its two extra data passes are off for timing fairness)")
    results: dict[str, dict] = {}
    targets = []
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as tmp:
        for net in nets:
            state = Path(tmp) / f"{net}.pt"
            print(f"[{time.strftime('%H:%M:%S')}] training {net} ...", file=sys.stderr, flush=True)
            info = _train(net, state)
            k = 1 if args.quick else (args.repeats_small if net == "3x64" else args.repeats_big)
            r = {m: _run_worker(m, net, state, Path(tmp) / f"{net}-{m}.json", args, k, None) for m in ("ours_D", "cl_D")}
            inverse = net != "14x95" or args.with_126k_inverse
            if inverse:
                ref = Path(tmp) / f"{net}-ours_Dplus.json"
                r["ours_Dplus"] = _run_worker("ours_Dplus", net, state, ref, args, k, None)
                ref_blocks = Path(tmp) / f"{net}-ref.json"
                ref_blocks.write_text(json.dumps(r["ours_Dplus"]["blocks"]))
                r["cl_Dplus"] = _run_worker("cl_Dplus", net, state, Path(tmp) / f"{net}-cl_Dplus.json", args,
                                            1 if args.quick else args.repeats_krylov, ref_blocks)
            print(f"\n== {net}: ReLU MLP 64-{list(NETS[net])}-10, {info['params']:,} parameters ==")
            print(f"  trained: {info['criterion']}; train acc {info['train_acc']:.3f}, test acc {info['test_acc']:.3f}")
            ratio_D, _ = _report_D(net, r)
            if net == "14x95":
                targets.append(("D >= 10x faster than curvlinops on 14x95", ratio_D >= 10, f"{ratio_D:.1f}x"))
            if inverse:
                dp = _report_Dplus(net, r, args)
                if net == "3x64" and "minres_to_acc" in dp:
                    ratio = dp["minres_to_acc"] / dp["ours"]
                    if dp["missing"]:
                        ok = ratio >= 5
                        detail = (f">= {ratio:.1f}x (lower bound: MINRES did not reach {args.accuracy:g} on "
                                  f"{len(dp['missing'])} block(s))")
                    else:
                        ok, detail = ratio >= 5, f"{ratio:.1f}x (MINRES stopped at the first iterate within {args.accuracy:g})"
                    if args.quick:
                        detail += "; --quick caps the solvers at 50 iterations, so this verdict means little"
                    targets.append((f"D⁺ >= 5x faster at equal accuracy ({args.accuracy:g}, judged on MINRES) on 3x64",
                                    ok, detail))
            results[net] = {"training": info, **r}
    if not any(t[0].startswith("D >=") for t in targets):
        print("\n(14x95 not run; the D target needs it: run without --quick, with 14x95 in --nets)")
    print(f"\ntargets (load average {os.getloadavg()[0]:.1f} at end; timings under load are indicative only):")
    for text, ok, detail in targets:
        print(f"  {'PASS' if ok else 'MISS'}  {text}: {detail}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
