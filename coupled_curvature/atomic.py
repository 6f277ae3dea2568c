"""Atomic JSON output: a temporary file in the target folder, then a rename (never half-written)."""

from __future__ import annotations

import json
import os
import tempfile

from coupled_curvature.errors import InvalidInputError


def writable_folder(path: str) -> str:
    """The folder that will hold ``path``, or ``InvalidInputError`` if it is missing or read-only."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise InvalidInputError(f"cannot write {path!r}: folder {folder!r} does not exist or is not writable")
    return folder


def write_json_atomic(path: str, data: dict) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> write_json_atomic(p, {"a": 1}); open(p).read()
    '{\\n  "a": 1\\n}\\n'
    """
    folder = writable_folder(path)
    fd, tmp = tempfile.mkstemp(prefix=".ccurv-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
