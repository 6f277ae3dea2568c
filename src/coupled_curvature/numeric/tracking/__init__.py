"""Curvature during training: :class:`CurvatureTracker` logs ``D = (wᵀHw/wᵀw)/‖g‖²`` per block on a
fixed probe every ``every`` steps, to an append-only JSONL log, TensorBoard or any callable.

Modules: :mod:`.tracker` (the tracker), :mod:`.records` (the log's schema and reader, no torch),
:mod:`.sinks` (where records go), :mod:`.isolation` (random streams and module flags left as found).
Imported lazily: ``import coupled_curvature.numeric.tracking`` costs nothing until a name is used.

>>> from coupled_curvature.numeric.tracking import CurvatureTracker, read_run
>>> CurvatureTracker.__module__, read_run.__module__
('coupled_curvature.numeric.tracking.tracker', 'coupled_curvature.numeric.tracking.records')
"""

from __future__ import annotations

from coupled_curvature.numeric.lazy import lazy_exports

_LAZY: dict[str, str | tuple[str, str]] = {
    "CurvatureTracker": "tracker",
    "read_run": "records",
    "read_log": "records",
    "JsonlSink": "sinks",
    "TensorBoardSink": "sinks",
    "CallableSink": "sinks",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
