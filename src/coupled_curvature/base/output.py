"""The one output policy of every command: validate first, write atomically, never destroy.

Every path a user names (``check --json``, ``report --out``, ``explore --out/--json``,
``experiment --out``, ``diagnose --json``, model caches) goes through this module:

* **before any work** :func:`check_folder` / :func:`check_file` resolve the path, require its
  parent folder to exist, refuse a file where a folder is expected and a folder where a file is
  expected, and probe that the parent is really writable (a test write: root passes
  ``os.access`` everywhere);
* an existing non-empty folder is replaced only if it is a previous output **of the same
  command** (it holds the marker file :data:`MARKER` naming that command); anything else is
  refused and left untouched;
* :func:`write_folder` builds the output in a hidden temporary folder beside the target and
  renames it into place; :func:`write_file` does the same for one file. A failure or an
  interrupt (Ctrl-C, SIGTERM) removes the temporary and leaves the previous output intact;
* outputs get ordinary permissions (``0o777``/``0o666`` less the umask: 0755 and 0644 usually).

>>> import os, tempfile
>>> from pathlib import Path
>>> base = tempfile.mkdtemp()
>>> out = write_folder(os.path.join(base, "run"), "demo",
...                    lambda d: Path(d, "a.txt").write_text("a"))
>>> sorted(os.listdir(out))
['.ccurv-output', 'a.txt']
>>> _ = Path(base, "mine.txt").write_text("mine")
>>> check_folder(base, "demo")
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: --out ... is a non-empty folder that is not a ccurv report or other output of ccurv demo; refusing to replace it (choose a new or empty folder)
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coupled_curvature.base.errors import InvalidInputError, NotSerializableError

__all__ = ["MARKER", "check_folder", "check_file", "generator_tag", "write_folder", "write_texts", "write_file",
           "write_json", "to_bytes", "strict_json", "json_text"]

#: marker file in every output folder; its one line names the command that wrote it
MARKER = ".ccurv-output"
_LEGACY_MARKER = ".ccurv-report"  # folders written by report/experiment before this module


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _absolute(name: object, option: str, what: str) -> str:
    """``name`` as an absolute path; ``InvalidInputError`` when it names no ``what`` (folder, file) at all."""
    if not isinstance(name, (str, os.PathLike)) or not str(name).strip():
        raise InvalidInputError(f"{option} needs a {what} name, got {name!r}")
    return os.path.abspath(os.fspath(name))


def _parent(path: str, option: str, shown: str) -> str:
    """The folder that will hold ``path``; it must exist (nothing is created on the way)."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        what = f"is a file, not a folder; choose another {option}" if os.path.exists(parent) else (
            "does not exist; create it first")
        raise InvalidInputError(f"{option} {shown!r}: parent folder {parent!r} {what}")
    return parent


def _probe(folder: str, option: str, shown: str) -> None:
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ccurv-probe-", dir=folder))
    except OSError as err:
        raise InvalidInputError(
            f"{option} {shown!r}: cannot write in {folder!r} ({err.strerror}); choose another {option}"
        ) from None


def _written_by(folder: str) -> str | None:
    for name in (MARKER, _LEGACY_MARKER):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                line = fh.readline().strip()
        except OSError:
            continue
        return line.removeprefix("written by ccurv ") if name == MARKER else "report"
    return None


def check_folder(out: str, command: str, option: str = "--out") -> str:
    """Validate an output folder for ``ccurv <command>`` before any work; returns its absolute path.

    ``InvalidInputError`` when ``out`` is a file, lies below a file, cannot be written, or is a
    non-empty folder that is not a previous output of the same command.
    """
    path = _absolute(out, option, "folder")
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InvalidInputError(f"{option} {out!r} exists and is a file, not a folder; choose another {option}")
        if os.listdir(path):
            by = _written_by(path)
            legacy_ok = by == "report" and command.split()[0] in ("report", "experiment")
            if by != command and not legacy_ok:
                what = f"holds an output of ccurv {by}, not of ccurv {command}" if by else (
                    f"is a non-empty folder that is not a ccurv report or other output of ccurv {command}")
                raise InvalidInputError(
                    f"{option} {out!r} {what}; refusing to replace it (choose a new or empty folder)")
    _probe(_parent(path, option, str(out)), option, str(out))
    return path


def check_file(path: str, option: str = "--json", *, reads: Sequence[str] = (), owner: str | None = None,
               force: bool = False) -> str:
    """Validate an output file before any work; returns its absolute path.

    ``InvalidInputError`` when ``path`` is a folder, lies below a file, cannot be written, or is one of
    the files the command ``reads`` (no command writes over its own input). With ``owner`` (a text the
    command's own outputs carry near their start, e.g. a page's generator tag), an existing file that
    does not carry it is refused unless ``force``: it is not an output of that command. An existing file
    is otherwise replaced atomically when the command finishes.

    >>> import os, tempfile
    >>> from pathlib import Path
    >>> log = Path(tempfile.mkdtemp(), "run.jsonl")
    >>> _ = log.write_text("{}\\n")
    >>> check_file(str(log), "--out", reads=[str(log)])
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: --out '...run.jsonl' is a file this command reads; writing there would destroy it (choose another --out)
    >>> check_file(str(log), "--out", owner="ccurv track")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: --out '...run.jsonl' exists and is not an output of ccurv track; refusing to replace it (choose another --out, or pass --force to replace it)
    """
    full = _absolute(path, option, "file")
    if os.path.isdir(full):
        raise InvalidInputError(f"{option} {path!r} is a folder; name a file, e.g. {os.path.join(str(path), 'out.json')!r}")
    if any(_same_file(full, r) for r in reads):
        raise InvalidInputError(f"{option} {path!r} is a file this command reads; writing there would destroy it "
                                f"(choose another {option})")
    if owner is not None and not force and os.path.exists(full) and not _carries(full, owner):
        raise InvalidInputError(f"{option} {path!r} exists and is not an output of {owner}; refusing to replace it "
                                f"(choose another {option}, or pass --force to replace it)")
    _probe(_parent(full, option, str(path)), option, str(path))
    return full


def _same_file(a: str, b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare the resolved names
        return os.path.realpath(a) == os.path.realpath(os.fspath(b))


def _carries(path: str, owner: str) -> bool:
    """Whether the first 4 KiB of the file hold the generator tag of ``owner``."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(4096)
    except OSError:
        return False
    return generator_tag(owner).encode("utf-8") in start


def generator_tag(owner: str) -> str:
    """The HTML tag that marks a page as written by ``owner`` (checked by :func:`check_file`).

    >>> generator_tag("ccurv track")
    "<meta name='generator' content='ccurv track'>"
    """
    return f"<meta name='generator' content='{owner}'>"


def write_folder(out: str, command: str, fill: Callable[[str], None], option: str = "--out") -> str:
    """Call ``fill(tmp)`` on a hidden temporary folder, then move it to ``out`` atomically.

    The folder receives :data:`MARKER` naming ``command``; an earlier output of the same command
    is replaced, and restored if anything fails. Returns the absolute path.
    """
    path = check_folder(out, command, option)
    parent = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    old = None
    try:
        fill(tmp)
        with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as fh:
            fh.write(f"written by ccurv {command}\n")
        os.chmod(tmp, 0o777 & ~_umask())
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
            raise InvalidInputError(f"{option} {out!r}: writing failed ({err}); the previous output is unchanged") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


def write_texts(folder: str | os.PathLike[str], files: Mapping[str, str]) -> None:
    """Write each ``{name: text}`` of ``files`` into ``folder``, UTF-8 with ``\\n`` line ends: the text files a
    ``fill`` of :func:`write_folder` puts in its temporary folder.

    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> write_texts(d, {"a.md": "# a", "b.json": "{}"})
    >>> sorted(f.name for f in d.iterdir()), (d / "a.md").read_text(encoding="utf-8")
    (['a.md', 'b.json'], '# a')
    """
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)


def write_file(path: str, data: str | bytes, option: str = "--json", *, reads: Sequence[str] = (),
               owner: str | None = None, force: bool = False) -> str:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename (never half-written);
    ``reads``, ``owner`` and ``force`` are checked again as in :func:`check_file`.

    >>> import os, tempfile
    >>> p = write_file(os.path.join(tempfile.mkdtemp(), "x.txt"), "hi\\n")
    >>> from pathlib import Path
    >>> Path(p).read_text(), oct(os.stat(p).st_mode & 0o777) == oct(0o666 & ~_umask())
    ('hi\\n', True)
    """
    full = check_file(path, option, reads=reads, owner=owner, force=force)
    folder = os.path.dirname(full)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(full)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, full)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise InvalidInputError(f"{option} {path!r}: writing failed ({err}); nothing was changed") from None
        raise
    return full


def strict_json(x: object) -> object:
    """``x`` as plain JSON data: every number a JSON number, or, when not finite, the string
    ``"inf"``, ``"-inf"`` or ``"nan"`` (strict JSON has no ``Infinity``/``NaN``); numpy and torch
    scalars as Python numbers; mappings and sequences recursively; anything else refused.

    >>> strict_json({"a": [1, 2.5, float("inf")], "b": None, "c": float("nan")})
    {'a': [1, 2.5, 'inf'], 'b': None, 'c': 'nan'}
    """
    if isinstance(x, Mapping):
        return {str(k): strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    if x is None or isinstance(x, (bool, str)):
        return x
    item = getattr(x, "item", None)
    if not isinstance(x, numbers.Number) and callable(item):
        x = item()  # a numpy or torch scalar: its Python value (bool, int or float)
        if isinstance(x, bool):
            return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real) or hasattr(x, "__float__"):
        v = float(x)
        return v if math.isfinite(v) else "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
    raise NotSerializableError(f"cannot write {type(x).__name__} {x!r} as JSON: keep the data to numbers, "
                               "strings, lists and dicts")


def json_text(data: Any, indent: int | None = 2) -> str:
    """Strict JSON text of :func:`strict_json` ``(data)`` (no ``NaN``/``Infinity`` tokens), Unicode kept.

    >>> json_text({"x": float("-inf")}, indent=None)
    '{"x": "-inf"}'
    """
    return json.dumps(strict_json(data), indent=indent, allow_nan=False, ensure_ascii=False)


def write_json(path: str, data: Any, option: str = "--json", *, reads: Sequence[str] = ()) -> str:
    """:func:`write_file` of :func:`json_text` ``(data)`` plus a newline (never over a file in ``reads``).

    >>> import os, tempfile
    >>> from pathlib import Path
    >>> p = write_json(os.path.join(tempfile.mkdtemp(), "x.json"), {"a": 1}); Path(p).read_text()
    '{\\n  "a": 1\\n}\\n'
    """
    return write_file(path, json_text(data) + "\n", option, reads=reads)


def to_bytes(save: Callable[[io.BytesIO], None]) -> bytes:
    """The bytes a ``save(fh)`` call writes (e.g. ``torch.save``), for :func:`write_file`.

    >>> to_bytes(lambda fh: fh.write(b"ab"))
    b'ab'
    """
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()
