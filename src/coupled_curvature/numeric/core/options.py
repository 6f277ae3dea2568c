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
coupled_curvature.base.errors.InvalidInputError: pinv_rtol must be a number in [0, 1), got 2; pass e.g. 1e-10
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.calling import ModelCall
from coupled_curvature.numeric.core.dict_batches import check_target
from coupled_curvature.numeric.core.inputs import REDUCTIONS, check_count, check_flag
from coupled_curvature.base.run_settings import BLOCKS, DEFAULTS, FROZEN, GAUGES, METHODS, SETTINGS, Setting

__all__ = ["GRAM_MEMORY", "RunOptions", "check_pinv_rtol", "run_options"]

#: the rows ``B`` of the Gram route held at once stay under this many bytes by default
GRAM_MEMORY: int = DEFAULTS["gram_memory"]  # type: ignore[assignment]


@dataclass(frozen=True)
class RunOptions:
    """The checked settings of one run (each one's meaning and default: :data:`~coupled_curvature.base.run_settings.SETTINGS`).

    ``method_given`` records whether ``method`` was passed; ``call`` is ``output`` as a
    :class:`~.calling.ModelCall`. Build it with :func:`run_options`, which checks every value.
    """

    blocks: str | Mapping[str, Sequence[str]] = DEFAULTS["blocks"]  # type: ignore[assignment]
    inverse: bool = DEFAULTS["inverse"]  # type: ignore[assignment]
    pinv_rtol: float = DEFAULTS["pinv_rtol"]  # type: ignore[assignment]
    method: str = DEFAULTS["method"]  # type: ignore[assignment]
    method_given: bool = False
    max_dense: int = DEFAULTS["max_dense"]  # type: ignore[assignment]
    krylov_max_iter: int = DEFAULTS["krylov_max_iter"]  # type: ignore[assignment]
    krylov_tol: float = DEFAULTS["krylov_tol"]  # type: ignore[assignment]
    gram_memory: int = GRAM_MEMORY
    frozen: str = DEFAULTS["frozen"]  # type: ignore[assignment]
    reduction: str | None = DEFAULTS["reduction"]  # type: ignore[assignment]
    allow_train_mode: bool = DEFAULTS["allow_train_mode"]  # type: ignore[assignment]
    process_group: object | None = DEFAULTS["process_group"]
    progress: bool | None = DEFAULTS["progress"]  # type: ignore[assignment]
    device: torch.device | None = None
    call: ModelCall = ModelCall()
    target: str | Callable = DEFAULTS["target"]  # type: ignore[assignment]
    gauge: str | None = DEFAULTS["gauge"]  # type: ignore[assignment]


def check_pinv_rtol(value: object, name: str = "pinv_rtol") -> float:
    """``value`` as a float in ``[0, 1)``: the relative cutoff ``τ = value·max|λ|`` of ``H⁺_τ``.

    >>> check_pinv_rtol(1e-8)
    1e-08
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise InvalidInputError(f"{name} must be a number in [0, 1), got {value!r}; pass e.g. 1e-10")
    return float(value)


def _choice(name: str, valid: tuple[str, ...], what: str | None = None, hint: str = "pass one of them"
            ) -> Callable[[object], object]:
    def check(value: object) -> object:
        if not isinstance(value, str) or value not in valid:
            raise InvalidInputError(f"{name} must be {what or 'one of ' + ', '.join(map(repr, valid))}, got {value!r}; "
                                    f"{hint}")
        return value
    return check


def _blocks(value: object) -> object:
    if not isinstance(value, (str, Mapping)):
        raise InvalidInputError(f"blocks must be 'tensor', 'layer', 'head' or a mapping, got {type(value).__name__}")
    if isinstance(value, str) and value not in BLOCKS:
        raise InvalidInputError(f"blocks={value!r} is not a partition; use 'tensor', 'layer', 'head' or a mapping "
                                "{block name: [parameter names or (name, index)]}")
    return value


def _flag(name: str) -> Callable[[object], object]:
    def check(value: object) -> object:
        check_flag(value, name)
        return value
    return check


def _count(name: str, minimum: int) -> Callable[[object], object]:
    def check(value: object) -> object:
        check_count(value, name, minimum)
        return value
    return check


def _krylov_tol(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise InvalidInputError(f"krylov_tol must be a number in (0, 1), got {value!r}; pass e.g. 1e-7")
    return float(value)


def _optional(check: Callable[[object], object]) -> Callable[[object], object]:
    return lambda value: None if value is None else check(value)


def _target(value: object) -> object:
    check_target(value)
    return value


#: each setting's check: the value as RunOptions holds it, or InvalidInputError saying what to pass
_CHECKS: dict[str, Callable[[object], object]] = {
    "blocks": _blocks, "inverse": _flag("inverse"), "pinv_rtol": check_pinv_rtol,
    "method": _choice("method", METHODS), "max_dense": _count("max_dense", 0),
    "krylov_max_iter": _count("krylov_max_iter", 1), "krylov_tol": _krylov_tol,
    "gram_memory": _count("gram_memory", 1), "frozen": _choice("frozen", FROZEN, "'skip' or 'include'"),
    "reduction": _optional(_choice("reduction", REDUCTIONS, "'mean' or 'sum'")), "allow_train_mode": _flag("allow_train_mode"),
    "process_group": lambda v: v, "progress": _optional(_flag("progress")), "target": _target,
    "gauge": _optional(_choice("gauge", GAUGES, f"None or one of {', '.join(map(repr, GAUGES))}",
                                "pass gauge='balanced' or leave it out")),
}


_SETTING = {s.name: s for s in SETTINGS}


def _by_kind(s: Setting) -> Callable[[object], object]:
    """The check a setting gets from its declaration alone (a new setting needs no entry in :data:`_CHECKS`)."""
    if s.choices is not None:
        return _optional(_choice(s.name, s.choices)) if s.default is None else _choice(s.name, s.choices)
    if s.kind == "int":
        return _count(s.name, 0)
    if s.kind in ("negated", "tristate") or isinstance(s.default, bool):
        return _optional(_flag(s.name)) if s.default is None else _flag(s.name)
    return lambda value: value


def run_options(**settings: Any) -> RunOptions:
    """Check every run setting given and return them, with the defaults of the rest, as a :class:`RunOptions`;
    the one validation of all entry points, before any work.

    The settings, their defaults and their meaning are declared once, in
    :data:`~coupled_curvature.base.run_settings.SETTINGS`; ``method=None`` is taken as not given (the default
    ``"gram"``), and a name that is not a setting is refused with the valid names.

    >>> run_options(frozen="include").frozen
    'include'
    >>> run_options(pinv_rtl=1e-8)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: pinv_rtl is not a run setting; valid: blocks, inverse, pinv_rtol, method, max_dense, krylov_max_iter, krylov_tol, gram_memory, frozen, reduction, allow_train_mode, process_group, progress, device, output, target, gauge
    """
    unknown = [k for k in settings if k not in DEFAULTS]
    if unknown:
        raise InvalidInputError(f"{unknown[0]} is not a run setting; valid: {', '.join(DEFAULTS)}")
    given = {k: v for k, v in settings.items() if not (k == "method" and v is None)}
    values: dict[str, object] = {}
    for name, value in given.items():
        if name in _CHECKS:
            values[name] = _CHECKS[name](value)
        elif name not in ("device", "output"):
            values[name] = _by_kind(_SETTING[name])(value)
    if "device" in given:
        values["device"] = _device(given["device"])
    call = ModelCall(given.get("output", DEFAULTS["output"]))
    return RunOptions(**values, method_given="method" in given, call=call)  # type: ignore[arg-type]


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
