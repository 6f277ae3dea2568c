"""The numeric layer (torch, numpy, mpmath; never sympy): diagnostics, symmetries, measures.

The public entry points, imported lazily so that ``import coupled_curvature.numeric`` alone
costs nothing until one is used:

``diagnose(model, loss_fn, data, ...) -> Diagnosis``
    per block ``D = (wᵀHw / wᵀw) / ‖g‖²`` and ``D⁺ = (wᵀH⁺w / wᵀw)·‖g‖²`` in float64.
``block_hessian(model, loss_fn, data, block) -> scipy.sparse.linalg.LinearOperator``
    ``H_bb`` as an operator; ``diagnose(..., curvature={block: G})`` measures a block with another
    curvature (Gauss–Newton, Fisher, K-FAC operators) instead.
``compare(before, after) -> Comparison``, ``Summary``
    per-block relative changes of D, D⁺, RQ, ‖g‖², wᵀHw; what ``Diagnosis.summary()`` returns.
``layer_rescale``, ``neuron_rescale``, ``permute_neurons``, ``function_gap``
    the ReLU symmetries (T2) as new models, and the largest output difference of two models.
``qk_transform``, ``vo_transform``, ``permute_heads``, ``norm_rescale``
    attention's symmetries (T13): per-head Q/K and V/O maps, head permutations, a norm's scale.
``evaluate(name, model, loss_fn, data)``, ``MEASURES``
    the invariance matrix's measures (sharpness, trace, Fisher–Rao, λ, D, D⁺, ρ, …) by name.
``cutoff_sensitivity``, ``pinv_quadratic_form``
    ``D⁺`` as a curve over the relative cutoff; ``wᵀH⁺_τ w`` of one symmetric matrix.
``highprec_diagnose``, ``invariance_error``
    the same diagnostics in mpmath at ``dps`` digits.
``certify``, ``certify_invariance``, ``Certificate``, ``Ball``
    balls (arb, python-flint) that provably contain ``D``, ``D⁺`` and their change under a symmetry.
``CurvatureTracker(model, loss_fn, probe, every=100, log_dir=...)``
    ``D`` per block logged during training (JSONL, TensorBoard, any callable); see :mod:`.tracking`.
``make_mlp``, ``train_mlp``, ``load_dataset``
    the models and data sets the checks and experiments use.
``crr_penalty``, ``training_step``, ``make_optimizer``
    the CRR loss term (input-derivative growth, differentiable) and one step of baseline, CRR, SAM or
    ASAM (SAM and ASAM: the ``train`` extra, ``pytorch-optimizer``).
``sharpness_curve``, ``SharpnessCurve``
    fixed-radius or adaptive sharpness over a log-spaced sweep of radii (common random numbers).

>>> from coupled_curvature.numeric import diagnose
>>> diagnose.__module__
'coupled_curvature.numeric.core.diagnostics'
"""

from __future__ import annotations

from coupled_curvature.numeric.lazy import lazy_exports

_LAZY: dict[str, tuple[str, str]] = {
    "diagnose": ("core.diagnostics", "diagnose"),
    "block_hessian": ("core.curvature_operator", "block_hessian"),
    "Diagnosis": ("core.results", "Diagnosis"),
    "BlockDiagnosis": ("core.results", "BlockDiagnosis"),
    "compare": ("core.compare", "compare"),
    "Comparison": ("core.compare", "Comparison"),
    "Summary": ("core.summary", "Summary"),
    "layer_rescale": ("symmetries.homogeneous", "layer_rescale"),
    "neuron_rescale": ("symmetries.homogeneous", "neuron_rescale"),
    "permute_neurons": ("symmetries.homogeneous", "permute_neurons"),
    "function_gap": ("symmetries.homogeneous", "function_gap"),
    "qk_transform": ("symmetries.attention", "qk_transform"),
    "vo_transform": ("symmetries.attention", "vo_transform"),
    "permute_heads": ("symmetries.attention", "permute_heads"),
    "norm_rescale": ("symmetries.attention", "norm_rescale"),
    "evaluate": ("measures.registry", "evaluate"),
    "MEASURES": ("measures.registry", "REGISTRY"),
    "cutoff_sensitivity": ("studies.cutoff", "cutoff_sensitivity"),
    "pinv_quadratic_form": ("linalg.pinv", "pinv_quadratic_form"),
    "spectral_profile": ("core.profile", "spectral_profile"),
    "SpectralProfile": ("core.profile", "SpectralProfile"),
    "highprec_diagnose": ("highprec.engine", "diagnose"),
    "invariance_error": ("highprec.engine", "invariance_error"),
    "make_mlp": ("models.factory", "make_mlp"),
    "train_mlp": ("models.training", "train_mlp"),
    "load_dataset": ("models.datasets", "load"),
    "CurvatureTracker": ("tracking.tracker", "CurvatureTracker"),
    "crr_penalty": ("training.crr", "crr_penalty"),
    "training_step": ("training.step", "training_step"),
    "make_optimizer": ("training.step", "make_optimizer"),
    "sharpness_curve": ("measures.sharpness_curve", "sharpness_curve"),
    "SharpnessCurve": ("measures.sharpness_curve", "SharpnessCurve"),
    "certify": ("certify.api", "certify"),
    "Certificate": ("certify.api", "Certificate"),
    "certify_invariance": ("certify.invariance", "certify_invariance"),
    "Ball": ("certify.ball", "Ball"),
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
