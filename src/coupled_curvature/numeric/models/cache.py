"""Trained models cached on disk by a hash of their configuration, written atomically.

An entry is one file ``<key>.pt`` holding ``{"state": state_dict, "meta": {...}}``. It is written to
a temporary file in the same folder and moved into place with ``os.replace``, so an interrupted
run leaves either no entry or a complete one; an unreadable entry counts as missing and is rebuilt.
The studies read a trained model back with :meth:`ModelCache.load_model` (an entry whose parameters do
not fit the model counts as missing too), or train and store it on a miss with
:meth:`ModelCache.load_or_train`, and a measured row, stored without a state, with
:meth:`ModelCache.load_row` / :meth:`ModelCache.store_row`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.base.output import to_bytes, write_file

#: the model type a cached entry is loaded into (and trained as, on a miss)
ModelT = TypeVar("ModelT", bound=nn.Module)


def config_key(config: dict) -> str:
    """``sha256`` of the canonical JSON of ``config`` (sorted keys), first 20 hex digits.

    >>> config_key({"a": 1, "b": [2, 3]}) == config_key({"b": [2, 3], "a": 1})
    True
    """
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:20]


class ModelCache:
    """A folder of cached trained models; ``folder=None`` disables caching.

    >>> import tempfile
    >>> c = ModelCache(tempfile.mkdtemp())
    >>> c.load("nothing") is None
    True
    """

    def __init__(self, folder: str | None):
        self.folder = None if folder is None else os.path.abspath(folder)
        if self.folder is not None:
            if os.path.exists(self.folder) and not os.path.isdir(self.folder):
                raise InvalidInputError(f"--cache {folder!r} is a file, not a folder; choose another --cache")
            try:
                os.makedirs(self.folder, exist_ok=True)
            except OSError as err:
                raise InvalidInputError(
                    f"cache folder {folder!r} cannot be created ({err.strerror}); choose another --cache"
                ) from None

    def path(self, key: str) -> str | None:
        return None if self.folder is None else os.path.join(self.folder, f"{key}.pt")

    def load(self, key: str) -> dict | None:
        """The stored ``{"state", "meta"}`` for ``key``, or ``None`` (absent, disabled or unreadable)."""
        path = self.path(key)
        if path is None or not os.path.exists(path):
            return None
        try:
            entry = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # a damaged entry is rebuilt, never trusted
            return None
        if not isinstance(entry, dict) or set(entry) != {"state", "meta"}:
            return None
        return entry

    def load_model(self, key: str, model: nn.Module) -> dict | None:
        """Load the entry's state into ``model`` (then in eval mode) and return a copy of its meta; ``None``, the
        model untouched, when there is no usable entry or its parameters and buffers (names, shapes) are not
        the model's: a stale entry is rebuilt, never trusted.

        >>> import tempfile
        >>> c, net = ModelCache(tempfile.mkdtemp()), nn.Linear(2, 1)
        >>> c.store("k", net.state_dict(), {"epochs": 3})
        >>> c.load_model("k", nn.Linear(2, 1)), c.load_model("k", nn.Linear(3, 1))
        ({'epochs': 3}, None)
        """
        entry = self.load(key)
        if entry is None:
            return None
        own, state = model.state_dict(), entry["state"]
        if set(own) != set(state) or any(tuple(own[k].shape) != tuple(v.shape) for k, v in state.items()):
            return None
        model.load_state_dict(state)
        model.eval()
        return dict(entry["meta"])

    def load_or_train(self, key: str, model: ModelT,
                      train: Callable[[], tuple[ModelT, dict]]) -> tuple[ModelT, dict, bool]:
        """``(model, meta, cached)``: ``model`` with the entry of ``key`` loaded (:meth:`load_model`), else the model
        and meta that ``train()`` returns, stored under ``key`` first.

        >>> import tempfile
        >>> c, net = ModelCache(tempfile.mkdtemp()), nn.Linear(2, 1)
        >>> [c.load_or_train("k", net, lambda: (net, {"epochs": 3}))[1:] for _ in range(2)]
        [({'epochs': 3}, False), ({'epochs': 3}, True)]
        """
        meta = self.load_model(key, model)
        if meta is not None:
            return model, meta, True
        model, meta = train()
        self.store(key, model.state_dict(), meta)
        return model, meta, False

    def load_row(self, key: str, field: str = "row") -> dict | None:
        """A copy of what :meth:`store_row` stored under ``field`` for ``key``; ``None`` when absent.

        >>> import tempfile
        >>> c = ModelCache(tempfile.mkdtemp())
        >>> c.store_row("m", {"D": 1.5})
        >>> c.load_row("m"), c.load_row("m", "fields"), c.load_row("other")
        ({'D': 1.5}, None, None)
        """
        entry = self.load(key)
        row = None if entry is None else entry["meta"].get(field)
        return dict(row) if isinstance(row, dict) else None

    def store_row(self, key: str, row: dict, field: str = "row") -> None:
        """Store a measured ``row`` (plain values) under ``field``, with no model state, atomically."""
        self.store(key, {}, {field: row})

    def store(self, key: str, state: dict, meta: dict) -> None:
        """Write the entry atomically (:func:`coupled_curvature.base.output.write_file`)."""
        path = self.path(key)
        if path is None:
            return
        write_file(path, to_bytes(lambda fh: torch.save(
            {"state": {k: v.detach().clone() for k, v in state.items()}, "meta": meta}, fh)), "--cache")
