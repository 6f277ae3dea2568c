"""The conveniences on a Diagnosis: strict JSON and back, flat() for loggers, to_dataframe() (pandas
extra), summary(), compare(), plot(), progress= on diagnose(), the table's unconverged mark."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
import tomllib
from pathlib import Path

import matplotlib
import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import coupled_curvature
from coupled_curvature import numeric
from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric import compare, diagnose, layer_rescale, neuron_rescale
from coupled_curvature.numeric.core.progress import Progress, progress_enabled
from coupled_curvature.numeric.core.results import BLOCK_MEASURES, BlockDiagnosis, Diagnosis
from tests.numeric._nets import data, mlp, reference_block, rel

CE = torch.nn.CrossEntropyLoss()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def net():
    model = mlp([3, 5, 4, 3], seed=3)
    X, y = data(24, (3,), 3, seed=4)
    return model, X, y


@pytest.fixture(scope="module")
def diag(net):
    model, X, y = net
    return diagnose(model, CE, (X, y))


def _block(name="w", **kw) -> BlockDiagnosis:
    base = dict(name=name, params=(name,), size=2, w_sq=4.0, g_sq=1.0, w_dot_g=0.5, wHw=8.0, rayleigh=2.0,
                coupled=2.0, wHpinvw=1.0, inverse_coupled=0.25, rank=2, cutoff=0.0)
    return BlockDiagnosis(**{**base, **kw})


def _same(a: object, b: object) -> bool:
    """Equality that counts nan equal to nan (recursively through lists and dicts)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _strict_loads(text: str):
    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


# ---- JSON ----------------------------------------------------------------------------------------

def test_to_json_is_strict_and_encodes_nonfinite_as_strings():
    d = Diagnosis([_block("a", wHw=math.inf, rayleigh=-math.inf, coupled=math.nan, inverse_coupled=None,
                          ritz_extremes=(0.5, math.inf), notes=("nan", "inf"))],
                  {"loss": math.inf, "method": "dense"})
    with pytest.raises(ValueError):  # negative control: the plain dict is not strict JSON
        json.dumps(d.to_dict(), allow_nan=False)
    parsed = _strict_loads(d.to_json())
    row = parsed["blocks"][0]
    assert (row["wHw"], row["rayleigh"], row["coupled"], row["inverse_coupled"]) == ("inf", "-inf", "nan", None)
    assert parsed["meta"] == {"loss": "inf", "method": "dense"}
    back = Diagnosis.from_json(d.to_json())
    assert _same(back.to_dict(), d.to_dict())
    assert back["a"].wHw == math.inf and math.isnan(back["a"].coupled) and back["a"].inverse_coupled is None
    assert back["a"].ritz_extremes == (0.5, math.inf) and back["a"].notes == ("nan", "inf")  # notes stay text


def test_json_round_trip_of_real_diagnoses(net):
    model, X, y = net
    for d in (diagnose(model, CE, (X, y), max_dense=10, method="dense"),  # some blocks without D⁺
              diagnose(model, CE, (X, y), method="krylov", krylov_max_iter=3)):  # ritz extremes, unconverged
        text = d.to_json(indent=None)
        _strict_loads(text)
        back = Diagnosis.from_json(text)
        assert back.to_dict() == d.to_dict()
        assert list(back) == list(d)  # the frozen dataclasses, tuples and all
        assert back.table() == d.table()


def test_mpmath_values_are_written_as_float64():
    d = Diagnosis([_block("a", coupled=mpmath.mpf(2) / 3, wHw=mpmath.mpf("inf"))], {"dps": 30})
    row = _strict_loads(d.to_json())["blocks"][0]
    assert row["coupled"] == 2.0 / 3.0 and row["wHw"] == "inf"


def test_from_dict_and_from_json_refuse_other_data():
    good = Diagnosis([_block()], {}).to_dict()
    bad = dict(good, blocks=[{k: v for k, v in good["blocks"][0].items() if k != "wHw"}])
    with pytest.raises(InvalidInputError, match="missing: wHw"):
        Diagnosis.from_dict(bad)
    with pytest.raises(InvalidInputError, match="'blocks' list"):
        Diagnosis.from_dict({"meta": {}})
    with pytest.raises(InvalidInputError, match="to_json"):
        Diagnosis.from_json("{not json")


# ---- flat ----------------------------------------------------------------------------------------

def test_flat_keys_values_and_missing(net):
    model, X, y = net
    d = diagnose(model, CE, (X, y), max_dense=10, method="dense")
    flat = d.flat()
    missing = [b.name for b in d if b.inverse_coupled is None]
    assert missing and all(f"D+/{n}" not in flat for n in missing)  # undefined: left out, never None
    assert all(isinstance(v, float) for v in flat.values())
    assert len(flat) == sum(getattr(b, f) is not None for b in d for f in BLOCK_MEASURES.values())
    for b in d:  # the values against an independent dense autograd Hessian of the block
        ref = reference_block(model, CE, X, y, list(b.params))
        assert rel(flat[f"D/{b.name}"], ref["coupled"]) <= 1e-10
        assert rel(flat[f"wHw/{b.name}"], ref["wHw"]) <= 1e-10 and rel(flat[f"g_sq/{b.name}"], ref["g_sq"]) <= 1e-10
    assert set(d.flat(prefix="curv/")) == {f"curv/{k}" for k in flat}


# ---- to_dataframe --------------------------------------------------------------------------------

def test_to_dataframe_with_pandas(net):
    pd = pytest.importorskip("pandas")
    model, X, y = net
    d = diagnose(model, CE, (X, y), max_dense=10, method="dense")
    df = d.to_dataframe()
    assert list(df.index) == d.names() and df.index.name == "name"
    for b in d:
        assert df.loc[b.name, "coupled"] == b.coupled and df.loc[b.name, "size"] == b.size
        assert df.loc[b.name, "params"] == b.params
        if b.inverse_coupled is None:
            assert df.loc[b.name, "inverse_coupled"] is pd.NA
        else:
            assert df.loc[b.name, "inverse_coupled"] == b.inverse_coupled
    assert str(df["inverse_coupled"].dtype) == "Float64" and str(df["rank"].dtype) == "Int64"
    assert df["scale_invariant"].tolist() == [b.scale_invariant for b in d]


def test_to_dataframe_without_pandas_says_how_to_install(monkeypatch, diag):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'coupled-curvature\[pandas\]'") as err:
        diag.to_dataframe()
    assert isinstance(err.value, ImportError) and isinstance(err.value, coupled_curvature.CoupledCurvatureError)


def test_pandas_is_an_optional_extra_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("pandas") for r in project["optional-dependencies"]["pandas"])
    assert not any(r.startswith("pandas") for r in project["dependencies"])


# ---- summary -------------------------------------------------------------------------------------

def test_summary_against_numpy(net):
    model, X, y = net
    d = diagnose(model, CE, (X, y), max_dense=10, method="dense")
    s = d.summary()
    D = np.array([b.coupled for b in d])
    Dp = np.array([b.inverse_coupled for b in d if b.inverse_coupled is not None])
    assert s.blocks == len(d) and s.parameters == sum(p.numel() for p in model.parameters())
    assert rel(s.d_median, float(np.median(D))) <= 1e-15
    pos = D[D > 0]
    assert rel(s.d_geometric_mean, float(np.exp(np.log(pos).mean()))) <= 1e-13
    assert rel(s.dplus_median, float(np.median(Dp))) <= 1e-15
    assert s.dplus_missing == tuple(b.name for b in d if b.inverse_coupled is None) and s.dplus_missing
    assert s.scale_invariant == () and s.dplus_unconverged == () and "geometric mean" in s.aggregation
    assert all(len(line) <= 100 for line in s.lines())


def test_summary_leaves_out_degenerate_and_nonpositive_blocks(net):
    blocks = [_block("a", coupled=2.0), _block("b", coupled=8.0), _block("neg", coupled=-1.0),
              _block("t10", w_dot_g=0.0, wHw=0.0, rayleigh=0.0, coupled=0.0),
              _block("g0", g_sq=0.0, coupled=None, inverse_coupled=None)]
    s = Diagnosis(blocks, {}).summary()
    assert s.scale_invariant == ("t10",) and s.d_blocks == ("a", "b", "neg") and s.d_positive == ("a", "b")
    assert s.d_median == 2.0 and rel(s.d_geometric_mean, 4.0) <= 1e-15
    assert s.d_undefined == ("g0",) and s.dplus_missing == ("g0",)
    model, X, y = net
    k = diagnose(model, CE, (X, y), method="krylov", krylov_max_iter=3).summary()
    # an unconverged Krylov D⁺ is None: missing, and never in the D⁺ aggregates
    assert k.dplus_unconverged and set(k.dplus_unconverged) <= set(k.dplus_missing)
    assert not set(k.dplus_unconverged) & set(k.dplus_blocks)
    assert Diagnosis([], {}).summary().d_median is None


# ---- compare -------------------------------------------------------------------------------------

def test_compare_under_layer_rescaling_and_a_nonuniform_neuron_scaling(net, diag):
    model, X, y = net
    c = compare(diag, diagnose(layer_rescale(model, 0, 4.0), CE, (X, y)))
    assert c.max_change("D") <= 1e-10 and c.max_change("D+") <= 1e-6
    assert c.max_change("RQ") >= 0.9 and c.max_change("g_sq") >= 0.9  # the raw curvature moves by c^∓2
    assert rel(c["0.weight"].RQ, 1 - 4.0**-2) <= 1e-10 and rel(c["2.weight"].RQ, 4.0**2 - 1) <= 1e-10
    scales = torch.linspace(0.5, 3.0, 5, dtype=torch.float64)
    moved = compare(diag, diagnose(neuron_rescale(model, 0, scales), CE, (X, y)))
    assert moved.max_change("D") >= 1e-2  # negative control: not conformal on the tensor blocks (T5)
    assert moved["4.weight"].D <= 1e-10  # a layer the scaling does not touch


@settings(max_examples=6, deadline=None, derandomize=True)
@given(c=st.floats(0.1, 10.0))
def test_compare_layer_rescaling_any_factor(net, diag, c):
    model, X, y = net
    ch = compare(diag, diagnose(layer_rescale(model, 1, c), CE, (X, y), inverse=False))
    assert ch.max_change("D") <= 1e-10 and ch.max_change("D+") is None


def test_compare_refuses_different_blocks(net, diag):
    model, X, y = net
    with pytest.raises(InvalidInputError, match="only in after: 0, 2, 4"):
        compare(diag, diagnose(model, CE, (X, y), blocks="layer", inverse=False))
    other = mlp([3, 6, 4, 3], seed=3)
    with pytest.raises(InvalidInputError, match=r"sizes differ: 0.weight \(15 vs 18\)"):
        compare(diag, diagnose(other, CE, (X, y), inverse=False))
    with pytest.raises(InvalidInputError, match="unknown measure"):
        compare(diag, diag).max_change("D-")
    with pytest.raises(InvalidInputError, match="two Diagnosis"):
        compare(diag, diag.to_dict())


def test_compare_table_and_lookup(diag):
    c = compare(diag, diag)
    lines = c.table().splitlines()
    assert lines[0].split() == ["block", "size", "ΔD", "ΔD+", "ΔRQ", "Δg_sq", "ΔwHw"]
    assert len(lines) == len(diag) + 2 and all(len(ln) <= 100 for ln in lines)
    assert c.max_change("D") == 0.0
    with pytest.raises(KeyError, match="blocks are"):
        c["nope"]


# ---- plot ----------------------------------------------------------------------------------------

def test_plot_bars_match_the_values(tmp_path, net):
    matplotlib.use("Agg")
    model, X, y = net
    d = diagnose(model, CE, (X, y), max_dense=10, method="dense")
    fig = d.plot()
    ax = fig.axes[0]
    heights = sorted(p.get_height() for p in ax.patches)
    expected = sorted(abs(v) for b in d for v in (b.coupled, b.inverse_coupled) if v)
    assert np.allclose(heights, expected, rtol=1e-12) and ax.get_yscale() == "log"
    hatched = sum(1 for p in ax.patches if p.get_hatch())
    assert hatched == sum(1 for b in d for v in (b.coupled, b.inverse_coupled) if v is not None and v < 0)
    fig.savefig(tmp_path / "d.png")
    assert (tmp_path / "d.png").stat().st_size > 1000
    with pytest.raises(InvalidInputError, match="at least one block"):
        Diagnosis([], {}).plot()


# ---- progress ------------------------------------------------------------------------------------

def test_progress_on_stderr_only_when_asked(net, capsys):
    model, X, y = net
    quiet = diagnose(model, CE, (X, y), progress=False, method="auto")
    assert capsys.readouterr() == ("", "")
    auto = diagnose(model, CE, (X, y), method="auto")  # None: stderr is not a terminal under pytest
    assert capsys.readouterr() == ("", "")
    loud = diagnose(model, CE, (X, y), progress=True, method="auto")
    out, err = capsys.readouterr()
    assert out == "" and f"diagnose {len(loud)}/{len(loud)}" in err and "curvature of 6 block(s)" in err
    assert "Gram route" in err
    assert all(len(line) <= 100 for line in err.splitlines())
    assert loud.to_dict() == quiet.to_dict() == auto.to_dict()
    k = diagnose(model, CE, (X, y), progress=True, method="krylov", krylov_max_iter=3)
    assert "Krylov D⁺ of 6 block(s)" in capsys.readouterr().err
    assert k.to_dict() == diagnose(model, CE, (X, y), method="krylov", krylov_max_iter=3).to_dict()
    with pytest.raises(InvalidInputError, match="progress must be"):
        diagnose(model, CE, (X, y), progress="yes")


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_auto_on_a_terminal_waits_before_its_first_line(net, monkeypatch):
    from coupled_curvature.numeric.core import progress  # progress_bar reads the delay there

    model, X, y = net
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(progress, "AUTO_DELAY", 1e6)  # a call shorter than the delay: silent
    diagnose(model, CE, (X, y))
    assert tty.getvalue() == ""
    monkeypatch.setattr(progress, "AUTO_DELAY", 0.0)
    diagnose(model, CE, (X, y))
    assert "\r  diagnose 6/6 [##########]" in tty.getvalue() and tty.getvalue().endswith("\n")


def test_progress_line_is_rewritten_on_a_terminal():
    out = _Tty()
    p = Progress("diagnose", 3, stream=out, every=0.0)
    for i in range(1, 4):
        p.update(i, "x" * 200)
    p.close()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert all(len(seg) <= 100 for seg in text.strip("\n").split("\r"))
    assert progress_enabled(None, out) and not progress_enabled(None, io.StringIO())


# ---- table, exports ------------------------------------------------------------------------------

def test_table_shows_no_value_for_unconverged_krylov_blocks(net, diag):
    model, X, y = net
    k = diagnose(model, CE, (X, y), method="krylov", krylov_max_iter=3)
    lines = k.table().splitlines()
    bad = [b for b in k if b.krylov_converged is False]
    assert bad
    for b in k:
        row = next(ln for ln in lines if ln.startswith(b.name + " "))
        assert (row.split()[6] == "-") == (b.krylov_converged is False), row
        if b.krylov_converged is False:  # the estimate is kept apart, and the note says why it is not D⁺
            assert b.inverse_coupled is None and b.krylov_estimate is not None
            assert any(ln.startswith(f"  {b.name}: D⁺ not computed: Lanczos did not converge") for ln in lines)
    assert not any("did not converge" in ln for ln in diag.table().splitlines())  # negative control
    head = diag.table().splitlines()[0].split()
    assert head == ["block", "size", "g_sq", "wHw", "RQ", "D", "D⁺", "rank"]
    assert {"size", "g_sq", "wHw", "rank"} <= {f.name for f in dataclasses.fields(BlockDiagnosis)}


def test_public_names():
    assert coupled_curvature.compare is numeric.compare is compare
    assert numeric.Summary is type(Diagnosis([_block()], {}).summary())
    assert {"compare", "Comparison", "Summary"} <= set(numeric.__all__)
    assert "compare" in coupled_curvature.__all__ and "MissingExtraError" in coupled_curvature.__all__
