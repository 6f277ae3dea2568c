"""Data-parallel diagnose over 2 gloo processes on loopback equals one process on the full data.

The two ranks are subprocesses running this very file (``python test_distributed.py worker RANK
DIR``); they meet through a file store in ``tmp_path``, run every scenario below once, and write
their results as JSON. A module-scoped fixture starts them once (one torch import per rank), with
a 60 s collective timeout and a hard kill, so a hung group can never hang the suite. The reference
is ``diagnose`` in this process on the unsharded data, itself checked against a brute-force
``torch.func.hessian`` on one block.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

WORLD = 2
N = 97  # odd: the two contiguous shards differ in size (49, 48), which exercises the mean weighting
RTOL = 1e-12
EPS = 2.220446049250313e-16
FIELDS = ("w_sq", "g_sq", "w_dot_g", "wHw", "rayleigh", "coupled", "wHpinvw", "inverse_coupled")
FEW = 10  # samples of the Gram scenarios: m = 2·FEW rows
TIMEOUT_S = 300  # hard limit for the two workers together (heavily loaded machines included)


# ---------------------------------------------------------------------------- shared by both sides


def make_problem(seed: int = 0):
    """A small ReLU MLP (4-6-3) and N samples, identical in every process."""
    import torch

    from coupled_curvature.numeric.models.factory import make_mlp

    g = torch.Generator().manual_seed(1)
    X = torch.randn(N, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (N,), generator=g)
    return make_mlp(4, [6], 3, seed=seed), (X, y)


def launcher_args(json_path: str | None = None, epochs: int = 0) -> list[str]:
    """The launcher on wine (a 6x2 MLP, 61 samples); training costs seconds of optimizer start-up,
    so the default tests diagnose the initialisation and the slow torchrun test trains."""
    args = ["--dataset", "wine", "--arch", "mlp:6x2", "--epochs", str(epochs), "--samples", "61", "--max-dense", "64",
            "--method", "dense"]  # the launcher test compares the dense route with one process
    return args + (["--json", json_path] if json_path else [])


def has_hook() -> bool:
    import inspect

    from coupled_curvature.numeric.core.diagnostics import diagnose

    return "process_group" in inspect.signature(diagnose).parameters


def has_krylov() -> bool:
    import inspect

    from coupled_curvature.numeric.core.diagnostics import diagnose

    return "method" in inspect.signature(diagnose).parameters


# ---------------------------------------------------------------------------- worker side


def _scenarios(rank: int, out_dir: Path) -> dict:
    import torch
    import torch.distributed as dist
    from torch import nn

    from coupled_curvature.numeric import distributed as D
    from coupled_curvature.numeric.core.hvp import CurvatureSums

    group = dist.group.WORLD
    res: dict = {}

    def record(name, fn):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            res[name] = {"ok": fn()}
        except Exception as exc:  # reported to the parent, which decides
            res[name] = {"error": type(exc).__name__, "message": str(exc)}
        res[name]["seconds"] = time.perf_counter() - start
        res[name]["cpu"] = time.process_time() - cpu

    # -- the collectives on hand-made inputs (no diagnose hook needed)
    def unit():
        a = torch.arange(1.0, 5.0, dtype=torch.float64)
        curv = {
            "b": CurvatureSums((rank + 1) * a[:2].clone(), (rank + 1) * a[2:].clone(), None, [f"r{rank}"]),
            "a": CurvatureSums((rank + 1) * a.clone(), 10 * (rank + 1) * a.clone(),
                                (rank + 1) * torch.outer(a, a), ["common", f"r{rank}"]),
        }
        D.reduce_block_curvature(curv, group)
        scalar = D.all_reduce_sum(torch.tensor(rank + 0.5, dtype=torch.float64), group)
        strided = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).t() * (rank + 1)
        D.all_reduce_sum(strided, group)
        return {k: {"grad": c.grad.tolist(), "Hw": c.Hw.tolist(),
                    "dense": None if c.dense is None else c.dense.tolist(), "notes": c.notes}
                for k, c in curv.items()} | {"scalar": float(scalar), "strided": strided.tolist()}

    def layout_mismatch():
        one = torch.ones(3, dtype=torch.float64)
        curv = {"a": CurvatureSums(one.clone(), one.clone(), None)}
        if rank == 1:
            curv["extra"] = CurvatureSums(one.clone(), one.clone(), None)
        D.reduce_block_curvature(curv, group)

    def dense_flag_mismatch():
        one = torch.ones(3, dtype=torch.float64)
        dense = torch.eye(3, dtype=torch.float64) if rank == 0 else None
        D.reduce_block_curvature({"a": CurvatureSums(one.clone(), one.clone(), dense)}, group)

    def replicated(seed):
        model, _ = make_problem(seed)
        D.check_replicated(model, group)
        return True

    def weights():
        from coupled_curvature.numeric.core.inputs import prepare_batches

        ce = nn.CrossEntropyLoss()
        X, y = torch.zeros(5 + rank, 2), torch.zeros(5 + rank, dtype=torch.long)
        local = prepare_batches([(X[:2], y[:2]), (X[2:], y[2:])], ce)
        mixed = nn.CrossEntropyLoss(reduction="sum" if rank else "mean")
        try:
            D.global_batches(local, mixed, group)
            mismatch = None
        except Exception as exc:
            mismatch = type(exc).__name__
        return {"mean": [b.weight for b in D.global_batches(local, ce, group)],
                "sum": [b.weight for b in D.global_batches(prepare_batches([(X, y)], ce_sum), ce_sum, group)],
                "mismatch": mismatch}

    ce_sum = nn.CrossEntropyLoss(reduction="sum")
    record("unit", unit)
    record("weights", weights)
    record("layout_mismatch", layout_mismatch)
    record("dense_flag_mismatch", dense_flag_mismatch)
    record("replicated_same", lambda: replicated(0))
    record("replicated_other_seed", lambda: replicated(rank))

    if not has_hook():
        return res
    from coupled_curvature.cli import main as ccurv
    from coupled_curvature.numeric.core.diagnostics import diagnose

    model, (X, y) = make_problem()
    ce = {r: nn.CrossEntropyLoss(reduction=r) for r in ("mean", "sum")}

    def run(part, reduction="mean", mdl=model, **kw):
        return diagnose(mdl, ce[reduction], part, process_group=group, **kw).to_dict()

    record("sum", lambda: run(D.shard((X, y), rank, WORLD), "sum"))
    record("mean", lambda: run(D.shard((X, y), rank, WORLD)))
    record("strided", lambda: run(D.shard((X, y), rank, WORLD, strategy="strided")))
    record("batches", lambda: run([D.shard(D.shard((X, y), rank, WORLD), k, 3) for k in range(3)]))
    # negative controls: overlapping shards, and rank 1 holding another model (no replication check)
    record("overlap", lambda: run((X[:60], y[:60]) if rank == 0 else (X[37:], y[37:])))
    record("other_model", lambda: run(D.shard((X, y), rank, WORLD), mdl=make_problem(rank)[0]))
    record("options_mismatch", lambda: run(D.shard((X, y), rank, WORLD), inverse=rank == 0))
    if has_krylov():
        record("krylov", lambda: run(D.shard((X, y), rank, WORLD), method="krylov"))
    # the Gram route over ranks: 10 samples give m = 20 rows, fewer than the 24 parameters of 0.weight,
    # so G = BBᵀ needs the rows of both ranks (gathered); the other blocks sum BᵀB (all-reduce)
    few = (X[:FEW], y[:FEW])
    record("gram_few", lambda: run(D.shard(few, rank, WORLD), method="gram"))
    record("gram_budget", lambda: run(D.shard(few, rank, WORLD), method="gram", gram_memory=8))
    record("dense_few", lambda: run(D.shard(few, rank, WORLD), method="dense"))
    json_path = str(out_dir / "launcher.json")
    record("launcher", lambda: ccurv(["diagnose", *launcher_args(json_path)]))
    return res


def _worker(rank: int, out_dir: Path) -> None:
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import datetime

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        imported = time.perf_counter() - start
        dist.init_process_group("gloo", init_method=f"file://{out_dir / 'store'}", rank=rank,
                                world_size=WORLD, timeout=datetime.timedelta(seconds=60))
        try:
            results = _scenarios(rank, out_dir)
        finally:
            dist.destroy_process_group()
    results["seconds"] = {"import": imported, "total": time.perf_counter() - start, "cpu": time.process_time()}
    results["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    tmp = out_dir / f".rank{rank}.json"
    tmp.write_text(json.dumps(results))
    os.replace(tmp, out_dir / f"rank{rank}.json")


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "worker":
    _worker(int(sys.argv[2]), Path(sys.argv[3]))
    sys.exit(0)


# ---------------------------------------------------------------------------- test side

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from coupled_curvature.cli import main as ccurv  # noqa: E402
from coupled_curvature.base.errors import InvalidInputError  # noqa: E402
from coupled_curvature.numeric import distributed as D  # noqa: E402
from coupled_curvature.numeric.core.diagnostics import diagnose  # noqa: E402
from tests.numeric._nets import reference_block, rel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
needs_gloo = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="this torch build has no gloo backend")
needs_hook = pytest.mark.skipif(not has_hook(), reason="diagnose(..., process_group=...) does not exist yet")


def _worker_env() -> dict:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])  # package, tests.…
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    if "lo" in {name for _, name in socket.if_nameindex()}:
        env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    return env


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Both ranks' results, ``[rank0, rank1]``; fails (never hangs) if a worker dies or stalls."""
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("this torch build has no gloo backend")
    out = tmp_path_factory.mktemp("dist")
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r), str(out)], cwd=ROOT, env=_worker_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(WORLD)]
    logs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=TIMEOUT_S)
            logs.append(stdout + stderr)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for r, p in enumerate(procs):
        assert p.returncode == 0 and (out / f"rank{r}.json").exists(), f"rank {r} failed:\n{logs[r][-4000:]}"
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for r in results:
        r["out_dir"] = str(out)
        r["stdout"] = logs
    return results


def _ok(ranks, name):
    for r, res in enumerate(ranks):
        assert "ok" in res[name], f"rank {r}, scenario {name}: {res[name]}"
    return [res[name]["ok"] for res in ranks]


def _error(ranks, name):
    for r, res in enumerate(ranks):
        assert "error" in res[name], f"rank {r}, scenario {name} should have raised: {res[name]}"
    return [(res[name]["error"], res[name]["message"]) for res in ranks]


def _reference(reduction="mean", **kw):
    model, data = make_problem()
    return diagnose(model, nn.CrossEntropyLoss(reduction=reduction), data, **kw).to_dict()


def dplus_tol(block, rtol=RTOL):
    """``wᵀH⁺w`` moves by about ``ε/min_kept_rel_eig`` under rounding-level changes of ``H`` (the
    order of additions differs between one process and two); at and below that scale ``rtol`` holds."""
    from coupled_curvature.numeric.linalg.pinv import conditioned_rtol

    return conditioned_rtol(rtol, 1.0 / block["min_kept_rel_eig"] if block["min_kept_rel_eig"] else 1.0)


def _assert_matches(got, want, rtol=RTOL, n=N):
    assert got["meta"]["n_samples"] == want["meta"]["n_samples"] == n
    assert rel(got["meta"]["loss"], want["meta"]["loss"]) <= rtol, (
        f"loss {got['meta']['loss']} vs {want['meta']['loss']}: a ratio near the number of ranks means each "
        "rank weighted its mean-reduction loss by its own sample count (see distributed.global_batches)")
    assert [b["name"] for b in got["blocks"]] == [b["name"] for b in want["blocks"]]
    for g, w in zip(got["blocks"], want["blocks"]):
        assert g["rank"] == w["rank"], g["name"]
        for f in FIELDS:
            if w[f] is None:
                assert g[f] is None, (g["name"], f)
            else:
                tol = dplus_tol(w, rtol) if f in ("wHpinvw", "inverse_coupled") else rtol
                assert rel(g[f], w[f]) <= tol, (g["name"], f, g[f], w[f], rel(g[f], w[f]))


def _max_rel(got, want, fields=("g_sq", "wHw")):
    return max(rel(g[f], w[f]) for g, w in zip(got["blocks"], want["blocks"]) for f in fields)


# ---------------------------------------------------------------------------- shard (in process)


@pytest.mark.parametrize("n,world", [(1, 1), (5, 2), (97, 2), (10, 3), (7, 7), (100, 8)])
@pytest.mark.parametrize("strategy", ["contiguous", "strided"])
def test_shards_partition_the_samples(n, world, strategy):
    X, y = torch.arange(2.0 * n).reshape(n, 2), torch.arange(n)
    parts = [D.shard((X, y), r, world, strategy=strategy) for r in range(world)]
    seen = sorted(i for _, yy in parts for i in yy.tolist())
    assert seen == list(range(n))  # every sample exactly once
    assert max(len(p[1]) for p in parts) - min(len(p[1]) for p in parts) <= 1
    for Xp, yp in parts:
        assert torch.equal(Xp[:, 0], 2.0 * yp)  # rows stay paired with their targets
    if strategy == "contiguous":
        assert torch.equal(torch.cat([p[1] for p in parts]), y)


@pytest.mark.parametrize("args,match", [
    ((0, 0), "world_size"), ((2, 2), "rank"), ((-1, 2), "rank"), ((0, 2.0), "int"), ((True, 2), "int"),
    ((0, 11), "non-empty"),
])
def test_shard_rejects_bad_ranks(args, match):
    X, y = torch.zeros(10, 2), torch.zeros(10)
    with pytest.raises(InvalidInputError, match=match):
        D.shard((X, y), *args)


def test_shard_rejects_bad_data():
    with pytest.raises(InvalidInputError, match="same leading"):
        D.shard((torch.zeros(10, 2), torch.zeros(9)), 0, 2)
    with pytest.raises(InvalidInputError, match="pair"):
        D.shard(torch.zeros(10, 2), 0, 2)
    with pytest.raises(InvalidInputError, match="strategy"):
        D.shard((torch.zeros(10, 2), torch.zeros(10)), 0, 2, strategy="random")


def test_collectives_need_an_initialised_group():
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(InvalidInputError, match="init_process_group"):
        D.all_reduce_sum(torch.zeros(2), None)


# ---------------------------------------------------------------------------- 2 processes


@needs_gloo
def test_no_warnings_in_workers(ranks):
    assert [r["warnings"] for r in ranks] == [[], []]


@needs_gloo
def test_reduce_block_curvature_sums_and_unions(ranks):
    got = _ok(ranks, "unit")
    assert got[0] == got[1]
    a = [1.0, 2.0, 3.0, 4.0]
    # hand sums: rank r contributes (r+1)·x, so the total is 3·x
    assert got[0]["a"]["grad"] == [3 * v for v in a]
    assert got[0]["a"]["Hw"] == [30 * v for v in a]
    assert got[0]["a"]["dense"] == [[3 * u * v for v in a] for u in a]
    assert got[0]["b"] == {"grad": [3.0, 6.0], "Hw": [9.0, 12.0], "dense": None, "notes": ["r0", "r1"]}
    assert got[0]["a"]["notes"] == ["common", "r0", "r1"]
    assert got[0]["scalar"] == 2.0
    assert got[0]["strided"] == [[0.0, 9.0], [3.0, 12.0], [6.0, 15.0]]


@needs_gloo
def test_global_batches_weight_by_the_total_count(ranks):
    got = _ok(ranks, "weights")
    # rank 0 holds 5 samples (batches 2 + 3), rank 1 holds 6 (2 + 4): N = 11
    assert got[0]["mean"] == [2 / 11, 3 / 11] and got[1]["mean"] == [2 / 11, 4 / 11]
    assert got[0]["sum"] == got[1]["sum"] == [1.0]
    assert got[0]["mismatch"] == got[1]["mismatch"] == "InvalidInputError"


@needs_gloo
def test_inconsistent_layouts_raise_on_every_rank(ranks):
    for err, msg in _error(ranks, "layout_mismatch"):
        assert err == "InvalidInputError" and "extra" in msg
    errors = _error(ranks, "dense_flag_mismatch")
    assert errors[0] == errors[1]  # the same diagnosis on both ranks
    assert errors[0][0] == "InvalidInputError" and "dense Hessian block" in errors[0][1]


@needs_gloo
def test_check_replicated(ranks):
    assert _ok(ranks, "replicated_same") == [True, True]
    for err, msg in _error(ranks, "replicated_other_seed"):
        assert err == "InvalidInputError" and "different model values" in msg


@needs_gloo
@needs_hook
def test_reference_agrees_with_brute_force():
    """The single-process reference itself, against torch.func.hessian on the full data (sum loss)."""
    model, (X, y) = make_problem()
    ref = _reference("sum")
    for b in ref["blocks"]:
        brute = reference_block(model, nn.CrossEntropyLoss(reduction="sum"), X, y, b["params"])
        assert rel(b["g_sq"], brute["g_sq"]) <= 1e-12 and rel(b["wHw"], brute["wHw"]) <= 1e-11


@needs_gloo
@needs_hook
@pytest.mark.parametrize("scenario,reduction", [("sum", "sum"), ("mean", "mean"), ("strided", "mean"),
                                                ("batches", "mean")])
def test_two_ranks_equal_one_process(ranks, scenario, reduction):
    got = _ok(ranks, scenario)
    assert got[0] == got[1]  # every rank returns the same Diagnosis, bit for bit
    ref = _reference(reduction)
    # the problem is conditioned so that D⁺ too is held to the plain 1e-12
    assert all(b["inverse_coupled"] is not None and dplus_tol(b) == RTOL for b in ref["blocks"])
    _assert_matches(got[0], ref)


@needs_gloo
@needs_hook
def test_negative_controls_do_not_match(ranks):
    ref = _reference("mean")
    overlap = _ok(ranks, "overlap")[0]
    assert overlap["meta"]["n_samples"] == 60 + N - 37
    other = _ok(ranks, "other_model")
    assert _max_rel(overlap, ref) > 1e-3 and _max_rel(other[0], ref) > 1e-3
    for err, msg in _error(ranks, "options_mismatch"):
        assert err == "InvalidInputError" and "different options (inverse" in msg


@needs_gloo
@needs_hook
def test_the_gram_route_runs_over_two_ranks_and_equals_one_process(ranks):
    """Issue 23: both sides of the Gram route under data parallelism, to 1e-12 of one process."""
    got = _ok(ranks, "gram_few")
    assert got[0] == got[1]
    model, (X, y) = make_problem()
    want = diagnose(model, nn.CrossEntropyLoss(), (X[:FEW], y[:FEW]), method="gram").to_dict()
    sides = {b["name"]: b["method"] for b in got[0]["blocks"]}
    assert set(sides.values()) == {"gram"}, sides
    assert any("G = BBᵀ from 20 rows" in b["method_reason"] for b in got[0]["blocks"])  # rows of both ranks
    assert any("BᵀB from 20 rows" in b["method_reason"] for b in got[0]["blocks"])
    _assert_matches(got[0], want, n=FEW)
    dense = _ok(ranks, "dense_few")[0]  # and the dense route over ranks agrees (a route-independent reference)
    _assert_matches(got[0], dense, n=FEW)


@needs_gloo
@needs_hook
def test_the_gram_route_over_ranks_refuses_above_its_memory_budget_with_the_budget_named(ranks):
    got = _ok(ranks, "gram_budget")
    assert got[0] == got[1]
    block = {b["name"]: b for b in got[0]["blocks"]}["0.weight"]
    assert block["method"] == "dense" and "gram_memory = 8 bytes; raise gram_memory" in block["method_reason"]
    assert any("Gram route does not apply" in n and "gram_memory" in n for n in block["notes"])


@needs_gloo
@needs_hook
def test_krylov_two_ranks_equal_one_process(ranks):
    if not has_krylov() or "krylov" not in ranks[0]:
        pytest.skip("diagnose has no method= parameter")
    got = _ok(ranks, "krylov")
    assert got[0] == got[1]
    _assert_matches(got[0], _reference("mean", method="krylov"))


@needs_gloo
@needs_hook
def test_launcher_two_ranks_equal_one_process(ranks, tmp_path, capsys):
    assert _ok(ranks, "launcher") == [0, 0]
    logs = ranks[0]["stdout"]
    assert "D⁺" in logs[0] and "D⁺" not in logs[1]  # only rank 0 prints
    got = json.loads(Path(ranks[0]["out_dir"], "launcher.json").read_text())
    assert got["meta"]["distributed"]["world_size"] == 2 and got["meta"]["distributed"]["shard_sizes"] == [31, 30]
    assert ccurv(["diagnose", *launcher_args(str(tmp_path / "one.json"))]) == 0
    assert "D⁺" in capsys.readouterr().out
    want = json.loads((tmp_path / "one.json").read_text())
    assert want["meta"]["distributed"]["world_size"] == 1
    _assert_matches(got, want, n=61)  # D⁺ held to dplus_tol: a rank-deficient block may be ill-conditioned


def test_launcher_rejects_bad_arch(capsys):
    assert ccurv(["diagnose", "--arch", "resnet:3", "--epochs", "0"]) == 2
    assert "mlp:WIDTHxDEPTH" in capsys.readouterr().err


@pytest.mark.slow
@needs_hook
def test_torchrun_two_processes(tmp_path):
    """The documented command line, under the real torchrun (a few seconds of agent start-up)."""
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "coupled_curvature", "diagnose", *launcher_args(str(out), epochs=2)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_worker_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "D⁺" in proc.stdout
    got = json.loads(out.read_text())
    assert got["meta"]["distributed"]["world_size"] == 2
    assert ccurv(["diagnose", *launcher_args(str(tmp_path / "one.json"), epochs=2)]) == 0
    _assert_matches(got, json.loads((tmp_path / "one.json").read_text()), n=61)
