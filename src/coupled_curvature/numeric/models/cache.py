"""Trained models cached on disk by a hash of their configuration, written atomically.

An entry is one file ``<key>.pt`` holding ``{"state": state_dict, "meta": {...}}``. It is written to
a temporary file in the same folder and moved into place with ``os.replace``, so an interrupted
run leaves either no entry or a complete one; an unreadable entry counts as missing and is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os

import torch

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.base.output import to_bytes, write_file


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

    def store(self, key: str, state: dict, meta: dict) -> None:
        """Write the entry atomically (:func:`coupled_curvature.base.output.write_file`)."""
        path = self.path(key)
        if path is None:
            return
        write_file(path, to_bytes(lambda fh: torch.save(
            {"state": {k: v.detach().clone() for k, v in state.items()}, "meta": meta}, fh)), "--cache")
