"""T9 for a network's own loss in Coq (T09_network_loss, T09_network_instance): the pinned statements derive
the ray's homogeneity degree from T2's ``net`` instead of assuming it, their hypotheses are local and said in
words, the pinned instances have content, and the report's T9 steps name them; with negative controls."""

from __future__ import annotations

from coupled_curvature.formal_claims import FORMAL_STEPS
from coupled_curvature.proofs import formal
from coupled_curvature.proofs.formal_hypotheses import hypotheses_in_words

LOSS = "T09_network_loss."
INST = "T09_network_instance."
THEOREMS = ("T9_net_ray_homogeneous", "T9_net_ray_closed_forms", "T9_net_closed_forms", "T9_net_k1_bound")


def _pins() -> dict[str, str]:
    return {n.removeprefix("CoupledCurvature."): " ".join(s.split()) for n, s in formal.statement_pins()["T9"]}


def test_network_theorems_derive_the_degree_from_the_net() -> None:
    pins = _pins()
    for name in THEOREMS:
        s = pins[LOSS + name]
        assert "T02_homogeneous_rescaling.eval sigma (T02_homogeneous_rescaling.plug C" in s, name
        assert "T09_network_homogeneity.unbiased N" in s, name
        assert "\\forall t \\near 1" not in s and "F i (t *: w)" not in s, name   # no ray hypothesis left
        assert formal.global_differentiability(s) == [], name
        assert all(w is not None for _, w in hypotheses_in_words(s)), name
        assert "'cV[R]_(h.+1 * i.+1)" in s, name                                  # the block's size, readable
    ray = pins[LOSS + "T9_net_ray_homogeneous"]
    assert "(unflat (t *: w)) 0 N)) x = t ^+ (k ^ (T09_network_homogeneity.depth N).+1) *:" in ray
    for name in ("T9_net_ray_closed_forms", "T9_net_closed_forms"):
        s = pins[LOSS + name]
        assert "let p := (k ^ (T09_network_homogeneity.depth N).+1)%N in" in s
        assert "= p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q" in s
    assert "dot w (grad L w) = p%:R * P /\\ quad (hess L w) w" in pins[LOSS + "T9_net_closed_forms"]
    k1 = pins[LOSS + "T9_net_k1_bound"]
    assert "sigma (c * z) = c ^+ 1 * sigma z" in k1 and "P != 0 -> 0 <= Q ->" in k1
    assert k1.endswith("& coupledD w (grad L w) (hess L w) <= Q / P ^+ 2]")


def test_network_instances_have_content() -> None:
    pins = _pins()
    sq, k1 = pins[INST + "T9_net_instance_sq"], pins[INST + "T9_net_instance_k1"]
    assert "(2 ^ (T09_network_homogeneity.depth (sqN R)).+1)%N = 4%N" in sq        # depth 2 around the block
    assert "(d1 L w w = 96 /\\ d2 L w w w = 800) /\\ dot w (grad L w) = 96 /\\ quad (hess L w) w = 800" in sq
    assert "[/\\ P = 12, Q = 18, P != 0 & 0 <= Q]" in k1
    assert "coupledD w (grad L w) (hess L w) = 9 / 80" in k1 and "Q / P ^+ 2 = 1 / 8" in k1
    assert formal.FORMAL_INSTANCES[LOSS + "T9_net_k1_bound"] == (INST + "T9_net_instance_k1",)
    for name in THEOREMS[:3]:
        assert set(formal.FORMAL_INSTANCES[LOSS + name]) == {INST + "T9_net_instance_sq", INST + "T9_net_instance_k1"}


def test_t9_steps_name_exactly_what_the_network_theorems_state() -> None:
    steps = FORMAL_STEPS["T9"]
    net = {s for s, names in steps.items() if any(n.startswith(LOSS) for n in names)}
    assert net == {"f(tW_l) = t^p f: wᵀg = d/dt L|_{t=1} = pP", "wᵀHw = d²/dt² L|_{t=1} = p(p-1)P + p²Q",
                   "k = 1 (p = 1): wᵀHw = Q for every layer",
                   "k = 1: D_l = (wᵀHw/‖w‖²)/‖g‖² with wᵀHw = Q: = (Q/P²)·cos²∠(w_l, g_l)"}
    # the Lagrange identity and the exponent recursion are not what a pinned theorem states
    assert not any(s.startswith(("Lagrange identity", "closed form", "induction step")) for s in steps)
    assert formal.unsupported_steps({"T9": steps}) == []
    # negative control: without the instances' pins, the network theorems lose their formal label
    pins = {t: [(n, s) for n, s in ps if ".T09_network_instance." not in n] for t, ps in formal.statement_pins().items()}
    why = {(n, w) for _, _, n, w in formal.unsupported_steps({"T9": steps}, pins)}
    assert (LOSS + "T9_net_k1_bound", "no pinned instance of its hypotheses") in why
    assert (LOSS + "T9_net_closed_forms", "no pinned instance of its hypotheses") in why


def test_a_global_pin_never_labels_a_step_formal(monkeypatch) -> None:
    """Even if FORMAL_STEPS named it, the catalogue does not label a step formal by a declared global pin;
    a local pin named the same way does label it (control)."""
    from coupled_curvature.proofs import catalogue
    from coupled_curvature.symbolic.methods import StepMethod

    glob, local = "T06_n1_classification.n1_affine_iff", "T06_n1_classification.n1_affine_near"
    monkeypatch.setitem(FORMAL_STEPS, "T6", {"by the global": (glob,), "by the local": (local,)})
    steps = [catalogue.CheckedStep(d, StepMethod.of("exact"), "exact", True) for d in ("by the global", "by the local")]
    catalogue._label_formal("T6", steps)
    assert [(s.label, s.formal) for s in steps] == [("exact", ()), ("formal", ("CoupledCurvature." + local,))]
