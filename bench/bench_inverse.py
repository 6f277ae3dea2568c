"""Benchmark: dense D⁺ for every block of the 126k-parameter ReLU MLP (14 x 95) on full digits.

Prints, measured in this run:
  * one block (default the first 95x95 weight, 9025 parameters, no exactly-zero rows):
    assembly by per-sample Kronecker factors vs column by column from Hessian-vector
    products (timed on --columns columns, scaled linearly to the block), and the
    decomposition by the tridiagonal route (numeric/linalg/pinv.py) vs the full eigendecomposition
    it replaced; ratios for assembly and for assembly + decomposition (target >= 10);
  * diagnose(inverse=True, max_dense=10000) over every block: total time (target <= 600 s),
    the share of assembly (block_curvature) and a per-block decomposition table;
  * peak resident memory of the process.
With --quick: a 4 x 48 MLP on the same data (development run, about a minute).
With --crossover: eigh vs tridiagonal route on random symmetric matrices of a few sizes.
With --compare-dsytrd: the two-stage tridiagonal route (ctypes: full -> band -> dsbtrd) against the
one-stage public scipy.linalg.lapack.dsytrd route (same Householder reflection first, same dstevd
weights from the first components) at --sizes (2000 4000), median of --repeats (3), with the ratio.
With --blas-threads N: limit BLAS/OpenMP pools (threadpoolctl) and torch to N threads; on a
loaded machine 1 thread was 2.5x faster than 2 for the 9025 block (threads wait on each other).
With --no-eigh: skip the full eigendecomposition of the one block (it takes minutes).
The net is trained for --train-epochs (default 20) Adam epochs first; 0 measures it at initialization,
where many units of the deep layers are dead and the blocks shrink (exactly zero rows are dropped).
Run: python bench/bench_inverse.py [--quick] [--columns N] [--block 2.weight] [--blas-threads N] [--no-eigh]
     [--train-epochs N] [--skip-one-block] [--compare-dsytrd [--sizes 2000 4000] [--repeats 3]]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from coupled_curvature.numeric.core import diagnostics, hvp
from coupled_curvature.numeric.linalg import pinv
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.models.datasets import load
from coupled_curvature.numeric.factors.gauss_newton import linear_block_hessians
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.models.training import train_mlp

TARGET_S = 600.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 x 48 MLP instead of 14 x 95")
    ap.add_argument("--columns", type=int, default=None, help="columns timed on the HVP route (512; 128 quick)")
    ap.add_argument("--block", default="2.weight", help="block for the one-block comparison")
    ap.add_argument("--crossover", action="store_true", help="only time eigh vs tridiagonal route by size")
    ap.add_argument("--blas-threads", type=int, default=0, help="limit BLAS and torch threads (0: defaults)")
    ap.add_argument("--no-eigh", action="store_true", help="skip the eigh baseline of the one block")
    ap.add_argument("--train-epochs", type=int, default=20,
                    help="Adam epochs on the digits training split before measuring (20, as bench_peers; 0: at init)")
    ap.add_argument("--skip-one-block", action="store_true", help="only the every-block run")
    ap.add_argument("--compare-dsytrd", action="store_true",
                    help="only time the two-stage route against the one-stage scipy.linalg.lapack.dsytrd route")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000], help="sizes for --compare-dsytrd")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per size for --compare-dsytrd (median)")
    args = ap.parse_args()
    if args.blas_threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.blas_threads)
        globals()["_LIMITS"] = threadpool_limits(args.blas_threads)  # kept for the whole run
    if args.crossover:
        crossover()
        return
    if args.compare_dsytrd:
        compare_dsytrd(args.sizes, args.repeats)
        return
    data = load("digits")
    X, y = torch.cat([data.X_train, data.X_test]), torch.cat([data.y_train, data.y_test])
    hidden = [48] * 4 if args.quick else [95] * 14
    if args.train_epochs > 0:
        t0 = time.perf_counter()
        trained = train_mlp(data, hidden=hidden, epochs=args.train_epochs, seed=0)
        model, state = trained.model, (f"trained: {trained.criterion}, seed 0 ({time.perf_counter() - t0:.0f} s); "
                                       f"train acc {trained.train_acc:.3f}, test acc {trained.test_acc:.3f}")
    else:
        model, state = make_mlp(64, hidden, 10, seed=0), "at initialization (seed 0): many deep units are dead"
    loss_fn = torch.nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: ReLU MLP 64-[{hidden[0]}x{len(hidden)}]-10, {n_params} parameters, {len(X)} samples")
    print(f"  {state}")
    print(f"threads: torch {torch.get_num_threads()}, BLAS {blas_threads()}")
    columns = args.columns or (128 if args.quick else 512)
    if not args.skip_one_block:
        one_block(model, loss_fn, X, y, args.block, columns, not args.no_eigh)
    every_block(model, loss_fn, X, y)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS (whole run):             {peak:8.0f} MiB")


def one_block(model, loss_fn, X, y, block: str, columns: int, baseline: bool) -> None:
    obj = Objective(float64_copy(model), loss_fn, prepare_batches((X, y), loss_fn))
    n = obj.values[block].numel()
    w = obj.values[block].reshape(-1)
    t0 = time.perf_counter()
    H = linear_block_hessians(obj, 0, {block: (block.rpartition(".")[0], [block])})[block]
    t_kron = time.perf_counter() - t0

    leaves, grads = next(obj.graphs())
    k = min(columns, n)
    t0 = time.perf_counter()
    cols = []
    for start in range(0, k, 256):
        stop = min(k, start + 256)
        eye = torch.zeros(stop - start, n, dtype=torch.float64)
        eye[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        cot = [eye.reshape((stop - start,) + leaves[block].shape)]
        cols.append(hvp._block_vjp(grads, leaves, [block], cot, True)[0].reshape(stop - start, -1))
    t_cols = (time.perf_counter() - t0) * n / k
    err = float((torch.cat(cols) - H[:k]).abs().max() / H.abs().max())
    del leaves, grads, cols

    t0 = time.perf_counter()
    new = pinv.pinv_quadratic_form(H, w, 1e-10)
    t_new = time.perf_counter() - t0
    live = int((H != 0).any(dim=1).sum())
    print(f"\none block: {block}, {n} parameters, {live} non-zero rows, rank {new.rank}")
    print(f"  Kronecker assembly:               {t_kron:8.2f} s")
    print(f"  column (HVP) assembly:            {t_cols:8.2f} s  (timed on {k} columns, scaled to {n})")
    print(f"  max |difference| / max |H|:       {err:8.1e}  (the two assemblies agree)")
    print(f"  tridiagonal route wᵀH⁺w:          {t_new:8.2f} s")
    print(f"  ratio assembly, column / Kronecker:           {t_cols / t_kron:8.1f}x")
    if not baseline:
        print("  full eigh baseline skipped (--no-eigh)")
        return
    t0 = time.perf_counter()
    old = pinv.cutoff_sum(*pinv.eigh_spectrum(0.5 * (H + H.T), w), 1e-10)  # the route it replaced
    t_old = time.perf_counter() - t0
    rel = abs(new.value - old.value) / abs(old.value) if old.value else abs(new.value)
    kappa = 1.0 / old.min_kept_rel_eig if old.min_kept_rel_eig else 1.0
    tol = max(1e-10, 20 * np.finfo(np.float64).eps * kappa)
    print(f"  full eigh (replaced):             {t_old:8.2f} s  (ratio {t_old / t_new:.1f}x)")
    print(f"  |Δ wᵀH⁺w| / |wᵀH⁺w|:              {rel:8.1e}  (tolerance max(1e-10, 20εκ) = {tol:.1e}: "
          f"{'ok' if rel <= tol and new.rank == old.rank else 'DISAGREE'})")
    ratio = (t_cols + t_old) / (t_kron + t_new)
    print(f"  ratio D⁺, (column + eigh) / (Kronecker + tri): {ratio:8.1f}x  (target >= 10: "
          f"{'PASS' if ratio >= 10 else 'MISS'})")


def every_block(model, loss_fn, X, y) -> None:
    calls: list[tuple[int, int, float, int]] = []
    assembly: list[float] = []
    orig_pinv, orig_curv = diagnostics.pinv_quadratic_form, diagnostics.block_curvature

    def timed_pinv(H, w, rtol):
        live = int((H != 0).any(dim=1).sum())
        t0 = time.perf_counter()
        form = orig_pinv(H, w, rtol)
        calls.append((H.shape[0], live, time.perf_counter() - t0, form.rank))
        return form

    def timed_curv(*a, **kw):
        t0 = time.perf_counter()
        out = orig_curv(*a, **kw)
        assembly.append(time.perf_counter() - t0)
        return out

    diagnostics.pinv_quadratic_form, diagnostics.block_curvature = timed_pinv, timed_curv
    try:
        t0 = time.perf_counter()
        d = diagnostics.diagnose(model, loss_fn, (X, y), inverse=True, max_dense=10_000)
        total = time.perf_counter() - t0
    finally:
        diagnostics.pinv_quadratic_form, diagnostics.block_curvature = orig_pinv, orig_curv
    dense = [b for b in d if b.rank is not None]
    assert len(dense) == len(calls), "every dense block goes through pinv_quadratic_form once"
    print(f"\ndiagnose(inverse=True), {len(d)} blocks, {len(dense)} with dense D⁺")
    print(f"  {'block':<10} {'size':>6} {'non-zero':>8} {'route':<11} {'rank':>6} {'time s':>8}")
    for b, (n, live, t, rank) in zip(dense, calls):
        route = "tridiagonal" if live >= pinv.FAST_MIN_SIZE else "eigh"
        print(f"  {b.name:<10} {n:>6} {live:>8} {route:<11} {rank:>6} {t:8.2f}")
    t_dec = sum(c[2] for c in calls)
    print(f"  assembly (block_curvature, all blocks, one pass): {assembly[0]:8.1f} s")
    print(f"  decompositions (sum over blocks):                 {t_dec:8.1f} s")
    print(f"  rest (records, loss):                             {total - assembly[0] - t_dec:8.1f} s")
    print(f"  total:                                            {total:8.1f} s  (target <= {TARGET_S:.0f} s: "
          f"{'PASS' if total <= TARGET_S else 'MISS'})")


def blas_threads() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl missing)"
    return ", ".join(f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info()) or "none loaded"


def crossover() -> None:
    rng = np.random.default_rng(0)
    print(f"{'n':>6} {'eigh s':>9} {'tridiagonal s':>14}  (median of 3, {torch.get_num_threads()} threads)")
    for n in (128, 256, 384, 512, 768, 1024, 2048):
        M = rng.standard_normal((n, n))
        S, w = torch.from_numpy((M + M.T) / 2), torch.from_numpy(rng.standard_normal(n))
        times = []
        for fn in (pinv.eigh_spectrum, pinv.tridiagonal_spectrum):
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn(S, w)
                runs.append(time.perf_counter() - t0)
            times.append(float(np.median(runs)))
        print(f"{n:>6} {times[0]:9.4f} {times[1]:14.4f}")


def one_stage_spectrum(S: torch.Tensor, w: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, c)`` as :func:`pinv.tridiagonal_spectrum`, through public scipy wrappers only: the
    Householder ``P`` with ``Pw = βe₁`` (``dsymv``, ``dsyr2``), one-stage ``dsytrd`` (lower: its
    reflectors never touch row 0, so ``Uᵀw = βe₁``), then ``dstevd`` weights ``‖w‖² z_i[0]²``."""
    from scipy.linalg.blas import dsymv, dsyr2
    from scipy.linalg.lapack import dsytrd

    A = np.array(S.detach().to(torch.float64).numpy(), order="F")
    v = np.array(w.detach().to(torch.float64).numpy())
    n, w_sq = A.shape[0], float(v @ v)
    v[0] += np.copysign(np.sqrt(w_sq), v[0])  # v = w − βe₁ with β = −sign(w₀)‖w‖
    vv = float(v @ v)
    if vv > 0.0:
        tau = 2.0 / vv
        y = dsymv(tau, A, v, lower=1)
        y += (-0.5 * tau * float(y @ v)) * v
        A = dsyr2(-1.0, v, y, a=A, lower=1, overwrite_a=1)
    _, d, e, _, info = dsytrd(A, lower=1, lwork=64 * n, overwrite_a=1)  # lwork ≥ n·nb: the blocked code
    if info != 0:
        raise RuntimeError(f"LAPACK dsytrd failed with info={info}")
    return pinv._first_components(d, e, w_sq)


def compare_dsytrd(sizes: list[int], repeats: int) -> None:
    import os

    rng = np.random.default_rng(0)
    status = pinv.fast_route_status()
    if not status.active:
        raise SystemExit(f"the two-stage route is unavailable: {status.reason}")
    print(f"two-stage (ctypes, integers {status.int_type}) vs one-stage public dsytrd; "
          f"median of {repeats}; threads: torch {torch.get_num_threads()}, BLAS {blas_threads()}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'n':>6} {'two-stage s':>12} {'one-stage s':>12} {'one/two':>8} {'max |Δλ|/‖λ‖':>14} {'max |Δc|/‖w‖²':>14}")
    for n in sizes:
        M = rng.standard_normal((n, n))
        S, w = torch.from_numpy((M + M.T) / 2), torch.from_numpy(rng.standard_normal(n))
        del M
        times, out = [], []
        for fn in (pinv.tridiagonal_spectrum, one_stage_spectrum):
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                res = fn(S, w)
                runs.append(time.perf_counter() - t0)
            times.append(float(np.median(runs)))
            order = np.argsort(res[0])
            out.append((res[0][order], res[1][order]))
        dl = float(np.abs(out[0][0] - out[1][0]).max() / np.abs(out[0][0]).max())
        dc = float(np.abs(out[0][1] - out[1][1]).max() / float(w @ w))
        print(f"{n:>6} {times[0]:12.3f} {times[1]:12.3f} {times[1] / times[0]:8.2f} {dl:14.1e} {dc:14.1e}  "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
