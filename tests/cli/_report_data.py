"""One small report-data computation shared by the report tests of a process."""

import functools

from coupled_curvature.reporting.build import collect as _collect  # bound before any monkeypatch


@functools.lru_cache(maxsize=None)
def small_collect():
    return _collect(only=["T4", "T12"], seed=0, heavy=False, now="2000-01-01 00:00:00 UTC")
