"""What the formal evidence must satisfy besides compiling: the rules of SPEC §6 made checkable.

- No ``Admitted``/``admit``/``Axiom``/``Parameter``/``Conjecture`` in the sources
  (:func:`forbidden_vernacular`).
- A pinned theorem that a ``formal`` step names has local hypotheses: no hypothesis of the form
  "for every point y, L is differentiable (derivable, has a derivative) at y"
  (:func:`global_differentiability` finds them in a printed statement).
- Its hypotheses can hold: :data:`FORMAL_INSTANCES` names, per such theorem, pinned instance
  lemmas with content (a concrete network, loss, matrix or map) that satisfy them.
  :func:`unsupported_steps` lists the formal steps that break either rule (the goal is ``[]``).
- A pin that does speak of derivatives at every point (a classical global statement, or an instance
  of one) is declared in :data:`GLOBAL_PINS` with the reason; it is shown for what it is and never
  labels a step ``formal``.  :func:`undeclared_global_pins` finds the pins that break this rule.

>>> global_differentiability("(forall y : V, differentiable L y) -> P")
['y']
>>> global_differentiability("(\\\\forall y \\\\near w, differentiable L y) -> P")
[]
>>> global_differentiability("(forall j : I, differentiable [eta d L j] w) -> P")
[]
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["FORMAL_INSTANCES", "GLOBAL_PINS", "differentiability_point", "forbidden_vernacular",
           "global_differentiability", "proof_extent", "undeclared_global_pins", "unsupported_steps"]

#: per Coq theorem that FORMAL_STEPS names and that has hypotheses (``<Module>.<name>``), the pinned
#: instance lemmas that show those hypotheses can hold together, with real content.
FORMAL_INSTANCES: dict[str, tuple[str, ...]] = {
    **{f"T01_analytic.{n}": ("T01_analytic.T1_analytic_instance",)
       for n in ("grad_comp_linear", "hess_comp_linear", "grad_symmetry", "hess_symmetry")},
    **{f"T01_transformation_law.{n}": ("T04_invariance_group.T4_nonvacuous", "T11_larger_groups.T11_nonvacuous")
       for n in ("quad_act", "dot_act")},
    **{f"T02_homogeneous_rescaling.{n}": ("T02_homogeneous_rescaling.relu_hom",
                                          "T02_homogeneous_rescaling.net2_rescaled_same_output")
       for n in ("layer_rescaling_preserves_output", "neuron_scaling_preserves_output",
                 "permutation_preserves_output")},
    **{f"T03_network_law.{n}": ("T03_network_instance.T3_deep_linear_instance", "T02_homogeneous_rescaling.relu_hom")
       for n in ("T3_network_W", "T3_network_b", "T3_network_next", "T3_network_next_out")},
    # the blocks W_l and W_{l+1} (output layer) also have ReLU instances, at a point where no pre-activation is 0
    "T03_network_law.T3_network_W": ("T03_network_instance.T3_deep_linear_instance", "T03_relu_instance.T3_relu_instance",
                                     "T02_homogeneous_rescaling.relu_hom"),
    "T03_network_law.T3_network_next_out": ("T03_network_instance.T3_deep_linear_instance",
                                            "T03_relu_instance.T3_relu_next_instance", "T02_homogeneous_rescaling.relu_hom"),
    **{f"T04_invariance_group.{n}": ("T04_invariance_group.T4_nonvacuous", "T04_invariance_group.T4_witness_nonvacuous")
       for n in ("T4_i_ii", "T4_i_iii", "T4_ii_iii")},
    "T04_invariance_group.T4_witness_eigen": ("T04_invariance_group.T4_witness_eigen_nonvacuous",),
    "T05_relu_group.neuron_scaling_W_conformal_iff": ("T05_relu_group.T5_uniform_instance",
                                                      "T05_relu_group.T5_nonuniform_instance"),
    "T06_no_nonlinear_extension.pointwise_core": ("T06_no_nonlinear_extension.pointwise_core_instance",),
    "T06_map_affine.map_ray_affine_conformal": ("T06_map_affine.map_ray_affine_instance",
                                                "T06_map_affine.map_ray_affine_instance_applies",
                                                "T06_map_affine.map_ray_nonconformal_instance",
                                                "T06_map_affine.map_ray_quadratic_instance"),
    "T06_n1_classification.n1_pointwise": ("T06_n1_classification.n1_pointwise_instance",),
    # global (GLOBAL_PINS): no step names it, but its hypotheses too are met, with content
    "T06_n1_classification.n1_affine_iff": ("T06_n1_classification.n1_affine_iff_instance",),
    "T06_n1_classification.n1_affine_near": ("T06_n1_classification.n1_affine_instance",
                                             "T06_n1_classification.n1_nonaffine_instance"),
    **{f"T07_pseudo_inverse.{n}": ("T07_pseudo_inverse.T7_nonvacuous",)
       for n in ("T7_Dplus_invariant", "T7_pinv_congruence")},
    **{f"T07_relative_cutoff.{n}": ("T07_relative_cutoff.T7_cut_instance",)
       for n in ("cut_invZ", "T7_cut_decomposition", "T7_cut_congruence", "T7_cut_Dplus_invariant")},
    **{f"T07_cutoff_independence.{n}": ("T07_cutoff_independence.T7_cut_independent_instance",)
       for n in ("spectral_fun_indep", "maxabs_indep", "T7_cut_independent")},
    **{f"T13_attention.{n}": ("T13_attention.T13_instance",)
       for n in ("T13_logits", "T13_values", "conformal_inv_iff", "T13_query_row_D_iff", "T13_key_row_D_iff",
                 "T13_query_row_Dplus_iff", "T13_key_row_Dplus_iff")},
    "T13_attention.T13_heads_perm": ("T13_attention.T13_heads_perm_instance",),
    "T14_gauge_fixing.gauge_fixed_D_invariant": ("T14_gauge_fixing.T14_instance",),
    "T14_gauge_fixing.balanced_unique": ("T14_gauge_fixing.T14_instance",),
    **{f"T08_monotonicity.{n}": ("T08_monotonicity.T8_nonvacuous",)
       for n in ("T8_D_scale", "T8_Dplus_scale", "T8_D_mono", "T8_Dplus_mono")},
    **{f"T03_network_perm.{n}": ("T03_network_perm.T3_network_perm_instance",)
       for n in ("T3_network_perm_W", "T3_network_perm_b", "T3_permuted_block")},
    **{f"T09_euler_identities.{n}": ("T09_euler_identities.T9_instance",) for n in ("euler_radial", "euler_wg", "euler_Hw")},
    **{f"T09_closed_forms.{n}": ("T09_closed_forms.T9_closed_forms_instance",)
       for n in ("T9_ray_closed_forms", "T9_k1_closed_forms")},
    **{f"T09_closed_forms_grad.{n}": ("T09_closed_forms_grad.T9_closed_forms_grad_instance",
                                      "T09_closed_forms_grad.T9_closed_forms_grad_instance_p2")
       for n in ("T9_closed_forms_grad",)},
    "T09_closed_forms_grad.T9_k1_closed_forms_grad": ("T09_closed_forms_grad.T9_closed_forms_grad_instance",),
    **{f"T09_network_homogeneity.{n}": ("T09_network_homogeneity.T9_net_instance",)
       for n in ("eval_hom", "T9_net_homogeneous")},
    # the network's own loss: a depth-2 z² net (k = 2, p = 4) and a k = 1 linear net meet every hypothesis
    **{f"T09_network_loss.{n}": ("T09_network_instance.T9_net_instance_sq", "T09_network_instance.T9_net_instance_k1")
       for n in ("T9_net_ray_homogeneous", "T9_net_ray_closed_forms", "T9_net_closed_forms")},
    "T09_network_loss.T9_net_k1_bound": ("T09_network_instance.T9_net_instance_k1",),
    **{f"T10_scale_invariant_blocks.{n}": ("T10_scale_invariant_blocks.T10_instance",)
       for n in ("scale_invariant_radial", "scale_invariant_wg", "scale_invariant_Hw", "scale_invariant_quad")},
    **{f"T11_larger_groups.{n}": ("T11_larger_groups.T11_nonvacuous",)
       for n in ("T11_rho_invariant", "T11_newton_invariant")},
    **{f"T12_loss_scaling.{n}": ("T12_loss_scaling.T12_instance",)
       for n in ("T12_D", "T12_Dplus", "T12_rho", "T12_product")},
}

#: pinned statements (``<Module>.<name>``) that speak of derivatives at every point, declared as such with
#: the reason they are pinned; a formal step may not name one (:func:`unsupported_steps`), and every pin that
#: :func:`global_differentiability` flags must be here (:func:`undeclared_global_pins`)
GLOBAL_PINS: dict[str, str] = {
    "T06_n1_classification.n1_affine_iff":
        "the classical n = 1 classification: it assumes φ and φ′ derivable at every point of R (φ'' = 0 on all of "
        "R iff φ is affine on R); the local form n1_affine_near is the one that labels steps",
    "T06_n1_classification.n1_affine_iff_instance":
        "the instance of n1_affine_iff: it proves (not assumes) that 3w + 1 and w + w³ have their first and "
        "second derivatives at every point, and that w + w³ is not affine on R",
}

_DIFF_PRED = re.compile(r"(differentiable|derivable|is_derive)\b")


def _coq_dir() -> Path | None:
    from coupled_curvature.proofs.formal import coq_dir

    return coq_dir()


def _read_arg(s: str, i: int) -> tuple[str, int]:
    """The next argument of an application in ``s`` from ``i``: a balanced group or a token."""
    while i < len(s) and s[i].isspace():
        i += 1
    if i < len(s) and s[i] in "([":
        close = {"(": ")", "[": "]"}[s[i]]
        depth, j = 0, i
        while j < len(s):
            if s[j] == s[i]:
                depth += 1
            elif s[j] == close:
                depth -= 1
                if depth == 0:
                    return s[i:j + 1], j + 1
            j += 1
        return s[i:], len(s)
    j = i
    while j < len(s) and not s[j].isspace() and s[j] not in "()[],":
        j += 1
    return s[i:j], j


def differentiability_point(body: str) -> str | None:
    """The point at which ``body`` (a differentiability predicate applied) claims something."""
    m = _DIFF_PRED.match(body)
    if m is None:
        return None
    rest = body[m.end():]
    if m.group(1) == "is_derive":            # is_derive x v f df
        return _read_arg(rest, 0)[0]
    _, i = _read_arg(rest, 0)                # derivable f x v, differentiable f x
    return _read_arg(rest, i)[0]


def global_differentiability(statement: str) -> list[str]:
    """Bound variables ``y`` of hypotheses ``forall y ..., <differentiable/derivable/is_derive> ... y``
    in a printed Coq statement: a claim of differentiability at every point (``[]``: none)."""
    s = " ".join(statement.split())
    found: list[str] = []
    for m in re.finditer(r"\bforall\b", s):
        if s[:m.start()].endswith("\\"):
            continue                         # \forall y \near x, ...: a neighbourhood, local
        i = m.end()
        names: list[str] = []
        while True:                          # binders: x y : T  or  (x : T) (y : U)
            arg, j = _read_arg(s, i)
            if not arg or arg.startswith(","):
                break
            if arg.startswith("("):
                names += arg[1:].split(":", 1)[0].split()
                i = j
                continue
            head = s[i:].split(",", 1)[0]
            names += head.split(":", 1)[0].split()
            i = i + len(head)
            break
        comma = s.find(",", i)
        if comma < 0:
            continue
        point = differentiability_point(s[comma + 1:].lstrip())
        if point is not None and point.strip("()") in names:
            found.append(point.strip("()"))
    return found


def unsupported_steps(formal_steps: dict[str, dict[str, tuple[str, ...]]] | None = None,
                      pins: dict[str, list[tuple[str, str]]] | None = None) -> list[tuple[str, str, str, str]]:
    """``(theorem id, step, Coq theorem, why)`` for each formal step whose theorem is not pinned,
    assumes differentiability everywhere, or has hypotheses and no pinned instance."""
    from coupled_curvature.proofs.formal import statement_pins
    from coupled_curvature.formal_claims import FORMAL_STEPS

    formal_steps = FORMAL_STEPS if formal_steps is None else formal_steps
    pins = statement_pins() if pins is None else pins
    printed = {n.removeprefix("CoupledCurvature."): s for ps in pins.values() for n, s in ps}
    bad: list[tuple[str, str, str, str]] = []
    for tid, steps in formal_steps.items():
        for step, names in steps.items():
            for n in names:
                s = printed.get(n)
                if s is None:
                    bad.append((tid, step, n, "not pinned"))
                elif n in GLOBAL_PINS:
                    bad.append((tid, step, n, f"declared global (GLOBAL_PINS): {GLOBAL_PINS[n]}"))
                elif global_differentiability(s):
                    bad.append((tid, step, n, "differentiability at every point"))
                elif "->" in s and not (FORMAL_INSTANCES.get(n) and all(i in printed for i in FORMAL_INSTANCES[n])):
                    bad.append((tid, step, n, "no pinned instance of its hypotheses"))
    return bad


def undeclared_global_pins(pins: dict[str, list[tuple[str, str]]] | None = None,
                           declared: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """``(Coq theorem, why)`` for each pin that speaks of derivatives at every point and is not in
    :data:`GLOBAL_PINS`, and each declaration that is not a pin or not global (the goal is ``[]``).

    >>> pins = {"TX": [("CoupledCurvature.X.glob", "(forall y : V, differentiable L y) -> P")]}
    >>> undeclared_global_pins(pins, declared={})
    [('X.glob', 'differentiability at every point, not declared in GLOBAL_PINS')]
    >>> undeclared_global_pins(pins, declared={"X.glob": "classical form", "X.gone": "old"})
    [('X.gone', 'declared in GLOBAL_PINS but not pinned')]
    """
    from coupled_curvature.proofs.formal import statement_pins

    pins = statement_pins() if pins is None else pins
    declared = GLOBAL_PINS if declared is None else declared
    printed = {n.removeprefix("CoupledCurvature."): s for ps in pins.values() for n, s in ps}
    bad = [(n, "differentiability at every point, not declared in GLOBAL_PINS")
           for n, s in printed.items() if global_differentiability(s) and n not in declared]
    for n, why in declared.items():
        if n not in printed:
            bad.append((n, "declared in GLOBAL_PINS but not pinned"))
        elif not global_differentiability(printed[n]):
            bad.append((n, "declared in GLOBAL_PINS but its statement is local"))
        elif not why.strip():
            bad.append((n, "declared in GLOBAL_PINS without a reason"))
    return bad


_FORBIDDEN = re.compile(r"(?<![\w'.])(Admitted|Axiom|Axioms|Parameter|Parameters|Conjecture)(?![\w'])"
                        r"|(?<![\w'.])admit(?![\w'])")


def _strip_comments(src: str) -> str:
    """Coq source without (nested) comments and string literals."""
    out: list[str] = []
    depth = 0
    i = 0
    in_str = False
    while i < len(src):
        if in_str:
            if src[i] == '"':
                in_str = False
            i += 1
        elif src.startswith("(*", i):
            depth += 1
            i += 2
        elif depth and src.startswith("*)", i):
            depth -= 1
            i += 2
        elif depth:
            out.append("\n" if src[i] == "\n" else " ")
            i += 1
        elif src[i] == '"':
            in_str = True
            i += 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def forbidden_vernacular(d: Path | None = None) -> list[tuple[Path, int, str]]:
    """``(file, line, word)`` for each ``Admitted``/``admit``/``Axiom``/``Parameter``/``Conjecture``
    outside comments in the ``.v`` files of ``proofs/coq`` (an empty list is the goal)."""
    d = d or _coq_dir()
    hits: list[tuple[Path, int, str]] = []
    if d is None:
        return hits
    for f in sorted(d.rglob("*.v")):
        code = _strip_comments(f.read_text())
        for m in _FORBIDDEN.finditer(code):
            word = m.group(1) or "admit"
            hits.append((f, code.count("\n", 0, m.start()) + 1, word))
    return hits


def proof_extent(name: str, d: Path | None = None) -> tuple[Path, int, int] | None:
    """``(file, first line, last line)`` of a theorem's statement and proof, for line counts.

    >>> proof_extent("CoupledCurvature.Nope.nope") is None
    True
    """
    d = d or _coq_dir()
    if d is None:
        return None
    parts = name.split(".")
    f = d / (parts[1] + ".v") if len(parts) >= 3 else None
    if f is None or not f.is_file():
        return None
    lines = f.read_text().splitlines()
    start = re.compile(rf"^\s*(Theorem|Lemma|Corollary|Proposition|Fact|Remark)\s+{re.escape(parts[-1])}\b")
    for i, line in enumerate(lines):
        if start.match(line):
            for j in range(i, len(lines)):
                if re.search(r"\b(Qed|Defined)\.", lines[j]):
                    return f, i + 1, j + 1
            return f, i + 1, len(lines)
    return None
