"""``ccurv check``: machine-check T1–T14 (symbolic proofs and numeric cross-checks on trained nets).

Prints the detailed tables first (the T3 chain, the formal build, λ's identities, the precision
sweep), then, last, one summary row per theorem (status, steps by trust label, agreement, time) and
the verdict; progress goes to stderr, stage by stage. Exit 0
when every selected theorem is proved (or, numeric only, agrees), 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from coupled_curvature.commands._common import add_command, add_seed, bounded_int
from coupled_curvature.numeric.vocabulary import MAX_DPS, MIN_DPS
from coupled_curvature.commands._common import say as _say
from coupled_curvature.base.output import check_file, write_json
from coupled_curvature.reporting.terminal import number, table, wrap

#: the line of ``ccurv --help`` that names the command, and the description its own ``--help`` opens with
HELP = "machine-check T1-T14 (default: symbolic proofs and numeric cross-checks)"
DESCRIPTION = ("Check every theorem T1-T14: exact SymPy derivations with trust labels, certificates re-checked "
               "by an independent rational checker, numeric cross-checks on trained networks (evidence, never proof) "
               "and, with --formal, the Coq proofs. Exit 0 when everything selected holds, 1 when something fails, "
               "2 on bad input.")


STEP_LEGEND = ("steps by trust label: formal (also stated in general by a pinned Coq theorem), exact "
               "(SymPy, rational arithmetic), cert (certificate re-checked by an independent checker), "
               "rewrite (a declared hypothesis), num (numeric: evidence only); Coq: formal, pinned or FAILED; "
               "figure: the numeric cross-check's figure, named below; ok: it agrees with the prediction")


def summary_table(report: Any, formal: dict[str, str] | None = None, width: int | None = None) -> str:
    """Aligned text, one row per theorem (``formal``: theorem id -> formal, pinned or FAILED, in the
    ``Coq`` column), its steps by trust label, whether the numeric cross-check agrees and the time;
    short headers with their legend said once, then what each numeric figure is; fits ``width``."""
    from coupled_curvature.proofs.catalogue import TRUST_LABELS

    formal = formal or {}
    short = {"certificate": "cert", "numeric": "num"}
    head = ["theorem", "status", "Coq", *(short.get(k, k) for k in TRUST_LABELS), "figure", "ok", "time"]
    rows, named = [], []
    for t, s in report.statuses.items():
        num = s.numeric
        rows.append([
            t, s.status, formal.get(t, "-"), *(str(s.steps[k]) for k in TRUST_LABELS),
            "-" if num is None else number(num.figure, ".2e"),
            "-" if num is None else ("yes" if num.agrees else "NO"), f"{s.seconds:.1f}s",
        ])
        if num is not None:
            named.append(f"{t} {num.figure_name}")
    text = table(head, rows, align="lll" + "r" * (len(head) - 3), width=width, rule=True)
    lines = [text, *wrap(STEP_LEGEND, width)]
    if named:
        lines += wrap("figures: " + "; ".join(named), width)
    return "\n".join(lines)


def _print_chain(result: Any) -> None:
    print("\n".join(wrap("Numeric check (T3): D and D⁺ under a random chain of layer rescalings and "
                         "permutations (digits, ReLU MLP 64x3, float64)")))
    for step in result.steps:
        print(f"  {step}")
    print(f"  function gap after the chain: {result.function_gap:.3e}")
    rows = [[b.name, *map(number, (b.D, b.dD, b.Dplus, b.dDplus, b.dplus_bound, b.rq, b.drq))] for b in result.blocks]
    print(table(["block", "D", "ΔD", "D⁺", "ΔD⁺", "ε/λmin_rel", "RQ", "ΔRQ"], rows))
    print("\n".join(wrap("Δ: the block's relative change under the chain; ε/λmin_rel: the float64 conditioning "
                         "limit of the D⁺ change (ε₆₄ over the smallest kept eigenvalue relative to the largest)")))
    print("\n".join(wrap(
        f"max rel change: D {result.max_dD:.3e} (tol {result.tol_D:g}), "
        f"D⁺ {result.max_dDplus:.3e} (tol {result.tol_Dplus:g}), "
        f"Rayleigh quotient {result.max_drq:.3e} (must move > 1e-3)")))
    print("numeric check: " + ("PASS" if result.passed else "FAIL") + " (digits 64x3, T3)")
    print()


def _print_wrapped(text: str, indent: str = "") -> None:
    """Print ``text`` to stdout wrapped at the terminal width, continuation lines indented by two more."""
    print("\n".join(wrap(text, indent=indent, hang=indent + "  ")))


def check_precision(dps: int, seed: int = 0) -> tuple[bool, list[dict]]:
    """Invariance error of ``D`` and ``D⁺`` under a layer rescaling by ``c = 0.3`` (not a power of
    two), in mpmath at 15 digits and at ``dps`` digits, on a small trained net (wine, ReLU 6-5,
    24 samples). Passes when the ``D`` error at ``dps`` digits is at most ``10^-(dps-4)``
    (:func:`~coupled_curvature.numeric.studies.precision.precision_check`)."""
    from coupled_curvature.numeric.studies.precision import precision_check

    return precision_check(dps, c="0.3", seed=seed, progress=_say)


def formal_section(only: list[str], checked: bool) -> tuple[bool, dict[str, Any], dict[str, str]]:
    """Per theorem, its Coq theorems: pinned only, or (``checked``) built and checked by Coq.

    Returns whether every check passed, the JSON record, and per theorem id ``"formal"``,
    ``"FAILED"`` or (not checked) ``"pinned"``.

    Checked means: the development compiles (no ``Admitted``, no axiom of our own), every pinned
    statement equals what Coq prints for the name, and ``Print Assumptions`` lists only the
    axioms of the real-number libraries.
    """
    from coupled_curvature.proofs import formal
    from coupled_curvature.formal_claims import FORMAL_SCOPE

    pinned = {t: names for t, names in formal.formal_theorems().items() if t in only}
    if not checked:
        _print_wrapped(f"Formal (Coq): {sum(map(len, pinned.values()))} pinned theorems for "
                     f"{', '.join(pinned) or 'none'} of the selection; not checked in this run "
                     "(ccurv check --formal builds and checks them)")
        return True, {"checked": False, "theorems": pinned}, {t: "pinned" for t in pinned}
    built = formal.build()
    results = formal.check_statements(only=list(pinned))
    bad = [r for r in results if not r.ok]
    per = {t: all(r.ok for r in results if r.theorem_id == t) for t in pinned}
    _print_wrapped(f"Formal (Coq): development built in {built.seconds:.1f}s; {len(results) - len(bad)}/{len(results)} "
                 "pinned statements match Coq and use no axiom beyond the real-number libraries'")
    for t, names in pinned.items():
        _print_wrapped(f"{t}: {'formal' if per[t] else 'FAILED'} ({len(names)} Coq theorems): "
                     f"{FORMAL_SCOPE.get(t, '')}", indent="  ")
    for r in bad:
        why = "statement differs from its pin" if not r.matches else f"axioms {', '.join(r.axioms)}"
        _print_wrapped(f"{r.name}: {why}", indent="  ")
    missing = [t for t in only if t not in pinned]
    if missing:
        _print_wrapped(f"no Coq theorem yet for {', '.join(missing)}", indent="  ")
    return not bad, {"checked": True, "build_seconds": built.seconds,
                     "theorems": {t: {"names": pinned[t], "ok": per[t], "scope": FORMAL_SCOPE.get(t)}
                                  for t in pinned}}, \
        {t: "formal" if ok else "FAILED" for t, ok in per.items()}


def register(sub: argparse._SubParsersAction) -> None:
    check = add_command(sub, "check", run, HELP, DESCRIPTION)
    check.add_argument("--symbolic", action="store_true", help="only the symbolic derivations")
    check.add_argument("--numeric", action="store_true", help="only the numeric cross-checks on trained nets")
    check.add_argument("--only", metavar="IDS", default=None, help="comma-separated theorem ids, e.g. T4,T6")
    check.add_argument("--json", metavar="FILE", default=None, help="write the machine-readable result to FILE")
    add_seed(check, "seed for training and the symmetry chains")
    check.add_argument("--quick", action="store_true",
                       help="skip the digits 64x3 D⁺ chain (the slow part); small nets only")
    check.add_argument("--precision", type=bounded_int(MIN_DPS, MAX_DPS), metavar="DPS", default=None,
                       help="also measure the invariance error in mpmath at DPS digits (it should fall like 10^-DPS)")
    check.add_argument("--formal", action="store_true",
                       help="also build the Coq development (proofs/coq) and check every pinned theorem "
                            "statement and its axioms (needs coqc)")


def run(args: argparse.Namespace) -> int:
    from coupled_curvature.proofs import check_all, parse_only
    from coupled_curvature.proofs.formal import INSTALL_HINT, CoqUnavailableError, coq_available

    start = time.perf_counter()
    only = parse_only(args.only)  # bad ids fail before any work
    if args.json is not None:
        check_file(args.json)  # fail before any work
    if args.formal and not coq_available():
        raise CoqUnavailableError(f"--formal needs Coq 8.16 and MathComp 1.15 (coqc is not on the PATH): {INSTALL_HINT}")
    symbolic = args.symbolic or not args.numeric
    numeric = args.numeric or not args.symbolic
    report = check_all(only=only, symbolic=symbolic, numeric=numeric, seed=args.seed, progress=_say,
                       heavy=not args.quick)
    lab = report.lab
    chain = None if lab is None else lab.computed_chain("digits-64x3")
    if chain is not None:
        _print_chain(chain)
    formal_ok, formal_data, formal_status = formal_section(only, args.formal)
    rate = None
    if args.only is None:  # λ's analytic identities: not a theorem, so not part of an --only selection
        from coupled_curvature.commands.check_rate import gather, render

        rate = gather(symbolic=symbolic, numeric=numeric, seed=args.seed, progress=_say)
        print("\n".join(render(rate)))
    precision_ok, precision_rows = True, None
    if args.precision is not None:
        _say(f"arbitrary precision: wine ReLU 6-5 at dps up to {args.precision}")
        precision_ok, precision_rows = check_precision(args.precision, args.seed)
        _print_wrapped("Arbitrary precision (wine ReLU 6-5, 24 samples, layer 0 rescaled by c = 0.3 at each "
                       "precision):")
        for r in precision_rows:
            print(f"  dps {r['dps']:>4}: max rel ΔD {r['D_str']:>10}   max rel ΔD⁺ {r['Dplus_str']:>10}")
        print("precision check: " + ("PASS" if precision_ok else f"FAIL (ΔD above 1e-{args.precision - 4})"))
        print()
    # the verdict on the theorems comes last, after every detailed table
    what = " + ".join(k for k, v in (("symbolic", symbolic), ("numeric", numeric), ("formal", args.formal)) if v)
    print(f"ccurv check ({what}, seed {args.seed}): {len(report.statuses)} theorems")
    print(summary_table(report, formal_status))
    for t, s in report.statuses.items():
        for r in s.reasons:
            _print_wrapped(f"{t}: {r}", indent="  ")
    if not report.ok:
        verdict = "SOME THEOREMS FAILED"
    elif all(s.status == "proved" for s in report.statuses.values()):
        verdict = "all proved"
    else:
        verdict = "no failures (numeric evidence only, nothing proved by numbers)"
    total = time.perf_counter() - start
    print(f"{verdict}; total {total:.1f}s")
    if args.json is not None:
        data = report.to_json()
        data["formal"] = formal_data
        if precision_rows is not None:
            data["precision"] = {"ok": precision_ok, "rows": [{k: r[k] for k in ("dps", "D", "Dplus")} for r in precision_rows]}
        if rate is not None:
            data["lambda_identities"] = rate.to_json()
        data["seconds"] = round(total, 3)
        write_json(args.json, data)
        _say(f"wrote {args.json}")
    return 0 if report.ok and precision_ok and formal_ok and (rate is None or rate.ok) else 1
