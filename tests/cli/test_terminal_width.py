"""Every command's terminal output fits 100 columns (``COLUMNS=100``), and narrower terminals too.

Each command runs its quick form in-process (through the CLI's ``main``) and every line of stdout and
stderr is measured in display columns. The width checker is itself tested first (negative control:
a 101-column line is flagged, combining marks count 0 columns, wide characters 2). ``ccurv: error:``
lines are one line by contract (scripts grep them) and are not measured.
"""

from __future__ import annotations

import shutil
import unicodedata
from dataclasses import replace

import pytest

from coupled_curvature.cli import main
from coupled_curvature.reporting import terminal

LIMIT = 100


def columns(line: str) -> int:
    """Display columns of one line, written here independently of the package: combining marks 0,
    East Asian wide/fullwidth 2, everything else 1."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in line)


def overlong(text: str, limit: int = LIMIT) -> list[str]:
    return [f"{columns(line)}: {line}" for line in text.splitlines()
            if columns(line) > limit and not line.startswith("ccurv: error:")]


def assert_fits(capsys, limit: int = LIMIT) -> str:
    out, err = capsys.readouterr()
    assert overlong(out, limit) == [] and overlong(err, limit) == []
    return out


@pytest.fixture
def cols100(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(LIMIT))


# ------------------------------------------------------------------------- the checker


def test_the_checker_flags_a_101_column_line_and_measures_display_width():
    assert overlong("x" * 100) == [] and overlong("x" * 101) == [f"101: {'x' * 101}"]
    assert overlong("ok\n" + "D⁺" * 51) != []  # 102 columns of non-ASCII text
    assert columns("e\u0301" * 100) == 100 and overlong("e\u0301" * 100) == []  # combining acute: 0 columns
    assert columns("表" * 50) == 100 and overlong("表" * 51) != []  # wide characters: 2 columns each
    for text in ("D⁺ = wᵀH⁺w", "e\u0301", "表", "ε₆₄·κ_b"):  # the package's own measure agrees
        assert terminal.display_width(text) == columns(text)
    assert [n for n, _, _ in terminal.too_wide("a\n" + "b" * 101 + "\n" + "c" * 100)] == [2]


def test_terminal_width_follows_columns_capped_at_100(monkeypatch):
    for env, want in (("80", 80), ("100", 100), ("250", 100), ("12", terminal.MIN_COLUMNS)):
        monkeypatch.setenv("COLUMNS", env)
        assert terminal.terminal_width() == want
    monkeypatch.delenv("COLUMNS")
    assert terminal.terminal_width() == min(100, max(40, shutil.get_terminal_size((100, 24)).columns))


def test_wide_tables_split_into_panels_that_fit():
    head = ["measure"] + [f"symmetry{i}" for i in range(12)]
    rows = [[f"m{j}"] + [f"{j * i:.1e} m" for i in range(12)] for j in range(3)]
    for width in (60, 100):
        text = terminal.table(head, rows, width=width)
        assert overlong(text, width) == [] and text.count("measure") > 1  # split, key column repeated
        assert all(f"symmetry{i}" in text for i in range(12))  # nothing dropped
    assert terminal.table(head[:3], [r[:3] for r in rows], width=100).count("measure") == 1


# ------------------------------------------------------------------------- the commands


def test_help_of_every_command_fits(cols100, capsys):
    for argv in ([], ["check"], ["report"], ["explore"], ["experiment"], ["experiment", "invariance"],
                 ["experiment", "width"], ["diagnose"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        assert_fits(capsys)


def test_check_symbolic(cols100, capsys):
    assert main(["check", "--symbolic", "--only", "T4,T12"]) == 0
    out = assert_fits(capsys)
    assert "figure" in out and "steps by trust label" in out and "not checked in this run" in out
    assert out.count("steps by trust label") == 1  # the legend is said once


def test_check_numeric_quick(cols100, capsys):
    assert main(["check", "--numeric", "--quick", "--only", "T5,T12"]) == 0
    out = assert_fits(capsys)
    assert "figures: T5 min rel ΔD under non-uniform scaling; T12" in out.replace("\n", " ")


def test_check_formal_lines_fit(cols100, capsys, monkeypatch):
    """The ``--formal`` section with the real scope texts of every theorem and a failing pin; Coq's
    build and statement check are replaced by their recorded outcome (the real run is below, slow)."""
    from types import SimpleNamespace

    from coupled_curvature.commands.check import formal_section
    from coupled_curvature.proofs import formal

    pinned = formal.formal_theorems()
    results = [SimpleNamespace(theorem_id=t, name=n, ok=(t != "T7"), matches=(t != "T7"), axioms=[])
               for t, names in pinned.items() for n in names]
    monkeypatch.setattr(formal, "build", lambda: SimpleNamespace(seconds=41.7))
    monkeypatch.setattr(formal, "check_statements", lambda only: results)
    ok, _, status = formal_section([f"T{i}" for i in range(1, 13)], checked=True)
    out = assert_fits(capsys)
    assert not ok and status["T7"] == "FAILED" and "statement differs from its pin" in out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("coqc") is None, reason="coqc is not installed")
def test_check_formal_for_real(cols100, capsys):
    assert main(["check", "--symbolic", "--only", "T1,T7", "--formal"]) == 0
    assert "formal" in assert_fits(capsys)


def test_check_prints_the_t3_chain_within_the_width(cols100, capsys):
    """The full check's chain section, on a small trained 3-hidden-layer net (same block names)."""
    import torch

    from coupled_curvature.commands.check import _print_chain
    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.models.factory import build_for
    from coupled_curvature.numeric.models.training import fit
    from coupled_curvature.numeric.studies.invariance import chain_check

    data = load("wine", seed=0)
    net = build_for("mlp", [6, 6, 6], data, seed=0)
    fit(net, data.X_train, data.y_train, epochs=3, seed=0)
    result = chain_check(net, torch.nn.CrossEntropyLoss(), (data.X_train[:40], data.y_train[:40]), seed=0)
    _print_chain(result)
    assert "max rel change" in assert_fits(capsys)


@pytest.mark.slow
def test_report(cols100, capsys, tmp_path):
    assert main(["report", "--only", "T4", "--format", "md", "--out", str(tmp_path / "r")]) == 0
    assert_fits(capsys)


def test_explore_widest_matrix(cols100, capsys, tmp_path):
    """A deep linear net has the most applicable symmetries (7 columns)."""
    argv = ["explore", "--arch", "linear:4x2", "--dataset", "wine", "--epochs", "2", "--samples", "40",
            "--quick", "--measures", "D,rho,fisher_rao", "--out", str(tmp_path / "x")]
    assert main(argv) == 0
    out = assert_fits(capsys)
    assert out.count("cell: max relative deviation") == 1 and "orthogonal" in out
    assert overlong((tmp_path / "x" / "matrix.txt").read_text()) == []
    assert_notes_wrapped(out)


def assert_notes_wrapped(out: str) -> None:
    """The notes section holds the long conditioning and cost-control notes, wrapped (the width is
    checked by the caller), each said once."""
    notes = out.split("\nnotes:\n", 1)[1].split("\n\nsweep time", 1)[0]
    flat = " ".join(notes.split())
    for start in ("cost control: D⁺, D·D⁺, the Newton decrement", "tolerance for 'invariant' cells: 1e-9",
                  "each block is judged against max(1e-9, ε₆₄·κ_b)", "Newton decrement: on Linear/Conv"):
        assert flat.count(start) == 1, start
    assert len(notes.splitlines()) > notes.count("  - ")  # some notes took continuation lines


@pytest.mark.slow
def test_explore_quick_default_net(cols100, capsys, tmp_path):
    """The command of the width complaint as it is typed: ``COLUMNS=100 ccurv explore --quick``."""
    assert main(["explore", "--quick", "--out", str(tmp_path / "x")]) == 0
    assert_notes_wrapped(assert_fits(capsys))


def _matrix(n_alpha: int):
    """A synthetic matrix with every section the explorer can print: disagreements with long notes,
    conditioned tolerances, a BatchNorm eps sweep over many measures and a long layer sweep."""
    from coupled_curvature.numeric.studies.explorer import Cell, Matrix
    from coupled_curvature.numeric.studies.explorer_eps import EpsSweep
    from coupled_curvature.reporting.explore_page import DINH

    syms = ["layer", "neuron", "perm", "bn", "orthogonal", "gl", "nonlinear", "loss"]
    measures = list(DINH) + ["laplace_logdet", "adaptive_worst", "newton"]
    reason = ("conditioning: per block max(1e-9, ε₆₄·κ_b), κ_b the block's reported condition number "
              "(max|λ|/min kept |λ| on the pseudo-inverse route; largest over blocks and sweep ")
    cells = []
    for i, m in enumerate(measures):
        for j, s in enumerate(syms):
            bad = (i + j) % 7 == 0
            cells.append(Cell(m, s, 10.0 ** (-(i + j) % 17), ("invariant", "moves", "degenerate")[(i * j) % 3],
                              "T3: layer rescalings are conformal on every tensor block", not bad,
                              "eps-limited: deviation ∝ eps^1.00 over eps 1e-08…1e-14; " * 3 if bad else "",
                              1e-9 * (1 + i * j), reason + f"{1e5 * (1 + i * j):.2g})"))
    xs = [2.0 ** k for k in range(-n_alpha // 2, n_alpha // 2 + 1)]
    values = {"layer": {m: [(x, 1.5 * x) for x in xs] for m in measures}}
    ev = EpsSweep([1e-8, 1e-10, 1e-12, 1e-14], [1e-9] * 4, {m: [1e-3, 1e-5, 1e-7, 1e-9] for m in measures},
                  {m: 1.0 for m in measures})
    return Matrix(measures, syms, cells, values, {s: [("a", 1e-16)] for s in syms}, 3.0,
                  {m: 0.1 for m in measures}, ["a long note " * 30, "another"], ev)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_explore_text_of_a_crowded_matrix_fits(width):
    from coupled_curvature.commands.explore import render_terminal

    text = render_terminal(_matrix(12), width)
    assert overlong(text, width) == []
    flat = " ".join(text.split())  # wrapped lines joined again
    assert flat.count("detail: conditioning: per block") == 1  # the shared reason said once
    assert flat.count("T3: layer rescalings are conformal") == len([c for c in _matrix(12).cells if not c.agrees])
    assert flat.count("α=") == 13 and flat.count("cell: max relative deviation") == 1


def test_explore_text_negative_control():
    """The old renderer of the same matrix overflows 100 columns: the check above can fail."""
    from coupled_curvature.reporting.explore_page import render_text

    assert overlong(render_text(_matrix(12))) != []


def test_experiment_invariance(cols100, capsys, tmp_path, monkeypatch):
    from coupled_curvature.numeric.studies import invariance_experiment as E

    original = E.quick_config

    def tiny(seed: int = 0):
        nets = (E.NetSpec("breast_cancer", "mlp-nobias", (5, 5), seed), E.NetSpec("wine", "mlp-bn", (4,), seed))
        return replace(original(seed), nets=nets, epochs=2, measure_samples=40, neuron_trials=2,
                       lanczos_iter=12, max_dense=200)

    monkeypatch.setattr(E, "quick_config", tiny)
    argv = ["experiment", "invariance", "--quick", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]
    assert main(argv) == 0
    out = assert_fits(capsys)
    assert "breast_cancer mlp-nobias 2×5 s0" in out and out.count("nΔD med/min:") == 1


def test_experiment_width(cols100, capsys, tmp_path):
    argv = ["experiment", "width", "--quick", "--widths", "4,8", "--depths", "1,2", "--seeds", "2",
            "--max-epochs", "4", "--samples", "30", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]
    assert main(argv) == 0
    out = assert_fits(capsys)
    assert out.count("interval from only 2 seeds") == 1  # the repeated caveat said once, as a footnote


def test_diagnose(cols100, capsys):
    assert main(["diagnose", "--dataset", "wine", "--arch", "mlp:8x2", "--epochs", "2", "--max-dense", "50",
                 "--method", "dense"]) == 0
    out = assert_fits(capsys)
    assert "above max_dense=50" in out and "rank" in out


def test_narrow_terminal(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "72")
    assert main(["check", "--symbolic", "--only", "T4"]) == 0
    assert_fits(capsys, 72)
