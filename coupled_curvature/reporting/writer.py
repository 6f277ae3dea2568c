"""Atomic folder writing: build everything in a temporary folder beside the target, then rename.

A failure anywhere removes the temporary folder, so the target is either the old report
(untouched) or the complete new one. An existing target is replaced only if it is a previous
report (it holds the marker file), never an unrelated folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

from coupled_curvature.errors import InvalidInputError

__all__ = ["MARKER", "check_target", "write_folder_atomic"]

MARKER = ".ccurv-report"


def check_target(out: str) -> str:
    """Validate ``out`` before any work; returns its absolute path (``InvalidInputError`` otherwise)."""
    path = os.path.abspath(out)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise InvalidInputError(f"--out {out!r}: parent folder {parent!r} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--out {out!r}: folder {parent!r} is not writable; choose another --out")
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InvalidInputError(f"--out {out!r} exists and is not a folder; choose another --out")
        if os.listdir(path) and not os.path.exists(os.path.join(path, MARKER)):
            raise InvalidInputError(
                f"--out {out!r} is a non-empty folder that is not a ccurv report; refusing to replace it "
                "(choose a new or empty folder)"
            )
    try:  # root passes os.access everywhere; only a real attempt tells
        os.rmdir(tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.probe-", dir=parent))
    except OSError as err:
        raise InvalidInputError(f"--out {out!r}: cannot write in {parent!r} ({err.strerror}); choose another --out") from None
    return path


def write_folder_atomic(out: str, fill: Callable[[str], None]) -> str:
    """Call ``fill(tmpdir)`` and move the result to ``out`` atomically; returns the absolute path."""
    path = check_target(out)
    parent = os.path.dirname(path)
    try:
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    except OSError as err:
        raise InvalidInputError(f"--out {out!r}: cannot write in {parent!r} ({err.strerror}); choose another --out") from None
    old = None
    try:
        fill(tmp)
        with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as fh:
            fh.write("written by ccurv report\n")
        os.chmod(tmp, 0o755)
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rmdir(old)
            os.rename(path, old)
        os.rename(tmp, path)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not os.path.exists(path):
            os.rename(old, path)
        if isinstance(err, OSError):
            raise InvalidInputError(f"--out {out!r}: writing the report failed ({err}); nothing was left behind") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path
