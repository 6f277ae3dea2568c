"""Rewrite rules (with negative controls), public API, doctests, and the no-torch rule."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest
import sympy as sp

import coupled_curvature.symbolic as S
from coupled_curvature.symbolic.derivation import Derivation
from coupled_curvature.symbolic.functions import activation
from coupled_curvature.symbolic.homogeneous import two_layer_generic
from coupled_curvature.symbolic.rules import homogeneity, positivity, sum_linearity, sum_reindex


def test_homogeneity_rule_with_wrong_degree_is_rejected():
    """Same step machinery: the c^-k output law passes with degree k and fails with k+1."""
    G = two_layer_generic()
    c, k = sp.Symbol("c", positive=True), sp.Symbol("k", positive=True)
    i, n1, W2, b2, r, sig = G["i"], G["n1"], G["W2"], G["b2"], G["r"], G["sig"]
    z = sp.Symbol("z")
    s1 = c ** (-k) * sp.Sum(W2[r, i] * sig(c * z), (i, 0, n1 - 1)) + b2[r]
    s2 = c ** (-k) * sp.Sum(c**k * W2[r, i] * sig(z), (i, 0, n1 - 1)) + b2[r]
    good, bad = Derivation("pos", "ok"), Derivation("neg", "wrong degree")
    good.rewrite(homogeneity(k, {c}), "σ(cz) = c^k σ(z)", s1, s2)
    bad.rewrite(homogeneity(k + 1, {c}), "σ(cz) = c^(k+1) σ(z) claimed equal to c^k law", s1, s2)
    assert good.ok and not bad.ok
    assert (bad.steps[0].method.kind, bad.steps[0].method.rule) == ("rewrite", "sigma_homogeneity")


def test_homogeneity_rule_needs_declared_positive_scale():
    s, _, _ = activation()
    c, z, k = sp.Symbol("c"), sp.Symbol("z"), sp.Symbol("k")
    assert homogeneity(k, set())(s(c * z)) == s(c * z)  # c not declared positive: no rewrite
    assert homogeneity(k, {c})(s(c * z)) == c**k * s(z)


def test_sum_rules_and_positivity():
    j, n = sp.Symbol("j", integer=True), sp.Symbol("n", integer=True, positive=True)
    a, c = sp.IndexedBase("a"), sp.Symbol("c")
    assert sum_linearity(sp.Sum(c * a[j], (j, 0, n - 1))) == c * sp.Sum(a[j], (j, 0, n - 1))
    pi = sp.Function("pi")
    assert sum_reindex(pi)(sp.Sum(a[pi(j)] ** 2, (j, 0, n - 1))) == sp.Sum(a[j] ** 2, (j, 0, n - 1))
    # depends on j outside π(j): not a valid re-indexing, left alone
    e = sp.Sum(j * a[pi(j)], (j, 0, n - 1))
    assert sum_reindex(pi)(e) == e
    x, y = sp.symbols("x y")
    assert positivity({x, y})(1 / (x + y) ** 2) is sp.true
    assert positivity({x})(x - y) == x - y
    d = Derivation("neg", "x - 1 > 0")
    d.rewrite(positivity({x}), "x - 1 > 0", x - 1, sp.true)
    assert not d.ok


def test_derive_and_derive_all_api():
    from coupled_curvature.base.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="valid ids: T1, T2, T3"):
        S.derive("T0")
    assert list(S.THEOREMS) == [f"T{i}" for i in range(1, 15)]
    assert callable(S.derive_all)
    import coupled_curvature

    assert coupled_curvature.witness is S.witness


def _modules():
    import coupled_curvature.symbolic as pkg

    return ["coupled_curvature.symbolic"] + [f"coupled_curvature.symbolic.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]


@pytest.mark.parametrize("modname", _modules())
def test_public_functions_have_docstrings(modname):
    mod = importlib.import_module(modname)
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if callable(obj):
            assert obj.__doc__, f"{modname}.{name} has no docstring"


def test_symbolic_never_imports_torch():
    code = (
        "import sys, coupled_curvature.symbolic as s, importlib, pkgutil\n"
        "[importlib.import_module('coupled_curvature.symbolic.' + m.name) for m in pkgutil.iter_modules(s.__path__)]\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_heuristic_zero_tests_in_source():
    import pathlib

    root = pathlib.Path(S.__file__).parent
    bad = ["simpl" + "ify(", ".equ" + "als("]
    for f in root.glob("*.py"):
        text = f.read_text()
        for b in bad:
            assert b not in text, f"{f.name} uses {b}"
