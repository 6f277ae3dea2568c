"""``ccurv check``: machine-check the invariance results."""

from __future__ import annotations

import argparse
import time

from coupled_curvature.commands._common import say as _say


def _check_numeric(args: argparse.Namespace) -> bool:
    import torch

    from coupled_curvature.numeric.datasets import load
    from coupled_curvature.numeric.invariance import chain_check
    from coupled_curvature.numeric.training import train_mlp

    data = load("digits", seed=args.seed)
    _say("numeric check: digits, ReLU MLP 64x3, float64")
    trained = train_mlp(data, (64, 64, 64), seed=args.seed, progress=True)
    _say(
        f"trained ({trained.criterion}): train acc {trained.train_acc:.3f}, "
        f"test acc {trained.test_acc:.3f}, train loss {trained.train_loss:.3e}"
    )
    result = chain_check(
        trained.model, torch.nn.CrossEntropyLoss(), data.train, seed=args.seed,
        progress=lambda s: _say("  " + s),
    )
    print("Numeric check (T3): D and D⁺ under a random chain of layer rescalings and permutations")
    for step in result.steps:
        print(f"  {step}")
    print(f"  function gap after the chain: {result.function_gap:.3e}")
    print(result.table())
    print(
        f"max rel change: D {result.max_dD:.3e} (tol {result.tol_D:g}), "
        f"D⁺ {result.max_dDplus:.3e} (tol {result.tol_Dplus:g}), "
        f"Rayleigh quotient {result.max_drq:.3e} (must move > 1e-3)"
    )
    print("numeric check: " + ("PASS" if result.passed else "FAIL"))
    return result.passed


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    ok = _check_numeric(args)
    _say(f"check finished in {time.perf_counter() - start:.1f}s")
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser("check", help="machine-check the invariance results (default: everything)")
    check.add_argument("--numeric", action="store_true", help="only the numeric cross-checks")
    check.add_argument("--seed", type=int, default=0, help="seed for training and the symmetry chain")
    check.set_defaults(func=run)
