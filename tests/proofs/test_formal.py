"""The Coq development: it builds, every pinned statement is what Coq prints, no axioms of ours.

Pinned statements live in ``proofs/coq/statements/<ID>.txt`` (``T04.txt`` is catalogue id ``T4``),
one block per headline theorem::

    == CoupledCurvature.<Module>.<name>
    <the statement exactly as coqc prints it for ``Check <name>.``>

in the printing context ``coupled_curvature.proofs.formal.PREAMBLE`` (MathComp and mathcomp-analysis
notations, ``Defs``, ``DefsAnalytic`` and the theorem's own module imported).  Lines starting with ``#`` before the first
block are comments.  Comparison ignores only whitespace.  ``Print Assumptions`` of each pinned
theorem must be "Closed under the global context" or list only axioms of the real-number
libraries (``formal.ALLOWED_AXIOMS``: Coq Reals' ``sig_forall_dec``, ``sig_not_dec``,
``functional_extensionality_dep``; mathcomp-analysis boolp's ``functional_extensionality_dep``,
``propositional_extensionality``, ``constructive_indefinite_description``).
"""

from __future__ import annotations

import pytest

from coupled_curvature.proofs import formal

needs_coq = pytest.mark.skipif(not formal.coq_available(),
                               reason="coqc is not installed (" + formal.INSTALL_HINT + ")")


@pytest.fixture(scope="module")
def built() -> formal.BuildResult:
    if not formal.coq_available():
        pytest.skip("coqc is not installed (" + formal.INSTALL_HINT + ")")
    return formal.build(jobs=2)


@pytest.fixture(scope="module")
def checks(built: formal.BuildResult) -> list[formal.StatementCheck]:
    return formal.check_statements()


def test_sources_found_and_pins_parsed() -> None:
    d = formal.coq_dir()
    assert d is not None and (d / "_CoqProject").is_file()
    thms = formal.formal_theorems()
    for tid in ("T3", "T4", "T7", "T8", "T11", "T12"):
        assert thms.get(tid), f"no pinned statements for {tid}"
    for names in thms.values():
        assert len(names) == len(set(names))
        assert all(n.startswith("CoupledCurvature.") and n.count(".") == 2 for n in names)


def test_no_admitted_or_axioms_in_sources() -> None:
    assert formal.forbidden_vernacular() == []


def test_forbidden_vernacular_detects(tmp_path) -> None:
    (tmp_path / "_CoqProject").write_text("-Q . X\n")
    (tmp_path / "Bad.v").write_text("(* Admitted in a comment is fine *)\nAxiom ax : False.\n"
                                    "Lemma l : False. Proof. admit. Admitted.\n")
    words = [w for _, _, w in formal.forbidden_vernacular(tmp_path)]
    assert words == ["Axiom", "admit", "Admitted"]


@needs_coq
def test_build(built: formal.BuildResult) -> None:
    for v in built.coq_dir.glob("*.v"):
        vo = v.with_suffix(".vo")
        assert vo.is_file() and vo.stat().st_mtime >= v.stat().st_mtime, v.name


@needs_coq
def test_every_pinned_statement_matches(checks: list[formal.StatementCheck]) -> None:
    pinned = sum(len(v) for v in formal.formal_theorems().values())
    assert len(checks) == pinned
    bad = [(c.name, c.printed) for c in checks if not c.matches]
    assert bad == []


@needs_coq
def test_assumptions_only_real_number_library(checks: list[formal.StatementCheck]) -> None:
    bad = [(c.name, c.axioms) for c in checks if not c.axioms_allowed]
    assert bad == []
    # the algebraic modules are pure MathComp algebra: no axioms at all
    algebraic = ("T03_c_minus_two_law", "T04_invariance_group", "T07_pseudo_inverse", "T08_monotonicity",
                 "T11_larger_groups", "T12_loss_scaling")
    mine = [c for c in checks if c.name.split(".")[1] in algebraic]
    assert mine and all(c.axioms == () for c in mine)


def test_axiom_allow_list() -> None:
    assert formal._axiom_allowed("ClassicalDedekindReals.sig_forall_dec")
    assert formal._axiom_allowed("boolp.propositional_extensionality")
    assert not formal._axiom_allowed("my_axiom")
    assert not formal._axiom_allowed("Classical_Prop.classic")
    out = "Axioms:\nClassicalDedekindReals.sig_not_dec : forall P : Prop, {~ ~ P} + {~ P}\n" \
          "FunctionalExtensionality.functional_extensionality_dep\n  : forall ...\n"
    assert formal._parse_assumptions(out) == (
        "ClassicalDedekindReals.sig_not_dec", "FunctionalExtensionality.functional_extensionality_dep")
    assert formal._parse_assumptions("Closed under the global context\n") == ()


@needs_coq
def test_negative_controls(built: formal.BuildResult) -> None:
    """An altered statement and an unknown name are reported as not matching."""
    name, stmt = formal.statement_pins()["T4"][2]
    assert "conformal A" in stmt
    weakened = stmt.replace("<->\n       conformal A", "->\n       conformal A")
    assert weakened != stmt
    pins = {"T4": [(name, stmt), (name, weakened),
                   ("CoupledCurvature.T04_invariance_group.no_such_theorem", "True")]}
    ok, altered, missing = formal.check_statements(pins=pins)
    assert ok.matches and ok.ok
    assert not altered.matches and altered.printed == ok.printed
    assert missing.printed is None and not missing.matches


def test_missing_coqc_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(formal.shutil, "which", lambda _name: None)
    assert not formal.coq_available()
    for call in (formal.build, formal.check_statements):
        with pytest.raises(formal.CoqUnavailableError, match="apt-get install coq libcoq-mathcomp"):
            call()
    assert issubclass(formal.CoqUnavailableError, formal.CoupledCurvatureError)


# ---- honest labels: local hypotheses, and a pinned instance that shows they can hold ----

_GLOBAL = "forall (L : V -> R), (forall y : V, differentiable L y) -> P L"
_NEAR = ("forall (L : V -> R) (w : V), (\\forall y \\near w, differentiable L y) -> "
         "(forall j : I, differentiable [eta d1 L (e j)] w) -> P L")


def test_global_differentiability_is_recognised() -> None:
    assert formal.global_differentiability(_GLOBAL) == ["y"]
    assert formal.global_differentiability(_NEAR) == []
    everywhere = "(forall x : R, is_derive x 1 phi (dphi x)) -> (forall x : R, dphi x = 0)"
    assert formal.global_differentiability(everywhere) == ["x"]
    at_w = "(forall i j : I, derivable [eta d1 L (e R j)] w (e R i)) -> Q"
    assert formal.global_differentiability(at_w) == []
    # the statement's own parameters: differentiable at the point x the theorem is about, not everywhere
    # a pinned statement may not open with differentiability at its own point variable either: the rule
    # reads "forall x, differentiable f x -> …" as the hypothesis it would be inside a premise
    at_x = "forall (f : V -> R) (x v : V), differentiable f x -> d1 f v x = 0"
    assert formal.global_differentiability(at_x) == ["x"]
    inner = "forall (f : V -> R) (v : V), (forall x : V, differentiable f x) -> d1 f v v = 0"
    assert formal.global_differentiability(inner) == ["x"]


_INTERNALS = ("NormedModule", "Phantom", "normedtype.", "topology.", "derive.", "reals.", "DefsAnalytic.",
              "matrix_normedModType", "numFieldType")


def _internals(statement: str) -> list[str]:
    return [w for w in _INTERNALS if w in statement]


def test_pins_print_with_notations() -> None:
    """No pin shows a library's internals: the analytic statements print with mathcomp-analysis' notations
    (differentiable f x, \\forall y \\near x, 'cV[R]_(n.+1)) in the printing context formal.PREAMBLE."""
    bad = [(n, _internals(s)) for ps in formal.statement_pins().values() for n, s in ps if _internals(s)]
    assert bad == []
    # negative control: the raw printing of a differentiability hypothesis is caught
    raw = ("forall (L : normedtype.NormedModule.sort (normedtype.matrix_normedModType (reals.Real.numFieldType R) "
           "n 0) -> R), derive.differentiable_def L (Phantom _ (topology.filter_of (Phantom _ w)))")
    assert len(_internals(raw)) >= 5


def test_every_pin_with_derivatives_everywhere_is_declared_global() -> None:
    """A pin may speak of derivatives at every point only when GLOBAL_PINS declares it, with the reason;
    a declaration must name a pin that is global. Such a pin never labels a step formal."""
    assert formal.undeclared_global_pins() == []
    pinned = {n.removeprefix("CoupledCurvature."): s for ps in formal.statement_pins().values() for n, s in ps}
    flagged = {n for n, s in pinned.items() if formal.global_differentiability(s)}
    assert flagged == set(formal.GLOBAL_PINS) and "T06_n1_classification.n1_affine_iff" in flagged
    assert all(len(why) > 20 for why in formal.GLOBAL_PINS.values())
    # negative controls: an undeclared global pin, a stale declaration, a local statement declared global
    pins = {"TX": [("CoupledCurvature.X.glob", _GLOBAL), ("CoupledCurvature.X.near", _NEAR)]}
    found = formal.undeclared_global_pins(pins, declared={"X.near": "said to be global", "X.gone": "old"})
    assert sorted(found) == [("X.glob", "differentiability at every point, not declared in GLOBAL_PINS"),
                             ("X.gone", "declared in GLOBAL_PINS but not pinned"),
                             ("X.near", "declared in GLOBAL_PINS but its statement is local")]
    # a declared global pin named by a step is refused, with the declared reason
    name = "T06_n1_classification.n1_affine_iff"
    steps = {"T6": {"n=1 classification": (name,)}}
    why = formal.unsupported_steps(steps)
    assert [(s, n) for _, s, n, _ in why] == [("n=1 classification", name)]
    assert why[0][3].startswith("declared global (GLOBAL_PINS): ") and formal.GLOBAL_PINS[name] in why[0][3]


def test_formal_steps_have_local_hypotheses_and_pinned_instances() -> None:
    """A step is formal only if its pinned theorem has local hypotheses and a pinned instance shows
    they can hold (FORMAL_INSTANCES); the rule fails on a global hypothesis or a missing instance."""
    from coupled_curvature.formal_claims import FORMAL_STEPS

    assert formal.unsupported_steps() == []
    pinned = {n.removeprefix("CoupledCurvature.") for ps in formal.statement_pins().values() for n, _ in ps}
    for thm, instances in formal.FORMAL_INSTANCES.items():
        assert thm in pinned and instances and all(i in pinned for i in instances), thm
    named = {n for steps in FORMAL_STEPS.values() for ns in steps.values() for n in ns}
    assert "T03_network_law.T3_network_W" in named
    # negative controls: a global-differentiability statement, a theorem with hypotheses and no instance
    pins = {"TX": [("CoupledCurvature.X.glob", _GLOBAL), ("CoupledCurvature.X.noinst", "forall a : R, a != 0 -> a = a"),
                   ("CoupledCurvature.X.nohyp", "forall a : R, a = a")]}
    steps = {"TX": {"s1": ("X.glob",), "s2": ("X.noinst",), "s3": ("X.nohyp",), "s4": ("X.missing",)}}
    why = {(s, w) for _, s, _, w in formal.unsupported_steps(steps, pins)}
    assert why == {("s1", "differentiability at every point"), ("s2", "no pinned instance of its hypotheses"),
                   ("s4", "not pinned")}


def test_t3_headline_states_the_network_loss() -> None:
    """The pinned T3 headline mentions the forward pass, a derivative of its loss and D."""
    pins = dict(formal.statement_pins()["T3"])
    s = pins["CoupledCurvature.T03_network_law.T3_network_W"]
    for word in ("eval sigma", "plug C", "grad L", "hess L'", "coupledD (c *: w)",
                 "coupledDplus"):
        assert word in s, word
    assert "differentiable" not in s   # no differentiability hypothesis at all
    inst = pins["CoupledCurvature.T03_network_instance.T3_deep_linear_instance"]
    assert "differentiable" in inst and "grad L w = 60%:M" in inst


def test_t3_permutation_end_to_end_is_pinned() -> None:
    """A permutation of layer l's units, end to end: the pinned statement mentions the forward pass, the
    derivatives of the loss, D and D⁺, has no hypothesis, and its instance has content."""
    from coupled_curvature.proofs.formal_hypotheses import premises

    pins = dict(formal.statement_pins()["T3"])
    for name in ("T3_network_perm_W", "T3_network_perm_b"):
        s = pins[f"CoupledCurvature.T03_network_perm.{name}"]
        for word in ("eval sigma", "plug C", "perm_mx p", "grad L'", "hess L'",
                     "coupledD (", "coupledDplus ("):
            assert word in s, (name, word)
        assert premises(s)[0] == []                     # no hypothesis at all
        assert "differentiable" not in s
    inst = pins["CoupledCurvature.T03_network_perm.T3_network_perm_instance"]
    assert "differentiable" in inst and "perm_mx p *m b != b" in inst and "grad L b = 2 *:" in inst


def test_t9_closed_forms_are_pinned() -> None:
    """T9's network closed forms: the pinned statements mention the sample-sum loss, P and Q and the
    closed forms, their hypotheses are local (near 1, at f_i, near w) and said in words, and the pinned
    instance has content (P = 2 <> 0, not a constant function)."""
    from coupled_curvature.proofs.formal_evidence import global_differentiability
    from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words
    from coupled_curvature.formal_claims import FORMAL_STEPS

    pins = dict(formal.statement_pins()["T9"])
    ray = pins["CoupledCurvature.T09_closed_forms.T9_ray_closed_forms"]
    k1 = pins["CoupledCurvature.T09_closed_forms.T9_k1_closed_forms"]
    for s in (ray, k1):
        for word in (r"\sum_(i < N) ell i (F i v)", "d1 (ell i) (F i w) (F i w)",
                     "d2 (ell i) (F i w) (F i w) (F i w)", "\\forall t \\near 1"):
            assert word in s, word
        assert global_differentiability(s) == []
        assert all(w is not None for _, w in hypotheses_in_words(s))
    assert "d2 L w w w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q" in ray
    assert "quad (hess L w) w = Q" in k1 and "Q / P ^+ 2 *" in k1
    inst = pins["CoupledCurvature.T09_closed_forms.T9_closed_forms_instance"]
    assert "f 0 0 ^+ 2" in inst and "(F i w) (F i w) = 2]" in inst
    names = {n for steps in FORMAL_STEPS["T9"].values() for n in steps}
    assert names == {"T09_closed_forms.T9_ray_closed_forms", "T09_closed_forms.T9_k1_closed_forms",
                     "T09_closed_forms_grad.T9_closed_forms_grad", "T09_closed_forms_grad.T9_k1_closed_forms_grad",
                     "T09_network_loss.T9_net_closed_forms", "T09_network_loss.T9_net_ray_closed_forms",
                     "T09_network_loss.T9_net_k1_bound"}


def test_t9_closed_forms_grad_are_pinned() -> None:
    """T9's closed forms as derive_T9 states them: P = Σ⟨∇ℓ_i(f_i), f_i⟩ and Q = Σ f_iᵀ∇²ℓ_i(f_i)f_i with
    wᵀg and wᵀHw of L on the left, local hypotheses said in words, the hypotheses of the directional
    theorem derived (not assumed), and two instances with two weights, a target 1 and nonzero numbers
    (p = 1 and p = 2)."""
    from coupled_curvature.proofs.formal_evidence import FORMAL_INSTANCES, global_differentiability
    from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words
    from coupled_curvature.formal_claims import FORMAL_STEPS

    pins = dict(formal.statement_pins()["T9"])
    mod = "CoupledCurvature.T09_closed_forms_grad."
    gen, k1 = pins[mod + "T9_closed_forms_grad"], pins[mod + "T9_k1_closed_forms_grad"]
    for s in (gen, k1):
        assert global_differentiability(s) == []
        assert all(w is not None for _, w in hypotheses_in_words(s))
    for s in (gen, k1):
        for word in ("let P := \\sum_(i < N) dot (grad (ell i) (F i w)) (F i w)",
                     "let Q := \\sum_(i < N) quad (hess (ell i) (F i w)) (F i w)",
                     "T01_analytic.differentiable_near (ell i) (F i w)", "\\forall t \\near 1"):
            assert word in " ".join(s.split()), word
        assert "derivable" not in s          # the directional hypotheses are derived, not assumed
    assert "dot w (grad L w) = p%:R * P /\\" in gen
    assert "quad (hess L w) w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q" in gen
    assert "quad (hess L w) w = Q" in k1 and "Q / P ^+ 2 *" in k1
    i1, i2 = (" ".join(pins[mod + n].split()) for n in ("T9_closed_forms_grad_instance",
                                                        "T9_closed_forms_grad_instance_p2"))
    assert "const_mx (v 0 0 + 2 * v 1 0)" in i1 and "(f 0 0 - 1) ^+ 2" in i1 and "t ^+ 1 *: F i w" in i1
    assert "(F i w) = 12 /\\" in i1 and "(F i w) = 18 &" in i1
    assert "dot w (grad L w) = 12 /\\ quad (hess L w) w = 18]" in i1
    assert "const_mx (v 0 0 * v 1 0)" in i2 and "t ^+ 2 *: F i w" in i2 and "(F i w) = 4 /\\" in i2
    assert "dot w (grad L w) = 8 /\\ quad (hess L w) w = 40]" in i2
    for n in {n for steps in FORMAL_STEPS["T9"].values() for n in steps if n.startswith("T09_closed_forms_grad.")}:
        assert "T09_closed_forms_grad.T9_closed_forms_grad_instance" in FORMAL_INSTANCES[n]


def test_t3_relu_instance_is_pinned() -> None:
    """Instance (b) of T3_network_W: a ReLU network at a point where no hidden pre-activation is 0 (one > 0, one
    < 0); its hypotheses are proved there (the loss agrees near the point with its linear region's polynomial), the
    gradient is nonzero, and the law's conclusions are stated; the near-agreement lemmas are pinned with local
    hypotheses only."""
    from coupled_curvature.proofs.formal_hypotheses import premises

    pins = dict(formal.statement_pins()["T3"])
    inst = pins["CoupledCurvature.T03_relu_instance.T3_relu_instance"]
    for word in ("T02_homogeneous_rescaling.relu (R:=", "differentiable_near L w", "d1 L (e j)", "grad L w != 0",
                 "0 < (T03_network_law.unvec w *m 1%:M + 0) 0 0", "(T03_network_law.unvec w *m 1%:M + 0) 1 0 < 0",
                 "coupledD (c *: w) g' H' = coupledD w g H", "coupledDplus (c *: w) g' H'"):
        assert word in " ".join(inst.split()), word
    assert premises(inst)[0] == []
    assert "T03_relu_instance.T3_relu_instance" in formal.FORMAL_INSTANCES["T03_network_law.T3_network_W"]
    nxt = " ".join(pins["CoupledCurvature.T03_relu_instance.T3_relu_next_instance"].split())
    assert "grad L w != 0" in nxt and "let a := c ^- 1 in" in nxt and premises(nxt)[0] == []
    assert "T03_relu_instance.T3_relu_next_instance" in formal.FORMAL_INSTANCES["T03_network_law.T3_network_next_out"]
