"""The run options every curvature entry point takes, checked by one function before any work.

``diagnose``, ``spectral_profile``, ``cutoff_sensitivity``, the explorer's ``H⁺`` measures, the
factor route and ``ccurv diagnose`` all go through the engine of :mod:`.engine`, so they accept
the same options with the same meaning; :func:`run_options` is where each is checked, and the
mpmath path checks its own ``pinv_rtol`` with :func:`check_pinv_rtol` from here.

>>> o = run_options(method="auto", max_dense=100)
>>> o.method, o.max_dense, o.pinv_rtol
('auto', 100, 1e-10)
>>> run_options(pinv_rtol=2)
Traceback (most recent call last):
...
coupled_curvature.errors.InvalidInputError: pinv_rtol must be a number in [0, 1), got 2; pass e.g. 1e-10
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.core.dict_batches import DEFAULT_TARGET, check_target
from coupled_curvature.numeric.core.inputs import REDUCTIONS, check_count, check_flag
from coupled_curvature.numeric.factors.gram import MEMORY_BUDGET
from coupled_curvature.numeric.symmetries.gauge import GAUGES

__all__ = ["BLOCKS", "FROZEN", "GRAM_MEMORY", "METHODS", "RunOptions", "check_pinv_rtol", "run_options"]

#: how ``wᵀH⁺w`` is computed (``None`` means ``"gram"``): see :class:`~.engine.SpectralRoute`
METHODS = ("gram", "dense", "krylov", "auto")
#: the partitions named by a string (a mapping gives explicit blocks)
BLOCKS = ("tensor", "layer", "head")
#: what happens to parameters with ``requires_grad=False``
FROZEN = ("skip", "include")
#: the rows ``B`` of the Gram route held at once stay under this many bytes by default
GRAM_MEMORY = MEMORY_BUDGET


@dataclass(frozen=True)
class RunOptions:
    """The checked options of one run (see :func:`run_options` for each one's meaning)."""

    blocks: str | Mapping[str, Sequence[str]] = "tensor"
    inverse: bool = True
    pinv_rtol: float = 1e-10
    method: str = "gram"
    method_given: bool = False
    max_dense: int = 4096
    krylov_max_iter: int = 1000
    krylov_tol: float = 1e-7
    gram_memory: int = GRAM_MEMORY
    frozen: str = "skip"
    reduction: str | None = None
    allow_train_mode: bool = False
    process_group: object | None = None
    progress: bool | None = None
    device: torch.device | None = None
    call: ModelCall = ModelCall()
    target: str | Callable = DEFAULT_TARGET
    gauge: str | None = None


def check_pinv_rtol(value: object, name: str = "pinv_rtol") -> float:
    """``value`` as a float in ``[0, 1)``: the relative cutoff ``τ = value·max|λ|`` of ``H⁺_τ``.

    >>> check_pinv_rtol(1e-8)
    1e-08
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise InvalidInputError(f"{name} must be a number in [0, 1), got {value!r}; pass e.g. 1e-10")
    return float(value)


def run_options(
    *,
    blocks: str | Mapping[str, Sequence[str]] = "tensor",
    inverse: bool = True,
    pinv_rtol: float = 1e-10,
    method: str | None = None,
    max_dense: int = 4096,
    krylov_max_iter: int = 1000,
    krylov_tol: float = 1e-7,
    gram_memory: int = GRAM_MEMORY,
    frozen: str = "skip",
    reduction: str | None = None,
    allow_train_mode: bool = False,
    process_group: object | None = None,
    progress: bool | None = None,
    device: str | torch.device | None = None,
    output: str | int | Callable | None = None,
    target: str | Callable = DEFAULT_TARGET,
    gauge: str | None = None,
) -> RunOptions:
    """Check every run option and return them as a :class:`RunOptions`; the one validation of all entry points.

    - ``blocks``: ``"tensor"`` (one block per parameter tensor), ``"layer"``, ``"head"`` (attention split
      into per-head Q, K, V, O blocks: :mod:`~.head_blocks`) or ``{block: [members]}``, a member being a
      parameter name or ``(name, index)``, a sub-tensor (:mod:`~.slices`);
    - ``inverse``: compute ``D⁺ = (wᵀH⁺_τw/wᵀw)·‖g‖²`` (``False``: ``D`` only, by the cheapest route);
    - ``pinv_rtol``: the relative cutoff ``τ = pinv_rtol·max|λ|``, in ``[0, 1)``;
    - ``method``: ``None``/``"gram"`` (the exact Gram route where the net is piecewise affine in the
      block, dense up to ``max_dense`` elsewhere), ``"dense"``, ``"krylov"`` or ``"auto"`` (Gram,
      else dense, else Krylov);
    - ``max_dense``: the largest block eigendecomposed densely; ``krylov_max_iter``, ``krylov_tol``:
      the Lanczos budget and target; ``gram_memory``: the bytes of Gram rows held at once;
    - ``frozen``: ``"skip"`` or ``"include"`` parameters with ``requires_grad=False``;
    - ``reduction``: ``"mean"``/``"sum"`` when ``loss_fn`` has no ``.reduction``;
    - ``allow_train_mode``, ``process_group`` (``torch.distributed``), ``progress`` (``None``/bool),
      ``device`` (where the float64 copy runs; by default the model's own device);
    - ``output``: which tensor of the model's output the loss receives: ``None`` (a tensor as is, a
      mapping's ``"logits"``, a tuple's or list's first element), a key, an index or a callable
      ``output(out) -> Tensor`` (:mod:`~.calling`);
    - ``target``: in mapping batches, the key of the targets (``"labels"``) or a callable
      ``target(batch) -> Tensor``; the other entries are the model's keyword inputs (:mod:`~.dict_batches`);
    - ``gauge``: ``None`` (the parameters as given) or ``"balanced"``: every quantity is computed at the
      balanced point of the model's orbit under attention's per-head maps and ReLU neuron rescaling, where
      ``D`` and ``D⁺`` are invariant under that whole group (T14, :mod:`~..symmetries.gauge`).
    """
    if not isinstance(blocks, (str, Mapping)):
        raise InvalidInputError(f"blocks must be 'tensor', 'layer', 'head' or a mapping, got {type(blocks).__name__}")
    if isinstance(blocks, str) and blocks not in BLOCKS:
        raise InvalidInputError(f"blocks={blocks!r} is not a partition; use 'tensor', 'layer', 'head' or a mapping "
                                "{block name: [parameter names or (name, index)]}")
    check_flag(inverse, "inverse")
    check_flag(allow_train_mode, "allow_train_mode")
    if progress is not None:
        check_flag(progress, "progress")
    rtol = check_pinv_rtol(pinv_rtol)
    if method is not None and (not isinstance(method, str) or method not in METHODS):
        raise InvalidInputError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}; "
                                "pass one of them")
    check_count(max_dense, "max_dense")
    check_count(krylov_max_iter, "krylov_max_iter", 1)
    check_count(gram_memory, "gram_memory", 1)
    if isinstance(krylov_tol, bool) or not isinstance(krylov_tol, (int, float)) or not 0.0 < krylov_tol < 1.0:
        raise InvalidInputError(f"krylov_tol must be a number in (0, 1), got {krylov_tol!r}; pass e.g. 1e-7")
    if frozen not in FROZEN:
        raise InvalidInputError(f"frozen must be 'skip' or 'include', got {frozen!r}; pass one of them")
    if reduction is not None and (not isinstance(reduction, str) or reduction not in REDUCTIONS):
        raise InvalidInputError(f"reduction must be 'mean' or 'sum', got {reduction!r}; pass one of them")
    check_target(target)
    if gauge is not None and (not isinstance(gauge, str) or gauge not in GAUGES):
        raise InvalidInputError(f"gauge must be None or one of {', '.join(map(repr, GAUGES))}, got {gauge!r}; "
                                "pass gauge='balanced' or leave it out")
    call = ModelCall(output)
    return RunOptions(blocks=blocks, inverse=inverse, pinv_rtol=rtol, method=method or "gram",
                      method_given=method is not None, max_dense=max_dense, krylov_max_iter=krylov_max_iter,
                      krylov_tol=float(krylov_tol), gram_memory=gram_memory, frozen=frozen, reduction=reduction,
                      allow_train_mode=allow_train_mode, process_group=process_group, progress=progress,
                      device=_device(device), call=call, target=target, gauge=gauge)


def _device(device: object) -> torch.device | None:
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)):
        raise InvalidInputError(f"device must be a torch.device or a string like 'cpu' or 'cuda:0', got {device!r}")
    try:
        out = torch.device(device)
    except RuntimeError as e:
        raise InvalidInputError(f"device {device!r} is not a device torch knows ({e}); pass e.g. 'cpu'") from None
    if out.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r} asks for CUDA, which this machine does not have; pass 'cpu'")
    if out.type not in ("cpu", "cuda"):
        raise InvalidInputError(f"device {device!r}: only 'cpu' and 'cuda' run float64 eigendecompositions here")
    return out
