"""Curvature tracking inside training frameworks: thin callbacks around
:class:`~coupled_curvature.numeric.tracking.tracker.CurvatureTracker`, each an optional extra.

* :mod:`.lightning`: :class:`~coupled_curvature.integrations.lightning.CurvatureCallback` for
  Lightning (``pip install 'coupled-curvature[lightning]'``).
* :mod:`.huggingface`: :class:`~coupled_curvature.integrations.huggingface.CurvatureCallback`, a
  ``transformers.TrainerCallback`` for the Hugging Face ``Trainer`` (``pip install 'coupled-curvature[hf]'``).

A framework is imported only by its own module, so ``import coupled_curvature.integrations`` costs
nothing and works without any framework installed.

>>> import coupled_curvature.integrations as integrations
>>> integrations.__name__
'coupled_curvature.integrations'
"""
