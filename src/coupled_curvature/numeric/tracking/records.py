"""The tracker's run log, ``curvature.jsonl``: its schema, one record as one JSON line, and the reader.

The file is plain JSON Lines (UTF-8, one object per line, each line ending in ``\\n``):

* line 1 is the **header**: ``{"schema": "coupled-curvature.track/1", "blocks": [...], "measures": [...],
  "every": N, "inverse": bool, "shapes": {block: [[dims of each tensor], ...]}}`` (``shapes``, the
  architecture a resumed run must match, is absent from logs written before it was added);
* every further line is one **record**, a flat dict: ``step`` (int ≥ 0), ``wall_time`` (Unix seconds),
  ``seconds`` (time the computation took), ``loss`` (the loss on the probe), ``error`` (``null``, or
  why this record holds no values), and ``<measure>/<block>`` for every measure and block of the
  header, where ``D = (wᵀHw/wᵀw)/‖g‖²``, ``Dplus = (wᵀH⁺w/wᵀw)·‖g‖²``, ``RQ = wᵀHw/wᵀw`` and
  ``sqnorm_grad = ‖g‖²``. A missing value is ``null``; ``NaN`` and ``Infinity`` never appear.

A run restarted from a checkpoint appends to the same file: a record whose step is not after the
previous one starts a resumed segment, and supersedes the earlier records at that step and after
(:func:`effective`). The text is only ever parsed as JSON, never evaluated.

>>> head = header(["0.weight"], ["D"], every=10, inverse=False)
>>> rec = {"step": 0, "wall_time": 1.0, "seconds": 0.1, "loss": 0.5, "error": None, "D/0.weight": 2.0}
>>> text = encode(head) + encode(rec)
>>> parse_lines(text.splitlines(keepends=True), "demo")[1][0]["D/0.weight"]
2.0
>>> parse_lines([encode(head), '{"step": 0}\\n'], "demo")
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: demo, line 2: a record needs the fields ... (missing: D/0.weight, error, loss, seconds, wall_time; unknown: none); ...
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["SCHEMA", "FILENAME", "MEASURES", "BASE_FIELDS", "header", "encode", "record_keys", "parse_lines",
           "RunLog", "read_log", "read_run", "effective"]

SCHEMA = "coupled-curvature.track/1"
FILENAME = "curvature.jsonl"
#: the per-block measures a record may hold, in the order they are written, and their BlockDiagnosis field
MEASURES: dict[str, str] = {"D": "coupled", "Dplus": "inverse_coupled", "RQ": "rayleigh", "sqnorm_grad": "g_sq"}
#: the fields of every record besides the per-block values
BASE_FIELDS = ("step", "wall_time", "seconds", "loss", "error")
_HEADER_FIELDS = {"schema", "blocks", "measures", "every", "inverse"}
_OPTIONAL_FIELDS = {"shapes"}


def header(blocks: Sequence[str], measures: Sequence[str], *, every: int, inverse: bool,
           shapes: Mapping[str, Sequence[Sequence[int]]] | None = None) -> dict[str, Any]:
    """The first line of a run's log: the schema, the blocks and measures every record holds, and
    (``shapes``) the shapes of each block's tensors, so that a resumed run with another architecture
    under the same block names is refused.

    >>> header(["w"], ["D"], every=5, inverse=False)["schema"]
    'coupled-curvature.track/1'
    >>> header(["w"], ["D"], every=5, inverse=False, shapes={"w": [(3, 2)]})["shapes"]
    {'w': [[3, 2]]}
    """
    head = {"schema": SCHEMA, "blocks": list(blocks), "measures": list(measures), "every": int(every),
            "inverse": bool(inverse)}
    if shapes is not None:
        head["shapes"] = {b: [[int(d) for d in s] for s in shapes[b]] for b in blocks}
    return head


def record_keys(head: Mapping[str, Any]) -> list[str]:
    """Every key of a record of the run that ``head`` describes, in the order they are written.

    >>> record_keys(header(["a", "b"], ["D", "RQ"], every=1, inverse=False))[len(BASE_FIELDS):]
    ['D/a', 'D/b', 'RQ/a', 'RQ/b']
    """
    return [*BASE_FIELDS, *(f"{m}/{b}" for m in head["measures"] for b in head["blocks"])]


def encode(obj: Mapping[str, Any]) -> str:
    """One line of strict JSON (RFC 8259) with its ``\\n``; a non-finite float is refused.

    >>> encode({"step": 1, "D/w": None})
    '{"step": 1, "D/w": null}\\n'
    """
    return json.dumps(dict(obj), allow_nan=False, ensure_ascii=False) + "\n"


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def _loads(line: str, where: str) -> Any:
    try:
        return json.loads(line, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as err:
        raise InvalidInputError(f"{where}: not a JSON line ({err}); the file is damaged: fix or remove that "
                                "line") from None


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_header(obj: object, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
        got = obj.get("schema") if isinstance(obj, dict) else None
        raise InvalidInputError(
            f"{where}: not a curvature log of coupled-curvature (its first line must have \"schema\": "
            f"\"{SCHEMA}\"; got {'schema ' + repr(got) if got is not None else 'no schema'}); "
            "point at a folder that CurvatureTracker(log_dir=...) wrote")
    blocks, measures = obj.get("blocks"), obj.get("measures")
    shapes = obj.get("shapes", {})
    ok = (_HEADER_FIELDS <= set(obj) <= _HEADER_FIELDS | _OPTIONAL_FIELDS
          and isinstance(shapes, dict) and all(
              isinstance(v, list) and all(isinstance(t, list) and all(type(d) is int and d >= 0 for d in t) for t in v)
              for v in shapes.values())
          and isinstance(blocks, list) and blocks and all(isinstance(b, str) and b for b in blocks)
          and len(set(blocks)) == len(blocks)
          and isinstance(measures, list) and "D" in measures and all(m in MEASURES for m in measures)
          and len(set(measures)) == len(measures)
          and isinstance(obj.get("every"), int) and not isinstance(obj.get("every"), bool) and obj["every"] >= 1
          and isinstance(obj.get("inverse"), bool)
          and ("shapes" not in obj or set(shapes) == set(blocks)))
    if not ok:
        raise InvalidInputError(
            f"{where}: the header does not have the fields {sorted(_HEADER_FIELDS)} (and optionally "
            f"{sorted(_OPTIONAL_FIELDS)}) with a list of block names, measures among {list(MEASURES)} including D, "
            "every ≥ 1, inverse true/false and shapes as lists of dimensions; the file is damaged")
    return obj


def _check_record(obj: object, keys: list[str], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where}: a record must be a JSON object, got {type(obj).__name__}")
    if set(obj) != set(keys):
        missing, unknown = sorted(set(keys) - set(obj)), sorted(set(obj) - set(keys))
        raise InvalidInputError(
            f"{where}: a record needs the fields of the header's blocks and measures (missing: "
            f"{', '.join(missing) or 'none'}; unknown: {', '.join(unknown) or 'none'}); the file is damaged "
            "or mixes two runs")
    step = obj["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InvalidInputError(f"{where}: step must be an integer ≥ 0, got {step!r}")
    if not _is_number(obj["wall_time"]) or not _is_number(obj["seconds"]):
        raise InvalidInputError(f"{where}: wall_time and seconds must be numbers")
    if obj["error"] is not None and not isinstance(obj["error"], str):
        raise InvalidInputError(f"{where}: error must be null or a string, got {obj['error']!r}")
    for k in keys[BASE_FIELDS.index("loss"):]:
        if k != "error" and obj[k] is not None and not _is_number(obj[k]):
            raise InvalidInputError(f"{where}: {k} must be a number or null, got {obj[k]!r}")
    return {k: obj[k] for k in keys}


def parse_lines(lines: Iterable[str], source: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and every record (in file order) of a log's lines, each checked; ``source`` names
    the file in the messages. A damaged line is an ``InvalidInputError`` naming its number; so is a
    last line without its ``\\n`` (a write that did not finish)."""
    head: dict[str, Any] | None = None
    keys: list[str] = []
    records = []
    for n, line in enumerate(lines, 1):
        where = f"{source}, line {n}"
        if not line.endswith("\n"):
            raise InvalidInputError(f"{where} is incomplete (no newline at its end): the run stopped while writing "
                                    "it, or is writing now; CurvatureTracker drops such a line when it resumes")
        if not line.strip():
            raise InvalidInputError(f"{where} is empty; a log has one JSON object per line")
        obj = _loads(line, where)
        if head is None:
            head = _check_header(obj, where)
            keys = record_keys(head)
        else:
            records.append(_check_record(obj, keys, where))
    if head is None:
        raise InvalidInputError(f"{source} is empty: it has no header line; point at a log that "
                                "CurvatureTracker(log_dir=...) wrote")
    return head, records


class RunLog(NamedTuple):
    """A run's log as read: the header, the effective records, and whether an incomplete last line
    (a write cut off by a crash) was dropped, as :class:`~.sinks.JsonlSink` drops it on resuming."""

    head: dict[str, Any]
    records: list[dict[str, Any]]
    dropped_partial: bool


def read_log(log_dir: str | os.PathLike[str]) -> RunLog:
    """The header and the effective records (:func:`effective`) of ``log_dir/curvature.jsonl``.

    ``InvalidInputError`` when the folder or its log is missing, or a line is damaged (the message
    names it). A last line without its newline (the run stopped while writing it) is dropped, and
    ``dropped_partial`` says so. Nothing in the file is evaluated: it is parsed as JSON only.

    >>> import tempfile
    >>> read_log(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: '...' holds no curvature.jsonl; pass the log_dir a CurvatureTracker wrote
    """
    folder = os.fspath(log_dir)
    path = os.path.join(folder, FILENAME)
    if not os.path.isdir(folder):
        raise InvalidInputError(f"log folder {folder!r} does not exist or is not a folder; "
                                "pass the log_dir a CurvatureTracker wrote")
    if not os.path.isfile(path):
        raise InvalidInputError(f"{folder!r} holds no {FILENAME}; pass the log_dir a CurvatureTracker wrote")
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{path} is not UTF-8 text ({err}); the file is damaged") from None
    parts = text.split("\n")  # lines end at \n alone, as the tracker writes them
    lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    partial = len(lines) > 1 and not lines[-1].endswith("\n")
    head, records = parse_lines(lines[:-1] if partial else lines, path)
    return RunLog(head, effective(records), partial)


def read_run(log_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(header, effective records)`` of ``log_dir/curvature.jsonl``: :func:`read_log` without the
    flag (an incomplete last line is dropped).

    >>> read_run("no/such/run")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: log folder 'no/such/run' does not exist or is not a folder; pass the log_dir a CurvatureTracker wrote
    """
    log = read_log(log_dir)
    return log.head, log.records


def effective(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records that stand after restarts: a record at step ``s`` drops the kept records at steps ≥ ``s``.

    >>> [r["step"] for r in effective([{"step": s} for s in (0, 10, 20, 10, 20, 30)])]
    [0, 10, 20, 30]
    """
    kept: list[dict[str, Any]] = []
    for r in records:
        while kept and kept[-1]["step"] >= r["step"]:
            kept.pop()
        kept.append(dict(r))
    return kept
