"""``ccurv experiment invariance|width|training [--quick] --out DIR``: exact invariance at scale, the exploratory
width sweep, and the curvature-rate training experiment (:mod:`coupled_curvature.commands.training`).

``width`` (the exploratory width sweep) writes ``DIR/width.json`` (``{"runs": [...], "kendall": [...]}``),
``width.md``, ``width.html`` (self-contained: the figures inlined as SVG) and the figures
``width_gap_loss.png`` / ``width_gap_err.png``;
see :mod:`coupled_curvature.numeric.studies.width` and :mod:`coupled_curvature.reporting.width_page`.

Writes ``DIR/invariance.json`` (``{"rows": [...], ...}``), ``invariance.md``, ``invariance.html``
(self-contained, the figure inlined as SVG; see :mod:`coupled_curvature.reporting.invariance_page`) and
``invariance.png`` (D and D⁺ changes against the Rayleigh-quotient change, one point per net), all
built in a temporary folder and renamed into place. Trained models are cached under ``--cache``.
Finished rows are cached too (``--remeasure`` ignores them), so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import os
import time

from coupled_curvature.base.choices import parse_list
from coupled_curvature.commands._common import add_command, add_seed, count, nonnegative, say
from coupled_curvature.reporting.invariance_page import fmt as _fmt
from coupled_curvature.reporting.terminal import bullets, footnote_repeats, table, wrap

#: the line of ``ccurv experiment --help`` that names the experiment, and the description its own ``--help``
#: opens with
INVARIANCE_HELP = "train nets, apply random symmetry chains, tabulate which quantities move"
INVARIANCE_DESCRIPTION = ("Relative changes of D and D⁺ under layer rescalings (c log-uniform in [1e-3, 1e3]) "
                          "and permutations, the neuron-wise negative control, and the raw Rayleigh quotient / top "
                          "eigenvalue.")
WIDTH_HELP = "exploratory: Kendall τ between curvature measures and the generalization gap across widths"
WIDTH_DESCRIPTION = ("Train ReLU MLPs of several widths and depths on digits (several seeds), measure D, D⁺ "
                     "and baseline sharpness measures, and report Kendall τ against the test−train gaps with a "
                     "seed-bootstrap 95% interval. Exploratory: no bound is claimed.")


def register(sub) -> None:
    p = sub.add_parser("experiment", help="run the experiments: exact invariance at scale, and the exploratory width sweep")
    kinds = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    inv = add_command(kinds, "invariance", run, INVARIANCE_HELP, INVARIANCE_DESCRIPTION)
    add_experiment_flags(inv, "small configuration (about a minute on 2 cores)")
    inv.add_argument("--certify", action="store_true",
                     help="also certify T3 per net in ball arithmetic (256 bits): a layer rescaling by c = 37/10 "
                     "leaves D in a ball containing 0 while the raw Rayleigh quotient certainly moves")
    _register_width(kinds)
    from coupled_curvature.commands.training import register_training

    register_training(kinds, add_experiment_flags)
    from coupled_curvature.commands.experiment_transformers import register_transformers

    register_transformers(kinds, add_experiment_flags)


def add_experiment_flags(p: argparse.ArgumentParser, quick: str, seed: str = "first seed (default 0)",
                         cached: bool = True) -> None:
    """Add the flags every experiment has: --quick (``quick`` says what it runs), --out and --seed (``seed``
    says its use); with ``cached`` also --cache and --remeasure, for an experiment that caches its models."""
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--out", required=True, help="report folder (created or replaced atomically)")
    if cached:
        p.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "ccurv", "models"),
                       help="folder of cached trained models and measurements (default ~/.cache/ccurv/models)")
    add_seed(p, seed)
    if cached:
        p.add_argument("--remeasure", action="store_true",
                       help="ignore cached measurements (models still come from the cache)")


def _register_width(kinds) -> None:
    from coupled_curvature.numeric.vocabulary import WIDTH_MEASURES as MEASURES

    w = add_command(kinds, "width", run_width_command, WIDTH_HELP, WIDTH_DESCRIPTION)
    add_experiment_flags(w, "widths 8, 32, 128; depths 1, 3; two seeds (a few minutes)")
    w.add_argument("--seeds", type=count, default=None, help="number of seeds (default 5, --quick 2)")
    w.add_argument("--widths", default=None, help="comma-separated hidden widths (default 8,16,32,64,128,256,512)")
    w.add_argument("--depths", default=None, help="comma-separated numbers of hidden layers (default 1,3)")
    w.add_argument("--measures", default=None,
                   help=f"comma-separated subset of: {', '.join(MEASURES)} (default all)")
    w.add_argument("--max-epochs", type=nonnegative, default=None, help="training epoch cap (default 300, --quick 120)")
    w.add_argument("--samples", type=count, default=None,
                   help="training points the curvature measures use (default 256, --quick 128)")
    w.add_argument("--threads", type=count, default=None,
                   help="torch threads while measuring (default 1, or 2 for the full run); training always uses 1")


# the terminal table: one key column naming the net, short headers, the legend said once below
_TERMINAL = [
    ("status", "status"), ("params", "params"), ("blocks", "blocks"), ("train_acc", "tr acc"),
    ("test_acc", "te acc"), ("max_rel_change_D", "ΔD"), ("max_rel_change_Dplus", "ΔD⁺"),
    ("neuron_control_median", "nΔD med"), ("neuron_control_min", "nΔD min"), ("rq_change", "ΔRQ"),
    ("top_eig_change", "Δλmax"), ("t9_residual", "T9 res"),
]
TABLE_LEGEND = (
    "net: dataset, arch, hidden layers×width (or the widths), seed s; tr/te acc: training and test "
    "accuracy; ΔD, ΔD⁺: max relative change over tensor blocks under the random chain of layer "
    "rescalings and permutations; nΔD med/min: ΔD under random neuron-wise rescalings (the negative "
    "control, it must move), median and minimum over trials; ΔRQ, Δλmax: the same for the raw "
    "Rayleigh quotient and the top eigenvalue (they must move); T9 res: Euler-identity residual "
    "(bias-free nets); – not measured")


def table_text(rows: list[dict], width: int | None = None) -> str:
    """Aligned table, one row per (dataset, arch, seed), with its legend; fits ``width`` (default
    the terminal's, at most 100 columns), splitting the columns into panels if needed. With certified
    fields (``--certify``) a column ``cert`` says what the ball arithmetic proved."""
    from coupled_curvature.reporting.invariance_page import certified_cell

    certified = any("cert_D_zero" in r for r in rows)
    head = ["net", *(h for _, h in _TERMINAL), *(["cert"] if certified else [])]
    cells = [[f"{r.get('dataset')} {r.get('arch')} {_fmt(r.get('hidden'))} s{r.get('seed')}",
              *(_fmt(r.get(k)) for k, _ in _TERMINAL), *([certified_cell(r)] if certified else [])] for r in rows]
    legend = TABLE_LEGEND + ("; cert: T3 certified at 256 bits under a layer rescaling by c = 37/10 (ΔD ball ∋ 0 "
                             "of relative width ≤ the number shown, ΔRQ ball ∌ 0), or why not" if certified else "")
    return "\n".join([table(head, cells, align="ll" + "r" * (len(head) - 2), width=width), *wrap(legend, width)])


def run(args: argparse.Namespace) -> int:
    from coupled_curvature.numeric.models.cache import ModelCache
    from coupled_curvature.numeric.studies.invariance_experiment import default_config, quick_config, run_invariance
    from coupled_curvature.base.output import check_folder, json_text, write_folder, write_texts
    from coupled_curvature.reporting import invariance_page as P

    check_folder(args.out, "experiment invariance")
    cfg = quick_config(args.seed) if args.quick else default_config(args.seed)
    if getattr(args, "certify", False):
        from dataclasses import replace

        cfg = replace(cfg, certify=True)
    say(f"experiment invariance ({cfg.name}): {len(cfg.nets)} nets{', certified' if cfg.certify else ''}; "
        f"cache {args.cache}")
    if not args.quick:
        say("  note: the default run takes about half an hour or more on 2 cores (README); finished nets are cached, "
            "so an interrupted run resumes")
    t0 = time.perf_counter()
    result = run_invariance(cfg, cache=ModelCache(args.cache), progress=say,
                            remeasure=bool(getattr(args, "remeasure", False)))
    data = result.to_dict()
    data["seconds"] = time.perf_counter() - t0

    def fill(tmp: str) -> None:
        cfg = data["config"]
        fig = P.invariance_figure(data["rows"], cfg["tol_D"], cfg["tol_Dplus"], cfg["moves"])
        files = {"invariance.json": json_text(data, indent=1) + "\n",
                 "invariance.md": P.render_markdown(data), "invariance.html": P.render_html(data, P.svg_text(fig))}
        write_texts(tmp, files)
        fig.savefig(os.path.join(tmp, "invariance.png"), format="png", dpi=90, metadata={"Software": None})

    path = write_folder(args.out, "experiment invariance", fill)
    print(table_text(data["rows"]))
    print(f"\n{len(data['rows'])} nets in {data['seconds']:.1f} s; report in {path}")
    certified_ok = all(r.get("cert_D_zero") is not False and r.get("cert_RQ_moves") is not False for r in data["rows"])
    return 0 if certified_ok and all(r["status"] in ("invariant", "degenerate (T10)") for r in data["rows"]) else 1


def width_config(args: argparse.Namespace):
    """The :class:`WidthConfig` of the command line (``--quick`` or default, then the overrides)."""
    from dataclasses import replace

    from coupled_curvature.base.errors import InvalidInputError
    from coupled_curvature.numeric.studies import width as W

    if args.seed < 0:
        raise InvalidInputError(f"--seed must be ≥ 0, got {args.seed}")
    cfg = W.quick_config(args.seed) if args.quick else W.default_config(args.seed)
    changes: dict = {}
    if args.seeds is not None:
        if args.seeds < 1:
            raise InvalidInputError(f"--seeds must be ≥ 1, got {args.seeds}")
        changes["seeds"] = tuple(range(args.seed, args.seed + args.seeds))
    if args.widths is not None:
        changes["widths"] = parse_list(args.widths, "--widths")
    if args.depths is not None:
        changes["depths"] = parse_list(args.depths, "--depths")
    if args.measures is not None:
        changes["measures"] = parse_list(args.measures, "--measures", str)
    if args.max_epochs is not None:
        changes["max_epochs"] = args.max_epochs
    if args.samples is not None:
        changes["measure_samples"] = args.samples
    if args.threads is not None:
        if args.threads < 1:
            raise InvalidInputError(f"--threads must be ≥ 1, got {args.threads}")
        changes["threads"] = args.threads
    if changes:
        note = "; ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in changes.items())
        changes["note"] = f"{cfg.note}; overridden on the command line: {note}"
    return W.check_config(replace(cfg, **changes))


def run_width_command(args: argparse.Namespace) -> int:
    from coupled_curvature.reporting import width_page as R
    from coupled_curvature.numeric.models.cache import ModelCache
    from coupled_curvature.numeric.studies.width import run_width
    from coupled_curvature.base.output import check_folder, json_text, write_folder, write_texts

    cfg = width_config(args)
    check_folder(args.out, "experiment width")
    cache = ModelCache(args.cache)
    say(f"experiment width ({cfg.name}): {len(cfg.nets())} nets; cache {args.cache}")
    say("  exploratory: Kendall τ of each measure against the test−train gaps; no bound is claimed")
    t0 = time.perf_counter()
    result = run_width(cfg, cache=cache, progress=say, remeasure=args.remeasure)
    data = result.to_dict()
    data["seconds"] = time.perf_counter() - t0

    def fill(tmp: str) -> None:
        svgs = R.write_figures(data, tmp)
        files = {"width.json": json_text(data, indent=1) + "\n",
                 "width.md": R.render_markdown(data), "width.html": R.render_html(data, svgs)}
        write_texts(tmp, files)

    path = write_folder(args.out, "experiment width", fill)
    print(R.kendall_text(data))
    print()
    said, footnotes = footnote_repeats(R.sentences(data))
    print("\n".join(bullets(said, indent="")))
    print("\n".join(line for f in footnotes for line in wrap(f, hang="    ")))
    print(f"\n{len(data['runs'])} nets in {data['seconds']:.1f} s; report in {path}")
    return 0
