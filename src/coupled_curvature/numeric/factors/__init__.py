"""Exact per-sample factors ``H_bb = BᵀB`` and what they give, from one engine.

:mod:`.outputs` factors the loss's output Hessian ``S_n = A_nᵀA_n``; :mod:`.rows` yields the rows
``A_nJ_n`` of ``B`` for any blocks (:mod:`.layers`, the unfold-based Linear/Conv provider, or
``torch.func``); :mod:`.forms` turns ``B`` into ``wᵀHw`` and ``wᵀH⁺w``. Built on them:
:mod:`.gram` (any piecewise-affine network), :mod:`.gauss_newton` (sums and dense blocks of
layers), :mod:`.relu_mlp` (ReLU MLPs under cross-entropy). :mod:`.kronecker` is the layer-output
route of Linear layers, ``Σ_n G_n ⊗ a_na_nᵀ``, exact for any network above the layer.
:mod:`.tangent_forms` gives ``wᵀH_bbw = Σ_n ‖A_nJ_nw_b‖²`` of every block at once without forming
``B``: the cotangents at module outputs (:mod:`.cotangents`, which :mod:`.layers` uses too) against
each block's own tangent there, where :mod:`.affinity` finds the outputs affine in the module.
"""
