"""Where the tracker's records go: the append-only JSONL log, TensorBoard, or any callable.

A sink is any object with ``write(record)`` and ``close()``; :class:`CallableSink` wraps a plain
function that takes the dict (``wandb.log`` fits as it is).

:class:`JsonlSink` keeps ``log_dir/curvature.jsonl`` (schema in :mod:`records`) with these guarantees:

* each record is one line, written by one ``os.write`` on a file opened for appending and then
  ``fsync``-ed, so it is on disk when :meth:`JsonlSink.write` returns;
* a write that fails part-way (disk full) is undone by truncating the file to its previous size,
  so a line is there whole or not at all;
* on a restart it reads the existing log, checks that its header describes the same blocks and
  measures, drops a last line left without its newline by a hard crash, and appends after it.

>>> import tempfile
>>> from coupled_curvature.numeric.tracking.records import header, read_run
>>> d = tempfile.mkdtemp()
>>> s = JsonlSink(d, header(["w"], ["D"], every=1, inverse=False))
>>> s.write({"step": 0, "wall_time": 1.0, "seconds": 0.0, "loss": 0.5, "error": None, "D/w": 2.0})
>>> s.close()
>>> read_run(d)[1][0]["D/w"], JsonlSink(d, header(["w"], ["D"], every=1, inverse=False)).previous[0]["step"]
(2.0, 0)
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric.tracking.records import FILENAME, effective, encode, parse_lines

__all__ = ["Sink", "JsonlSink", "TensorBoardSink", "CallableSink", "check_log_dir", "tensorboard_available"]


class Sink(Protocol):
    def write(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def check_log_dir(log_dir: object) -> str:
    """``log_dir`` as an absolute path, created if missing; ``InvalidInputError`` when it is a file,
    lies below a file, or cannot be written (a test write, which root also has to pass).

    >>> import os, tempfile
    >>> os.path.isdir(check_log_dir(os.path.join(tempfile.mkdtemp(), "new")))
    True
    >>> check_log_dir(__file__)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: log_dir '...' is a file, not a folder; choose another log_dir
    """
    if not isinstance(log_dir, (str, os.PathLike)) or not os.fspath(log_dir).strip():
        raise InvalidInputError(f"log_dir must be a folder name (str or path), got {log_dir!r}")
    path = os.path.abspath(os.fspath(log_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidInputError(f"log_dir {os.fspath(log_dir)!r} is a file, not a folder; choose another log_dir")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".ccurv-probe-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as err:
        raise InvalidInputError(f"log_dir {os.fspath(log_dir)!r} cannot be written ({err.strerror or err}); "
                                "choose another log_dir") from None
    log = os.path.join(path, FILENAME)
    if os.path.exists(log) and not os.path.isfile(log):
        raise InvalidInputError(f"{log!r} is not a file; remove it or choose another log_dir")
    return path


class JsonlSink:
    """Append-only ``log_dir/curvature.jsonl`` (module docstring: guarantees); ``previous`` holds the
    effective records of an earlier run in the same folder, ``dropped_partial`` says whether a last
    line without its newline was removed on resuming."""

    def __init__(self, log_dir: str | os.PathLike[str], head: Mapping[str, Any]) -> None:
        folder = check_log_dir(log_dir)
        self.path = os.path.join(folder, FILENAME)
        self.previous: list[dict[str, Any]] = []
        self.dropped_partial = False
        if os.path.isfile(self.path) and os.path.getsize(self.path) > 0:
            self._resume(head)
        else:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o666)
            self._append(encode(head).encode("utf-8"))

    def _resume(self, head: Mapping[str, Any]) -> None:
        with open(self.path, "rb") as fh:
            data = fh.read()
        complete = data[:data.rfind(b"\n") + 1]
        try:
            text = complete.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"{self.path} is not UTF-8 text ({err}); move it away or choose another "
                                    "log_dir") from None
        old_head, records = parse_lines(text.splitlines(keepends=True), self.path)
        if {k: old_head[k] for k in ("blocks", "measures", "inverse")} != {k: head[k] for k in
                                                                           ("blocks", "measures", "inverse")}:
            raise InvalidInputError(
                f"{self.path} is the log of another run (blocks {old_head['blocks']}, measures "
                f"{old_head['measures']}, inverse={old_head['inverse']}; this tracker has blocks {head['blocks']}, "
                f"measures {head['measures']}, inverse={head['inverse']}); choose a new log_dir to start a new run")
        if "shapes" in old_head and "shapes" in head and old_head["shapes"] != head["shapes"]:
            moved = [b for b in head["blocks"] if old_head["shapes"].get(b) != head["shapes"].get(b)]
            raise InvalidInputError(
                f"{self.path} is the log of another architecture: block {moved[0]!r} has tensor shapes "
                f"{old_head['shapes'].get(moved[0])} there and {head['shapes'].get(moved[0])} in this model; choose "
                "a new log_dir to start a new run")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if len(complete) < len(data):  # a hard crash cut the last line: drop it, keep every whole one
            os.ftruncate(self._fd, len(complete))
            self.dropped_partial = True
        self.previous = effective(records)

    def _append(self, data: bytes) -> None:
        size = os.fstat(self._fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(self._fd, data[done:])
            os.fsync(self._fd)
        except BaseException:
            os.ftruncate(self._fd, size)  # the line is there whole or not at all
            raise

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one line (strict JSON) and flush it to disk."""
        if self._fd < 0:
            raise InvalidInputError(f"{self.path}: the sink is closed")
        self._append(encode(record).encode("utf-8"))

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package (needed by ``torch.utils.tensorboard``) is importable."""
    return importlib.util.find_spec("tensorboard") is not None


class TensorBoardSink:
    """Scalars in TensorBoard event files under ``log_dir`` (``torch.utils.tensorboard``): every
    number of a record under its own key, at the record's ``step`` and ``wall_time``.

    Needs ``tensorboard``: ``pip install tensorboard``; without it the constructor raises
    :class:`~coupled_curvature.base.errors.MissingExtraError`.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        if not tensorboard_available():
            raise MissingExtraError("the TensorBoard sink needs the tensorboard package: pip install tensorboard "
                                    "(or leave 'tensorboard' out of sinks)")
        from torch.utils.tensorboard import SummaryWriter

        self._writer: Any = SummaryWriter(log_dir=check_log_dir(log_dir))

    def write(self, record: Mapping[str, Any]) -> None:
        """One scalar per numeric value of the record; ``step``, ``wall_time`` and ``None`` are skipped."""
        if self._writer is None:
            raise InvalidInputError("the TensorBoard sink is closed")
        step, wall = int(record["step"]), float(record["wall_time"])
        for key, value in record.items():
            if key not in ("step", "wall_time") and isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(key, value, global_step=step, walltime=wall)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class CallableSink:
    """Any function that takes the record's dict (a copy each time), e.g. ``wandb.log``.

    >>> seen = []
    >>> CallableSink(seen.append).write({"step": 0})
    >>> seen
    [{'step': 0}]
    """

    def __init__(self, fn: Callable[[dict[str, Any]], object]) -> None:
        if not callable(fn):
            raise InvalidInputError(f"a sink must be 'jsonl', 'tensorboard' or a callable taking the record dict, "
                                    f"got {fn!r}")
        self._fn = fn

    def write(self, record: Mapping[str, Any]) -> None:
        self._fn(dict(record))

    def close(self) -> None:
        """Nothing to close."""
