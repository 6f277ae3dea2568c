"""One data-parallel ``diagnose`` run as ``ccurv diagnose`` starts it, alone or under ``torchrun``.

Every rank builds (and trains) the same model from the seed, takes a contiguous shard of the
data and calls :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` with the process group,
which sums gradients and curvature over ranks (:mod:`coupled_curvature.numeric.distributed`).
Under ``torchrun`` (``RANK``, ``WORLD_SIZE`` set) the process group is joined here (gloo, or nccl
when CUDA is available); without it the run is a single process and gives the reference answer.

>>> r = run_launch(LaunchOptions(dataset="wine", arch="mlp:4x1", epochs=0, samples=20, run={"max_dense": 64}))
>>> r.world_size, r.diagnosis.meta["n_samples"], r.diagnosis.meta["max_dense"]
(1, 20, 64)
>>> LaunchOptions(run={"pinv_rtol": 2})
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: pinv_rtol must be a number in [0, 1), got 2; pass e.g. 1e-10
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.core.options import run_options
from coupled_curvature.numeric.distributed import broadcast_model, check_replicated, shard, shard_sizes
from coupled_curvature.numeric.models.datasets import Dataset, load
from coupled_curvature.numeric.models.factory import build_for, parse_arch
from coupled_curvature.numeric.models.training import fit

__all__ = ["LaunchOptions", "LaunchResult", "run_launch"]


@dataclass(frozen=True)
class LaunchOptions:
    """What ``ccurv diagnose`` takes (its ``--help`` explains each); ``run`` holds the run settings it sets (the
    others keep their defaults, :data:`~coupled_curvature.base.run_settings.SETTINGS`), checked here, before any
    training."""

    dataset: str = "digits"
    arch: str = "mlp:64x3"
    seed: int = 0
    epochs: int = 20
    state: str | None = None
    split: str = "train"
    samples: int | None = None
    reduction: str = "mean"
    run: Mapping[str, object] = field(default_factory=dict)
    backend: str = "auto"
    init_method: str = "env://"
    timeout: float = 1800.0
    broadcast: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.run, Mapping):
            raise InvalidInputError(f"run must map run settings to values, got {type(self.run).__name__}")
        run_options(**self.run)


@dataclass(frozen=True)
class LaunchResult:
    """Rank 0's result: the (summed) diagnosis and how the data was split."""

    diagnosis: Diagnosis
    world_size: int
    backend: str | None
    shard_sizes: tuple[int, ...]

    def to_dict(self, opts: LaunchOptions) -> dict:
        """``Diagnosis.to_dict()`` with ``meta.distributed`` describing the run."""
        out = self.diagnosis.to_dict()
        out["meta"]["distributed"] = {
            "world_size": self.world_size, "backend": self.backend, "shard": "contiguous",
            "shard_sizes": list(self.shard_sizes), "dataset": opts.dataset, "split": opts.split,
            "arch": opts.arch, "seed": opts.seed, "epochs": 0 if opts.state else opts.epochs, "state": opts.state,
        }
        return out


def _model(opts: LaunchOptions) -> tuple[nn.Module, Dataset]:
    """The (trained or loaded) model in eval mode, and the data set it was built for."""
    kind, hidden = parse_arch(opts.arch)
    data = load(opts.dataset, image=kind == "cnn")
    model = build_for(kind, hidden, data, seed=opts.seed)
    if opts.state is None and opts.epochs > 0:
        model.train()
        fit(model, data.X_train, data.y_train, epochs=opts.epochs, seed=opts.seed)
    if opts.state is not None:
        model.load_state_dict(torch.load(opts.state, map_location="cpu", weights_only=True))
    return model.eval(), data


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"environment variable {name}={value!r} is not an integer") from None


def _run(opts: LaunchOptions, group) -> LaunchResult | None:
    import torch.distributed as dist

    model, data = _model(opts)  # a bad arch name fails in parse_arch, before any training
    X, y = data.train if opts.split == "train" else data.test
    if opts.samples is not None:
        X, y = X[: opts.samples], y[: opts.samples]
    rank, world = 0, 1
    if group is not None:
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        if opts.broadcast:
            broadcast_model(model, group)
        check_replicated(model, group)
    options: dict = dict(opts.run)
    if rank != 0:
        options["progress"] = False
    if group is not None:
        options["process_group"] = group
    d = diagnose(model, nn.CrossEntropyLoss(reduction=opts.reduction), shard((X, y), rank, world), **options)
    if rank != 0:
        return None
    return LaunchResult(d, world, None if group is None else dist.get_backend(group), shard_sizes(len(X), world))


def run_launch(opts: LaunchOptions) -> LaunchResult | None:
    """Run ``opts`` on this process: rank 0 gets the :class:`LaunchResult`, other ranks ``None``.

    Joins the ``torchrun`` process group when ``WORLD_SIZE`` is set (and leaves it afterwards),
    uses an already initialised one as is, and runs as one process otherwise.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return _run(opts, dist.group.WORLD)
    world = _env_int("WORLD_SIZE")
    if world is None:
        return _run(opts, None)
    rank = _env_int("RANK")
    if rank is None:
        raise InvalidInputError("WORLD_SIZE is set but RANK is not; start ccurv diagnose with torchrun")
    backend = opts.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device((_env_int("LOCAL_RANK") or 0) % torch.cuda.device_count())
    dist.init_process_group(backend, init_method=opts.init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=opts.timeout))
    try:
        return _run(opts, dist.group.WORLD)
    finally:
        dist.destroy_process_group()
