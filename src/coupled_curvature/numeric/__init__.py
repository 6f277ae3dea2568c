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

_LAZY: dict[str, str | tuple[str, str]] = {
    "diagnose": "core.diagnostics",
    "block_hessian": "core.curvature_operator",
    "Diagnosis": "core.results",
    "BlockDiagnosis": "core.results",
    "compare": "core.compare",
    "Comparison": "core.compare",
    "Summary": "core.summary",
    "layer_rescale": "symmetries.homogeneous",
    "neuron_rescale": "symmetries.homogeneous",
    "permute_neurons": "symmetries.homogeneous",
    "function_gap": "symmetries.homogeneous",
    "qk_transform": "symmetries.attention",
    "vo_transform": "symmetries.attention",
    "permute_heads": "symmetries.attention",
    "norm_rescale": "symmetries.attention",
    "evaluate": "measures.registry",
    "MEASURES": ("measures.registry", "REGISTRY"),
    "cutoff_sensitivity": "studies.cutoff",
    "pinv_quadratic_form": "linalg.pinv",
    "spectral_profile": "core.profile",
    "SpectralProfile": "core.profile",
    "highprec_diagnose": ("highprec.engine", "diagnose"),
    "invariance_error": "highprec.engine",
    "make_mlp": "models.factory",
    "train_mlp": "models.training",
    "load_dataset": ("models.datasets", "load"),
    "CurvatureTracker": "tracking.tracker",
    "crr_penalty": "training.crr",
    "training_step": "training.step",
    "make_optimizer": "training.step",
    "sharpness_curve": "measures.sharpness_curve",
    "SharpnessCurve": "measures.sharpness_curve",
    "certify": "certify.api",
    "Certificate": "certify.api",
    "certify_invariance": "certify.invariance",
    "Ball": "certify.ball",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
