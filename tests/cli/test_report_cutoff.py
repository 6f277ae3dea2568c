"""The report's "Cutoff sensitivity" section (reporting/cutoff_section.py): D⁺ against pinv_rtol, dense and Krylov.

The dense numbers are checked against an independent brute force (torch.func.hessian of the
loss in one parameter tensor, numpy eigh, the cutoff rule written out here); the section in the
three rendered formats is checked in test_report.py::test_report_contents.
"""

import numpy as np
import pytest
import torch
from torch.func import functional_call, grad, hessian

from coupled_curvature.numeric.studies import cutoff as cut
from coupled_curvature.reporting import cutoff_section as cs
from coupled_curvature.reporting.latex import tex_text

CE = torch.nn.CrossEntropyLoss()
EPS = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def section():
    return cut.cutoff_data(0)


@pytest.fixture(scope="module")
def brute(section):
    """Per plotted block: the cutoff rule applied by hand to numpy eigh of torch.func.hessian, on the whole grid."""
    net, X, y, _ = cut.cutoff_net(0)
    params = {n: p.detach() for n, p in net.named_parameters()}
    out = {}
    for name in section.blocks:
        shape = params[name].shape

        def f(flat, name=name, shape=shape):
            return CE(functional_call(net, {**params, name: flat.reshape(shape)}, (X,)), y)

        w = params[name].reshape(-1)
        g, H = grad(f)(w).numpy(), hessian(f)(w).numpy()
        w = w.numpy()
        lam, U = np.linalg.eigh(0.5 * (H + H.T))
        top = np.abs(lam).max()
        coeff2 = (U.T @ w) ** 2
        rows = []
        for rtol in cut.GRID:
            tau = rtol * top
            keep = np.abs(lam) > tau
            value = float((coeff2[keep] / lam[keep]).sum() / (w @ w) * (g @ g))
            near = bool(np.any(np.abs(np.abs(lam) - tau) <= 0.05 * tau + 1e3 * EPS * top))
            kept = np.abs(lam[keep])
            tol = max(1e-9, 1e3 * EPS * top / kept.min()) if kept.size else 1e-12
            rows.append({"value": value, "rank": int(keep.sum()), "near": near, "tol": tol})
        out[name] = rows
    return out


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def test_dense_curve_and_table_match_independent_eigh(section, brute):
    assert section.dense["rtols"] == list(cut.GRID) and set(cs.TABLE_RTOLS) <= set(cut.GRID)
    compared = 0
    for name in section.blocks:
        row = section.dense["blocks"][name]
        for i, ref in enumerate(brute[name]):
            if ref["near"]:
                continue  # an eigenvalue sits at the cutoff: the two eigensolvers may split it differently
            assert _rel(row["inverse_coupled"][i], ref["value"]) <= ref["tol"], (name, cut.GRID[i])
            assert row["rank"][i] == ref["rank"], (name, cut.GRID[i])
            compared += 1
    assert compared >= len(cut.GRID)
    # the printed table: 4 significant digits of the same numbers, ranks exact, the default row marked
    table = cs.cutoff_table(section)
    assert table[0] == ["block", "pinv_rtol", "D⁺ dense", "D⁺ Krylov", "Krylov converged", "rank kept"]
    assert len(table) == 1 + len(section.blocks) * len(cs.TABLE_RTOLS)
    checked = 0
    for block, rtol, dense, _, _, rank in table[1:]:
        r = float(rtol.split()[0])
        assert r in cs.TABLE_RTOLS and ("(default)" in rtol) == (r == cs.DEFAULT_RTOL)
        ref = brute[block][cut.GRID.index(r)]
        if not ref["near"]:
            assert _rel(float(dense), ref["value"]) <= max(6e-4, ref["tol"]), (block, rtol, dense, ref)
            assert rank == f"{ref['rank']} / {section.dense['blocks'][block]['size']}"
            checked += 1
    assert checked >= len(cs.TABLE_RTOLS)


def test_curve_is_piecewise_constant_with_jumps_where_the_rank_drops(section, brute):
    for name in section.blocks:
        row = section.dense["blocks"][name]
        v, rank = row["inverse_coupled"], row["rank"]
        steps = cut.jumps(v)
        assert steps, f"{name}: the plotted curve has no visible jump on the grid"
        for i in range(len(v) - 1):
            if rank[i] == rank[i + 1]:
                assert v[i] == v[i + 1], (name, i)  # same kept set, same value: constant between crossings
            assert rank[i + 1] <= rank[i]  # raising the cutoff only drops eigenvalues
        assert all(rank[i + 1] < rank[i] for i in steps)
        # and the independent spectrum jumps there as well
        ref = [r["value"] for r in brute[name]]
        assert any(i in cut.jumps(ref) for i in steps)
    # the blocks plotted are those that move most on the grid
    assert all(cut.jumps(section.dense["blocks"][b]["inverse_coupled"]) for b in section.blocks)
    assert min(section.scores[b] for b in section.blocks) >= max(
        (s for b, s in section.scores.items() if b not in section.blocks), default=0)


def test_krylov_column_is_the_krylov_path(section):
    """Would fail if the section ran the dense path twice: the Krylov record carries per-cutoff verdicts."""
    assert section.dense["method"] == "dense" and section.krylov["method"] == "krylov"
    assert section.krylov["rtols"] == section.dense["rtols"] and list(section.krylov["blocks"]) == list(section.blocks)
    table = cs.cutoff_table(section)[1:]
    for name in section.blocks:
        d, k = section.dense["blocks"][name], section.krylov["blocks"][name]
        assert d["converged"] is None and d["error"] is None
        assert all(isinstance(c, bool) for c in k["converged"]) and len(k["converged"]) == len(cut.GRID)
        assert all(isinstance(e, float) and e >= 0 for e in k["error"])
        pairs = [(x, y) for x, y, c in zip(d["inverse_coupled"], k["inverse_coupled"], k["converged"]) if c]
        assert len(pairs) >= 5 and k["converged"][-1]  # certified at the large cutoffs at least
        assert all(_rel(y, x) <= 1e-6 for x, y in pairs)
        assert any(x != y for x, y in zip(d["inverse_coupled"], k["inverse_coupled"]))  # computed apart
        for row in (r for r in table if r[0] == name):
            i = cut.GRID.index(float(row[1].split()[0]))
            assert row[3] == f"{k['inverse_coupled'][i]:.3e}" and row[4] == ("yes" if k["converged"][i] else "no")
    gap = cut.max_converged_gap(section)
    assert gap is not None and gap <= 1e-6 and f"{gap:.1e}" in cs.cutoff_text(section)[1]


def test_figure_draws_both_paths_as_steps_and_marks_the_default(section):
    from coupled_curvature.reporting.figures import cutoff_section_figure

    ax = cutoff_section_figure(section).axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    default = lines[f"default pinv_rtol = {cs.DEFAULT_RTOL:.0e}"]
    assert list(default.get_xdata()) == [cs.DEFAULT_RTOL] * 2
    for name in section.blocks:
        for path, key, style in (("dense", "dense", "-"), ("Krylov", "krylov", "--")):
            ln = lines[f"{name} ({path})"]
            vals = getattr(section, key)["blocks"][name]["inverse_coupled"]
            assert ln.get_linestyle() == style and ln.get_drawstyle() == "steps-post"
            assert list(ln.get_ydata()) == [abs(x) for x in vals if x not in (None, 0.0)]
    lo, hi = ax.get_xlim()
    assert lo <= cut.GRID[0] and hi >= cut.GRID[-1]


def test_text_states_the_formula_and_is_latex_safe(section):
    first, second = cs.cutoff_text(section)
    assert first.count(cs.FORMULA_TEXT) == 1 and "1e-10" in first and "piecewise constant" in first
    assert section.net in second and all(b in second for b in section.blocks)
    at = cut.GRID.index(cs.DEFAULT_RTOL)
    certified = sum(section.krylov["blocks"][b]["converged"][at] for b in section.blocks)
    assert f"{certified} of {len(section.blocks)} at the default pinv_rtol = 1e-10" in second
    for t in (first, second, cs.CAPTION, *(c for r in cs.cutoff_table(section) for c in r)):
        assert "?" not in tex_text(t), t  # every character has a LaTeX form


def test_deterministic_under_the_seed(section):
    again = cut._compute.__wrapped__(0)  # a fresh training and computation, not the cache
    assert again.blocks == section.blocks and again.scores == section.scores
    assert again.dense == section.dense and again.krylov == section.krylov


def test_docstring_examples(section):
    import doctest

    results = [doctest.testmod(m, raise_on_error=False) for m in (cs, cut)]  # rendering, and the section's data
    assert sum(r.failed for r in results) == 0 and sum(r.attempted for r in results) >= 6


def test_jumps_detects_only_visible_steps():
    assert cut.jumps([1.0, 1.0, 1.0]) == [] and cut.jumps([2.0, 1.0]) == [0]
    assert cut.jumps([1.0, 1.0 + 1e-6, None, 5.0]) == []
