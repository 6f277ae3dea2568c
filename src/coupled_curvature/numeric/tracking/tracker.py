"""``CurvatureTracker``: the coupled diagnostic ``D`` per block, logged during training.

Every ``every`` steps the tracker runs :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` on a
fixed probe batch and writes one flat record (schema: :mod:`~coupled_curvature.numeric.tracking.records`)
to its sinks. For block ``b`` with value ``w``, gradient ``g`` and Hessian block ``H`` of the probe loss::

    D = (wᵀHw / wᵀw) / ‖g‖²      Dplus = (wᵀH⁺w / wᵀw) · ‖g‖²      RQ = wᵀHw / wᵀw      sqnorm_grad = ‖g‖²

``D`` and ``Dplus`` do not move under a layer rescaling of a ReLU net (T3), so their curve over
training is a property of the function being learnt; ``RQ`` and ``sqnorm_grad`` move as ``c⁻²``.

>>> import torch
>>> from coupled_curvature.numeric import make_mlp
>>> torch.manual_seed(0) and None
>>> net = make_mlp(4, [8], 3)
>>> X, y = torch.randn(32, 4, dtype=torch.float64), torch.randint(0, 3, (32,))
>>> opt = torch.optim.SGD(net.parameters(), lr=0.1)
>>> with CurvatureTracker(net, torch.nn.CrossEntropyLoss(), (X, y), every=5) as tracker:
...     for step in range(11):
...         opt.zero_grad(); torch.nn.functional.cross_entropy(net(X), y).backward(); opt.step()
...         _ = tracker.step(step)
>>> [r["step"] for r in tracker.history]
[0, 5, 10]
>>> sorted(k for k in tracker.history[-1] if k.startswith("D/"))
['D/0.bias', 'D/0.weight', 'D/2.bias', 'D/2.weight']
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric.core.inputs import float64_copy
from coupled_curvature.numeric.tracking.isolation import eval_mode, hooks_detached, isolated_rng, random_states
from coupled_curvature.numeric.tracking.records import MEASURES, effective, header, record_keys
from coupled_curvature.numeric.tracking.sinks import CallableSink, JsonlSink, Sink, TensorBoardSink, check_log_dir

if TYPE_CHECKING:
    import pandas

__all__ = ["CurvatureTracker", "check_options"]

_SINK_NAMES = ("jsonl", "tensorboard")


class CurvatureTracker:
    """Log ``D`` (and on request ``Dplus``, ``RQ``, ``sqnorm_grad``) per block on a fixed probe during training.

    ``CurvatureTracker(model, loss_fn, probe, *, every=100, log_dir=None, inverse=False, blocks="tensor",
    measures=("D",), sinks=None, strict=False, transform=None, background=False, output=None, target="labels",
    gauge=None)``

    * ``probe``: a fixed batch ``(X, y)``, a mapping batch, or a list of them, as :func:`diagnose` takes it;
    * ``output``, ``target``, ``gauge``: the output's loss tensor, a mapping batch's targets, T14's gauge (diagnose's);
    * ``every``: :meth:`step` computes when ``step % every == 0``;
    * ``measures``: names among ``D``, ``Dplus``, ``RQ``, ``sqnorm_grad`` (``D`` is always recorded);
      ``inverse=True`` adds ``Dplus``, which is computed only when asked for (``wᵀHw`` otherwise takes the
      engine's cheapest exact route);
    * ``blocks``: the partition, as :func:`diagnose` takes it;
    * ``sinks``: ``"jsonl"`` (``log_dir/curvature.jsonl``, append-only, resumed after a restart),
      ``"tensorboard"`` (event files in ``log_dir``; needs the ``tensorboard`` package) and any callable
      taking the record dict (``wandb.log``); by default ``("jsonl",)`` when ``log_dir`` is given;
    * ``strict``: a failed computation (a non-finite loss on the probe, say) or a failed sink raises;
      by default the record holds ``error`` (why) with ``null`` values, and training goes on;
    * ``transform``: the tracker diagnoses ``transform(model)`` instead of the model (for instance
      ``lambda m: layer_rescale(m, 0, 8.0)``, the run's rescaled twin);
    * ``background``: the training thread only takes a float64 snapshot of the model (a copy, in eval
      mode) and a worker thread computes the record while training goes on, one record in flight
      (the next waits for it). The record is the same as without it; :meth:`step` and :meth:`record`
      return ``None`` and the record reaches ``history`` and the sinks at a later call, at
      :meth:`flush` or at :meth:`close`. It pays where a core is free (a training loop on fewer
      threads than cores). Refused for a model that calls attention: the worker's choice of the math
      attention kernel is process-wide.

    It never changes the model, its gradients, the optimizer or any random stream: ``diagnose``
    works on a float64 copy (in eval mode, with grad mode on, each module's flag restored after),
    and every random stream's state is restored around it. Every argument is checked before any work
    (``InvalidInputError``), the model, loss and probe by one ``diagnose`` of the probe (``inverse=False``).
    ``history`` is the list of records; it starts with the records of an earlier run resumed from
    ``log_dir``.

    Per block ``D = (wᵀHw/wᵀw)/‖g‖²``, exactly what ``diagnose(model, loss_fn, probe)`` gives:

    >>> import torch
    >>> from coupled_curvature.numeric import diagnose, make_mlp
    >>> net, X, y = make_mlp(3, [4], 2), torch.randn(8, 3, dtype=torch.float64), torch.tensor([0, 1] * 4)
    >>> rec = CurvatureTracker(net, torch.nn.CrossEntropyLoss(), (X, y), measures=("RQ",)).record(0)
    >>> d = diagnose(net, torch.nn.CrossEntropyLoss(), (X, y), inverse=False)
    >>> rec["D/0.weight"] == d["0.weight"].coupled, rec["RQ/0.weight"] == d["0.weight"].rayleigh
    (True, True)
    >>> CurvatureTracker(net, torch.nn.CrossEntropyLoss(), (X, y), every=0)
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: every must be an int ≥ 1 (compute every that many steps), got 0
    """

    def __init__(self, model: nn.Module, loss_fn: Callable, probe: object, *, every: int = 100,
                 log_dir: str | None = None, inverse: bool = False,
                 blocks: str | Mapping[str, Sequence[str]] = "tensor", measures: Sequence[str] = ("D",),
                 sinks: Sequence[str | Callable[[dict[str, Any]], object]] | None = None, strict: bool = False,
                 transform: Callable[[nn.Module], nn.Module] | None = None, background: bool = False, output:
                 str | int | Callable | None = None, target: str | Callable = "labels", gauge: str | None = None) -> None:
        self._measures = check_options(every=every, inverse=inverse, strict=strict, measures=measures,
                                       transform=transform)
        if not isinstance(background, bool):
            raise InvalidInputError(f"background must be True or False, got {background!r}")
        if not isinstance(model, nn.Module):
            raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self._inverse = "Dplus" in self._measures
        named = _sink_names(sinks, log_dir)
        self.model, self.loss_fn, self.probe, self.every, self.strict = model, loss_fn, probe, every, strict
        self.blocks, self.transform = blocks, transform
        self._io: dict[str, Any] = {"output": output, "target": target, "gauge": gauge}  # diagnose's keywords
        self.block_names = self._check_probe(background)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ccurv-tracker") if background else None
        self._pending: Future | None = None
        self.log_dir = None if log_dir is None else check_log_dir(log_dir)
        log_dir = self.log_dir
        self.header = header(self.block_names, self._measures, every=every, inverse=self._inverse,
                             shapes=self._shapes)
        self._keys = record_keys(self.header)
        self.history: list[dict[str, Any]] = []
        self.sink_errors: list[str] = []
        self.notes: list[str] = []
        self._sinks: list[Sink] = []
        self._closed = False
        if self._hooked:
            self.notes.append(f"the hooks of {', '.join(self._hooked[:3])}{' …' if len(self._hooked) > 3 else ''} do "
                              "not run on the tracker's computations (they observe training, not the tracker's "
                              "copies); a hook that changes a module's output is not part of the measured function")
        try:
            for s in named:
                if s == "jsonl":
                    jsonl = JsonlSink(log_dir, self.header)  # type: ignore[arg-type]
                    self._sinks.append(jsonl)
                    self.history = [dict(r) for r in jsonl.previous]
                    if jsonl.dropped_partial:
                        self.notes.append(f"{jsonl.path}: dropped an incomplete last line left by a crash")
                elif s == "tensorboard":
                    self._sinks.append(TensorBoardSink(log_dir))  # type: ignore[arg-type]
                else:
                    self._sinks.append(CallableSink(s))
        except BaseException:
            self.close()
            raise

    @property
    def measures(self) -> tuple[str, ...]:
        """The per-block measures every record holds (``D`` first)."""
        return tuple(self._measures)

    def _model(self) -> nn.Module:
        net = self.model if self.transform is None else self.transform(self.model)
        if not isinstance(net, nn.Module):
            raise InvalidInputError(f"transform(model) must return a torch.nn.Module, got {type(net).__name__}")
        return net

    def _check_probe(self, background: bool) -> list[str]:
        """The block names; the model, loss, probe and partition checked by one ``diagnose`` on the
        probe (``inverse=False``: the cheapest exact route), so that a bad argument fails here, before
        training, and not at the first record."""
        from coupled_curvature.numeric.core.diagnostics import diagnose
        from coupled_curvature.numeric.core.slices import member_shapes

        with isolated_rng(), eval_mode(self.model), hooks_detached(self.model) as hooked:
            net = self._model()
            d = diagnose(net, self.loss_fn, self.probe, inverse=False, blocks=self.blocks, progress=False, **self._io)
            if background:
                _check_background(net, d.notes, self.loss_fn, self.probe, **self._io)
        shapes = member_shapes(net, self.blocks)
        self._shapes = {b.name: [shapes[p] for p in b.params] for b in d}
        self._hooked = hooked
        return d.names()

    def step(self, step: int) -> dict[str, Any] | None:
        """Compute and log a record when ``step % every == 0`` (returns it; ``None`` with ``background``),
        else do nothing (``None``)."""
        _check_step(step)
        if self._closed:
            raise InvalidInputError("the tracker is closed; make a new CurvatureTracker to log more")
        if step % self.every == 0:
            return self.record(step)
        if self._pending is not None and self._pending.done():
            self.flush()
        return None

    def record(self, step: int) -> dict[str, Any] | None:
        """Compute and log a record at ``step`` now, whatever ``every`` says (e.g. after the last step).

        A record at a step not after the previous one (a run restarted from a checkpoint) supersedes
        the records at that step and after, in ``history`` as in the log.
        """
        _check_step(step)
        if self._closed:
            raise InvalidInputError("the tracker is closed; make a new CurvatureTracker to log more")
        if self._pool is not None:
            try:
                with isolated_rng(), eval_mode(self.model), hooks_detached(self.model):
                    snapshot: nn.Module | Exception = float64_copy(self._model())
            except Exception as err:
                if self.strict:
                    raise
                snapshot = err
            self.flush()  # one record in flight, records in order
            self._pending = self._pool.submit(self._compute, step, snapshot)
            return None
        with isolated_rng(), eval_mode(self.model), hooks_detached(self.model):
            rec = self._compute(step, self._model)
        return self._log(rec)

    def flush(self) -> None:
        """Wait for the record in flight (``background=True``) and log it; nothing otherwise."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._log(pending.result())

    def _log(self, rec: dict[str, Any]) -> dict[str, Any]:
        self.history = effective([*self.history, rec])
        for sink in self._sinks:
            try:
                with isolated_rng():
                    sink.write(rec)
            except Exception as err:
                if self.strict:
                    raise
                self.sink_errors.append(f"step {rec['step']}: {type(sink).__name__}: {type(err).__name__}: {err}")
        return dict(rec)

    def _compute(self, step: int, net: Callable[[], nn.Module] | nn.Module | Exception) -> dict[str, Any]:
        """One record at ``step`` of ``net`` (a snapshot, the error that took it, or a function giving the
        model): the engine's plan without probing the inputs again (the constructor did; the probe forward
        pass would fork the process-wide random stream, which a worker thread must not touch)."""
        from coupled_curvature.numeric.core.diagnostics import diagnose_plan
        from coupled_curvature.numeric.core.engine import plan, run_options

        rec: dict[str, Any] = dict.fromkeys(self._keys)
        rec["step"], rec["wall_time"] = step, time.time()
        start = time.perf_counter()
        try:
            if isinstance(net, Exception):
                raise net
            model = net if isinstance(net, nn.Module) else net()
            o = run_options(inverse=self._inverse, blocks=self.blocks, progress=False, **self._io)
            d = diagnose_plan(plan(model, self.loss_fn, self.probe, o, check_inputs=False))
            if d.names() != self.block_names:
                raise InvalidInputError(f"the model's blocks changed to {d.names()} (the log has {self.block_names});"
                                        " start a new tracker for a new model")
            values: dict[str, Any] = {"loss": d.meta["loss"]}  # numbers or None, read off the diagnosis
            for m in self._measures:
                for b in d:
                    values[f"{m}/{b.name}"] = getattr(b, MEASURES[m])
        except Exception as err:
            if self.strict:
                raise
            rec["error"] = f"{type(err).__name__}: {err}"
        else:
            bad = [k for k, v in values.items() if v is not None and not math.isfinite(float(v))]
            rec.update({k: None if k in bad or v is None else float(v) for k, v in values.items()})
            if bad:
                if self.strict:
                    raise InvalidInputError(f"step {step}: non-finite values: {', '.join(bad)}")
                rec["error"] = f"non-finite values (recorded as null): {', '.join(bad)}"
        rec["seconds"] = time.perf_counter() - start
        return rec

    def to_dataframe(self) -> pandas.DataFrame:
        """``history`` as a table: one row per record (index ``step``), one column per key; values are
        nullable (``Float64``; ``error`` a ``string``), so a missing value is ``pd.NA``, never ``nan``.

        Needs pandas, an optional extra (``pip install 'coupled-curvature[pandas]'``); without it,
        :class:`~coupled_curvature.base.errors.MissingExtraError`. The SKIP lines need pandas.

        >>> issubclass(MissingExtraError, ImportError)
        True
        >>> tracker.to_dataframe().loc[0, "D/0.weight"] > 0  # doctest: +SKIP
        True
        """
        pd = _pandas()
        self.flush()
        cols: dict[str, Any] = {}
        for k in self._keys[1:]:
            values = [r[k] for r in self.history]
            cols[k] = pd.array(values, dtype="string") if k == "error" else pd.array(
                [None if v is None else float(v) for v in values], dtype="Float64")
        return pd.DataFrame(cols, index=pd.Index([r["step"] for r in self.history], name="step", dtype="int64"))

    def close(self) -> None:
        """End the run: log the record in flight, then close every sink (idempotent)."""
        self._closed = True
        try:
            self.flush()
        finally:
            if (pool := getattr(self, "_pool", None)) is not None:  # (a constructor that failed early set none)
                pool.shutdown()
            for sink in self._sinks:
                sink.close()

    def __enter__(self) -> CurvatureTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"CurvatureTracker(every={self.every}, blocks={len(self.block_names)}, measures={self._measures}, "
                f"records={len(self.history)}{', closed' if self._closed else ''})")


def _pandas() -> Any:
    return MissingExtraError.require("pandas", "CurvatureTracker.to_dataframe", "pandas",
                                     "tracker.history is the same data as plain dicts")


def check_options(*, every: object, inverse: object, strict: object, measures: object,
                  transform: object) -> list[str]:
    """Check the tracker's options that need no model (for a caller that builds the tracker later, such
    as a framework callback); returns the measures recorded, ``D`` first. ``InvalidInputError`` otherwise.

    >>> check_options(every=10, inverse=True, strict=False, measures=("RQ",), transform=None)
    ['D', 'Dplus', 'RQ']
    """
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise InvalidInputError(f"every must be an int ≥ 1 (compute every that many steps), got {every!r}")
    for name, flag in (("inverse", inverse), ("strict", strict)):
        if not isinstance(flag, bool):
            raise InvalidInputError(f"{name} must be True or False, got {flag!r}")
    if transform is not None and not callable(transform):
        raise InvalidInputError(f"transform must be a function model -> model, got {transform!r}")
    return _measures(measures, bool(inverse))


def _check_background(net: nn.Module, notes: Sequence[str], loss_fn: Callable, probe: object, *,
                      output: str | int | Callable | None, target: str | Callable, gauge: str | None = None) -> None:
    """Refuse ``background=True`` for a model whose record would touch process-wide state from the
    worker thread: attention (the math-kernel switch) or random numbers drawn in eval mode (the
    training thread's random stream)."""
    from coupled_curvature.numeric.core.calling import ModelCall, map_inputs, take_samples
    from coupled_curvature.numeric.core.inputs import prepare_batches

    attention = [n for n in notes if n.startswith("attention (")]
    if attention:
        raise InvalidInputError(f"background=True: the model calls attention ({attention[0][11:].split(')')[0]}), "
                                "and the worker's choice of the math attention kernel would apply to the training "
                                "thread too; pass background=False")
    batch = prepare_batches(probe, loss_fn, target=target)[0]
    with isolated_rng(), eval_mode(net), torch.no_grad():
        before = random_states()
        copy = float64_copy(net)
        device = next(iter(copy.parameters())).device
        X = map_inputs(take_samples(batch.X, slice(0, 2)), lambda t: t.to(device))
        loss_fn(ModelCall(output).module(copy, X), batch.y[:2].to(device))
        drew = random_states() != before
    if drew:
        raise InvalidInputError("background=True: the model or the loss draws random numbers in eval mode, and a "
                                "worker thread drawing them would change the training thread's random stream; pass "
                                "background=False")


def _check_step(step: object) -> None:
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InvalidInputError(f"step must be an int ≥ 0 (the training step), got {step!r}")


def _measures(measures: object, inverse: bool) -> list[str]:
    if isinstance(measures, str) or not isinstance(measures, Iterable):
        raise InvalidInputError(f"measures must be a sequence of names such as ('D', 'RQ'), got {measures!r}")
    names = list(measures)
    unknown = [m for m in names if m not in MEASURES]
    if unknown:
        raise InvalidInputError(f"unknown measure(s) {unknown}; choose among {', '.join(MEASURES)}")
    asked = {"D", *names, *(("Dplus",) if inverse else ())}
    return [m for m in MEASURES if m in asked]


def _sink_names(sinks: object, log_dir: object) -> list[Any]:
    if sinks is None:
        return ["jsonl"] if log_dir is not None else []
    if isinstance(sinks, str) or callable(sinks) or not isinstance(sinks, Iterable):
        raise InvalidInputError(f"sinks must be a sequence such as ('jsonl', 'tensorboard', wandb.log), got {sinks!r}")
    out = list(sinks)
    for s in out:
        if isinstance(s, str):
            if s not in _SINK_NAMES:
                raise InvalidInputError(f"unknown sink {s!r}; name one of {', '.join(_SINK_NAMES)} or pass a callable")
            if log_dir is None:
                raise InvalidInputError(f"the {s!r} sink writes into log_dir: pass log_dir=... or leave it out")
        elif not callable(s):
            raise InvalidInputError(f"a sink must be 'jsonl', 'tensorboard' or a callable taking the record dict, "
                                    f"got {s!r}")
    if out.count("jsonl") > 1 or out.count("tensorboard") > 1:
        raise InvalidInputError("each named sink may appear once in sinks")
    return out

