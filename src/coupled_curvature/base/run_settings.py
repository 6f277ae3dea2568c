"""The run settings of every curvature entry point, declared once: name, default, meaning and command-line flag.

``diagnose``, ``spectral_profile``, ``cutoff_sensitivity``, the tracker, ``block_hessian`` and ``ccurv
diagnose`` all take these settings. This table is where each one's default and meaning are written;
:class:`~coupled_curvature.numeric.core.options.RunOptions` takes its defaults from :data:`DEFAULTS` and checks
the values, the entry points publish the table as their keyword signature (:func:`with_settings`), and the
command line's flags and help, defaults shown, are generated from it (:func:`add_flags`). It imports neither
torch nor sympy, so the ``ccurv`` parser can read it.

>>> DEFAULTS["pinv_rtol"], DEFAULTS["method"]
(1e-10, 'gram')
>>> import argparse
>>> p = argparse.ArgumentParser(prog="x")
>>> add_flags(p)
>>> chosen(p.parse_args(["--pinv-rtol", "1e-8", "--no-inverse"]))["pinv_rtol"]
1e-08
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["BLOCKS", "FROZEN", "GAUGES", "METHODS", "Setting", "SETTINGS", "DEFAULTS", "add_flags", "chosen",
           "with_settings"]

#: how ``wᵀH⁺w`` is computed: see ``SpectralRoute``
METHODS = ("gram", "dense", "krylov", "auto")
#: the partitions named by a string (a mapping gives explicit blocks)
BLOCKS = ("tensor", "layer", "head")
#: what happens to parameters with ``requires_grad=False``
FROZEN = ("skip", "include")
#: the gauges a run can fix (T14)
GAUGES = ("balanced",)


@dataclass(frozen=True)
class Setting:
    """One run setting. ``flag`` is its command-line flag (``None``: Python only); ``kind`` says how the flag's text
    is read: ``"choice"`` (one of ``choices``), ``"float"``, ``"int"``, ``"text"``, ``"negated"`` (``--no-x``
    sets ``False``), ``"tristate"`` (``--x``/``--no-x``, default ``None``) or ``"mib"`` (an int of MiB, kept in
    bytes)."""

    name: str
    default: object
    help: str
    flag: str | None = None
    kind: str = "text"
    choices: tuple[str, ...] | None = None


SETTINGS: tuple[Setting, ...] = (
    Setting("blocks", "tensor", "the partition: one block per parameter tensor, per layer, or per attention head "
            "(Q, K, V, O of each head; other tensors whole); in Python also {block: [members]}", "--blocks",
            "choice", BLOCKS),
    Setting("inverse", True, "compute D⁺ = (wᵀH⁺w/wᵀw)·‖g‖² (off: D only, by the cheapest exact route)",
            "--no-inverse", "negated"),
    Setting("pinv_rtol", 1e-10, "relative cutoff τ = pinv_rtol·max|λ| of H⁺, in [0, 1)", "--pinv-rtol", "float"),
    Setting("method", "gram", "route for D⁺: gram (exact Gram route where the net is piecewise affine in a block, dense "
            "up to max_dense elsewhere), dense, krylov, or auto (gram, else dense, else Krylov)", "--method",
            "choice", METHODS),
    Setting("max_dense", 4096, "the largest block eigendecomposed densely", "--max-dense", "int"),
    Setting("krylov_max_iter", 1000, "Lanczos products per block (method krylov or auto)", "--krylov-max-iter", "int"),
    Setting("krylov_tol", 1e-7, "Lanczos target relative accuracy, in (0, 1)", "--krylov-tol", "float"),
    Setting("gram_memory", 2 * 2**30, "bytes of Gram-route rows held at once (the flag takes MiB)",
            "--gram-memory-mib", "mib"),
    Setting("frozen", "skip", "parameters with requires_grad=False: leave them out (skip) or diagnose them (include)",
            "--frozen", "choice", FROZEN),
    Setting("reduction", None, "'mean' or 'sum': how loss_fn reduces a batch, when it has no .reduction"),
    Setting("allow_train_mode", False, "measure a model in training mode (BatchNorm batch statistics, dropout)"),
    Setting("process_group", None, "a torch.distributed group: each rank holds a shard of the data"),
    Setting("progress", None, "a progress line on stderr (default: when stderr is a terminal and the run takes 2 s)",
            "--progress", "tristate"),
    Setting("device", None, "where the float64 copy runs, e.g. cpu or cuda:0 (default: the model's own device)",
            "--device", "text"),
    Setting("output", None, "which tensor of the model's output the loss gets: a key, an index or a callable "
            "(default: a tensor as is, a mapping's 'logits', a tuple's first element)"),
    Setting("target", "labels", "in mapping batches, the key of the targets, or a callable target(batch)"),
    Setting("gauge", None, "balanced: measure at the balanced point of the model's orbit under attention's per-head "
            "maps and ReLU neuron rescaling, where D and D⁺ are invariant under that whole group (T14)", "--gauge",
            "choice", GAUGES),
)

#: setting name -> default (read-only)
DEFAULTS: Mapping[str, object] = MappingProxyType({s.name: s.default for s in SETTINGS})


def _shown(s: Setting) -> str:
    if s.kind == "mib":
        return f"{int(s.default) // 2**20}"  # type: ignore[call-overload]
    return "the model's" if s.name == "device" and s.default is None else str(s.default)


def add_flags(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """Add a flag for every setting that has one (but those named in ``skip``), help and default shown."""
    for s in SETTINGS:
        if s.flag is None or s.name in skip:
            continue
        text = f"{s.help} (default: {_shown(s)})"
        if s.kind == "negated":
            parser.add_argument(s.flag, dest=s.name, action="store_false", help=f"turn off: {s.help} (on by default)")
        elif s.kind == "tristate":
            parser.add_argument(s.flag, dest=s.name, action=argparse.BooleanOptionalAction, default=None, help=s.help)
        elif s.kind == "choice":
            parser.add_argument(s.flag, dest=s.name, default=s.default, choices=s.choices, help=text)
        else:
            converters: dict[str, Callable[[str], object]] = {"float": float, "int": int, "mib": _mib, "text": str}
            convert = converters[s.kind]
            parser.add_argument(s.flag, dest=s.name, type=convert, default=s.default, help=text,
                                metavar="MIB" if s.kind == "mib" else s.name.upper())


def _mib(text: str) -> int:
    return int(text) * 2**20


def chosen(args: argparse.Namespace) -> dict[str, object]:
    """The settings a parsed command line sets to other than their default, as ``{name: value}``, unchecked (the
    rest keep their defaults where they are used, so a run records which it was given)."""
    return {s.name: v for s in SETTINGS if s.flag is not None and (v := getattr(args, s.name, s.default)) != s.default}


F = TypeVar("F", bound=Callable[..., Any])


def with_settings(*, without: tuple[str, ...] = ()) -> Callable[[F], F]:
    """A decorator: publish every setting (but those in ``without``) as a keyword-only parameter, with its
    default, in the signature of a function that takes them as ``**settings``, so ``help()`` and
    ``inspect.signature`` show them; the values are checked by ``run_options`` when it runs.

    >>> @with_settings(without=("pinv_rtol",))
    ... def f(x, **settings): return settings
    >>> params = inspect.signature(f).parameters
    >>> params["max_dense"].default, "pinv_rtol" in params
    (4096, False)
    """
    def publish(fn: F) -> F:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        names = {p.name for p in own} | set(without)
        extra = [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default)
                 for s in SETTINGS if s.name not in names]
        fn.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
        return fn
    return publish
