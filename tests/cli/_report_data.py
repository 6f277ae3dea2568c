"""One small report-data computation shared by the report tests of a process."""

import functools

from coupled_curvature.commands.report import collect as _collect  # bound before any monkeypatch


@functools.lru_cache(maxsize=None)
def small_collect():
    return _collect(only=["T4", "T12"], seed=0, heavy=False, now="2000-01-01 00:00:00 UTC")


@functools.lru_cache(maxsize=None)
def all_theorems_data():
    """The small collection's figures and sections with the symbolic steps of all twelve theorems
    (``check_all(numeric=False)``: every derivation step reaches the renderers, no training)."""
    import dataclasses

    from coupled_curvature.proofs import check_all

    data, sweep, changes = small_collect()
    return dataclasses.replace(data, check=check_all(numeric=False, heavy=False)), sweep, changes
