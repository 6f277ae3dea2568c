"""``ccurv track LOG_DIR [LOG_DIR2] [--out page.html]``: read the curvature log(s) a
:class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker` wrote, print a summary per block
(``D = (wᵀHw/wᵀw)/‖g‖²`` at the first and last record, and its range) and write one self-contained
HTML page with the curves (``D`` on a log scale beside the probe loss; ``RQ`` and ``D⁺`` when logged).

With two logs the summary adds, per block, at the steps both logged: the largest relative difference
of ``D`` and the range of the ratio ``RQ₂/RQ₁``. Worked example — a run and its rescaled twin: one
training run, logged by two trackers, the second one seeing ``layer_rescale(net, 0, 8.0)`` at every
step. The twin computes the same function, so its ``D`` curves coincide with the run's (T3) while
its ``RQ`` of layer 0 sits ``8⁻² = 1/64`` below and that of layer 1's weight ``64×`` above:

>>> import tempfile, torch
>>> from coupled_curvature.numeric import CurvatureTracker, layer_rescale, make_mlp
>>> from coupled_curvature.numeric.tracking import read_run
>>> g = torch.Generator().manual_seed(0)
>>> X, y = torch.randn(64, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (64,), generator=g)
>>> net, loss = make_mlp(5, [16], 3), torch.nn.CrossEntropyLoss()
>>> opt = torch.optim.SGD(net.parameters(), lr=0.1)
>>> run, twin = tempfile.mkdtemp(), tempfile.mkdtemp()
>>> t1 = CurvatureTracker(net, loss, (X, y), every=5, log_dir=run, measures=("D", "RQ"))
>>> t2 = CurvatureTracker(net, loss, (X, y), every=5, log_dir=twin, measures=("D", "RQ"),
...                       transform=lambda m: layer_rescale(m, 0, 8.0))
>>> for step in range(21):
...     opt.zero_grad(); loss(net(X), y).backward(); opt.step()
...     _ = t1.step(step), t2.step(step)
>>> t1.close(); t2.close()
>>> (_, a), (_, b) = read_run(run), read_run(twin)
>>> max(abs(q["D/0.weight"] / p["D/0.weight"] - 1) for p, q in zip(a, b)) < 1e-10
True
>>> round(b[-1]["RQ/0.weight"] / a[-1]["RQ/0.weight"] * 64, 9), round(b[-1]["RQ/2.weight"] / a[-1]["RQ/2.weight"], 6)
(1.0, 64.0)
>>> from coupled_curvature.cli import main
>>> main(["track", run, twin, "--out", run + "/page.html"])  # doctest: +ELLIPSIS
run 1: ...
0

The page is written atomically (a temporary file renamed into place); a folder without
``curvature.jsonl`` or a damaged line is refused, with the line named, before anything is written. An
incomplete last line (the run stopped while writing it) is left out with a note. ``--out`` never
names a log the command reads, and an existing file there is replaced only if it is a page this
command wrote (its generator tag), or with ``--force``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from coupled_curvature.commands._common import add_command, say
from coupled_curvature.reporting.terminal import number, table, wrap

__all__ = ["OWNER", "register", "run", "summary_rows", "comparison_rows"]

#: the line of ``ccurv --help`` that names the command, and the description its own ``--help`` opens with
HELP = "summarise and plot the curvature log(s) of CurvatureTracker (D per block over training)"
DESCRIPTION = ("Read LOG_DIR/curvature.jsonl (and LOG_DIR2's, e.g. a rescaled twin of the run), print D per "
               "block at the first and last record with its range, and write a self-contained HTML page of "
               "the curves (D, the probe loss, RQ and D⁺ when logged).")

#: the generator tag of the pages this command writes (an existing --out must carry it, or --force)
OWNER = "ccurv track"


def _values(records: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [r[key] for r in records if r.get(key) is not None]


def summary_rows(head: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Per block: ``D`` at the first and last record, its minimum and maximum (``-`` where none).

    >>> summary_rows({"blocks": ["w"]}, [{"step": 0, "D/w": 2.0}, {"step": 5, "D/w": None}, {"step": 9, "D/w": 1.0}])
    [['w', '2.000e+00', '1.000e+00', '1.000e+00', '2.000e+00']]
    """
    rows = []
    for b in head["blocks"]:
        key = f"D/{b}"
        first = records[0].get(key) if records else None
        last = records[-1].get(key) if records else None
        vals = _values(records, key)
        rows.append([b, *map(number, (first, last, min(vals) if vals else None, max(vals) if vals else None))])
    return rows


def comparison_rows(a: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]],
                    b: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> list[list[str]]:
    """Per block both runs hold, at the steps both logged: ``max |D₂/D₁ − 1|`` and the range of ``RQ₂/RQ₁``.

    >>> h = {"blocks": ["w"], "measures": ["D", "RQ"]}
    >>> ra = [{"step": 0, "D/w": 2.0, "RQ/w": 1.0}]
    >>> rb = [{"step": 0, "D/w": 2.0, "RQ/w": 4.0}]
    >>> comparison_rows((h, ra), (h, rb))
    [['w', '1', '0.000e+00', '4.000e+00', '4.000e+00']]
    """
    (ha, ra), (hb, rb) = a, b
    by_step = {r["step"]: r for r in rb}
    pairs = [(r, by_step[r["step"]]) for r in ra if r["step"] in by_step]
    rq = "RQ" in ha["measures"] and "RQ" in hb["measures"]
    rows = []
    for blk in [x for x in ha["blocks"] if x in hb["blocks"]]:
        dk, rk = f"D/{blk}", f"RQ/{blk}"
        dd = [abs(q[dk] / p[dk] - 1.0) for p, q in pairs if p[dk] and q[dk] is not None]
        ratios = [q[rk] / p[rk] for p, q in pairs if rq and p[rk] and q[rk] is not None]
        rows.append([blk, str(len(dd)), number(max(dd) if dd else None), number(min(ratios) if ratios else None),
                     number(max(ratios) if ratios else None)])
    return rows


def _describe(i: int, path: str, head: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    steps = f"steps {records[0]['step']}–{records[-1]['step']}" if records else "no records yet"
    errors = [r for r in records if r["error"] is not None]
    err = f"; {len(errors)} record(s) with an error, first at step {errors[0]['step']}: {errors[0]['error']}" \
        if errors else ""
    return (f"run {i}: {path}: {len(records)} record(s), {steps}, every {head['every']}, measures "
            f"{', '.join(head['measures'])}{err}")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "track", run, HELP, DESCRIPTION)
    p.add_argument("log_dir", metavar="LOG_DIR", help="a folder a CurvatureTracker(log_dir=...) wrote")
    p.add_argument("twin", metavar="LOG_DIR2", nargs="?", default=None,
                   help="a second run to draw beside the first (e.g. its rescaled twin)")
    p.add_argument("--out", default=None, help="the HTML page to write (default LOG_DIR/track.html); an existing "
                   "file is replaced only if it is a page ccurv track wrote, and never a log it reads")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out file that is not a page ccurv track wrote (never a log it reads)")


def run(args: argparse.Namespace) -> int:
    from coupled_curvature.numeric.tracking.records import FILENAME, read_log
    from coupled_curvature.base.output import check_file, write_file

    dirs = [args.log_dir] + ([args.twin] if args.twin is not None else [])
    out = args.out if args.out is not None else os.path.join(args.log_dir, "track.html")
    logs = [read_log(d) for d in dirs]  # every line checked before any work
    runs = [(log.head, log.records) for log in logs]
    guard = {"reads": [os.path.join(d, FILENAME) for d in dirs], "owner": OWNER, "force": args.force}
    check_file(out, "--out", **guard)
    lines = [f"note: run {i}: {os.path.join(d, FILENAME)} ends in an incomplete line (the run stopped while writing "
             "it, or is writing now); it is left out, as CurvatureTracker drops it when it resumes"
             for i, (d, log) in enumerate(zip(dirs, logs), 1) if log.dropped_partial]
    for i, (d, (head, recs)) in enumerate(zip(dirs, runs), 1):
        lines += wrap(_describe(i, d, head, recs), hang="  ")
        lines.append(table(["block", "D first", "D last", "D min", "D max"], summary_rows(head, recs)))
    notes = []
    if len(runs) == 2:
        comp = comparison_rows(runs[0], runs[1])
        notes.append("run 2 against run 1 at the steps both logged: the largest relative difference of D, and the "
                     "range of RQ₂/RQ₁ (a rescaled twin: D differences at rounding level, RQ ratios c^±2)")
        lines += wrap(notes[-1], hang="  ")
        lines.append(table(["block", "steps", "max|ΔD|/D", "RQ₂/RQ₁ min", "RQ₂/RQ₁ max"], comp))
    print("\n".join(lines))
    from coupled_curvature.reporting.track_page import render_page

    labels = [f"run {i}: {os.path.basename(os.path.normpath(d)) or d}" for i, d in enumerate(dirs, 1)]
    head_row = ["block", *(f"{lab} {c}" for lab in ("run 1", "run 2")[:len(runs)]
                           for c in ("D first", "D last", "D min", "D max"))]
    per_run = [summary_rows(h, r) for h, r in runs]
    names = [row[0] for row in per_run[0]]
    rows = [[n, *(c for pr in per_run for row in pr if row[0] == n for c in row[1:])] for n in names]
    rows = [r for r in rows if len(r) == len(head_row)]
    if len(runs) == 2:
        notes += ["comparison per block (steps, max|ΔD|/D, RQ₂/RQ₁ min, max): "
                  + "; ".join(f"{r[0]}: {r[1]}, {r[2]}, {r[3]}, {r[4]}" for r in comp)]
    page = render_page([(lab, h, r) for lab, (h, r) in zip(labels, runs)], rows=rows, head_row=head_row, owner=OWNER,
                       notes=[_describe(i, d, h, r) for i, (d, (h, r)) in enumerate(zip(dirs, runs), 1)] + notes)
    say(f"track: page written to {write_file(out, page, '--out', **guard)}")
    return 0
