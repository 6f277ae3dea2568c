"""``ccurv track`` (issue 25, item 3): a real run and its rescaled twin, the summary, the page, bad input."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import torch
from torch import nn

from coupled_curvature.cli import main
from coupled_curvature.numeric import CurvatureTracker, layer_rescale, load_dataset, make_mlp
from coupled_curvature.numeric.tracking.records import FILENAME, read_run

C = 8.0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A small ReLU MLP trained on digits, logged twice: as it is and as its layer-0 rescaled twin."""
    base = tmp_path_factory.mktemp("track")
    data = load_dataset("digits")
    X, y = data.X_train[:400], data.y_train[:400]
    probe = (X[:32], y[:32])
    net = make_mlp(64, [24, 24], 10, seed=1)
    loss = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    run, twin = base / "run", base / "twin"
    t1 = CurvatureTracker(net, loss, probe, every=20, log_dir=run, inverse=True, measures=("RQ",))
    t2 = CurvatureTracker(net, loss, probe, every=20, log_dir=twin, inverse=True, measures=("RQ",),
                          transform=lambda m: layer_rescale(m, 0, C))
    for step in range(41):
        idx = torch.randint(0, len(X), (32,), generator=g)
        opt.zero_grad()
        loss(net(X[idx]), y[idx]).backward()
        opt.step()
        t1.step(step), t2.step(step)
    t1.close(), t2.close()
    return base, run, twin


def test_twin_D_coincides_and_RQ_moves_by_c_squared(runs):
    _, run, twin = runs
    (ha, a), (hb, b) = read_run(run), read_run(twin)
    assert ha == hb and [r["step"] for r in a] == [0, 20, 40] == [r["step"] for r in b]
    expected = {"0.weight": C ** -2, "0.bias": C ** -2, "2.weight": C ** 2, "2.bias": 1.0, "4.weight": 1.0,
                "4.bias": 1.0}
    for p, q in zip(a, b):
        assert p["error"] is None and q["error"] is None and p["loss"] == pytest.approx(q["loss"], rel=1e-12)
        for blk, ratio in expected.items():
            assert abs(q[f"D/{blk}"] / p[f"D/{blk}"] - 1) < 1e-10
            assert q[f"RQ/{blk}"] / p[f"RQ/{blk}"] == pytest.approx(ratio, rel=1e-10)
    # the curves are not flat: D moved during training, so coinciding curves say something
    assert any(abs(a[-1][f"D/{blk}"] / a[0][f"D/{blk}"] - 1) > 1e-2 for blk in expected)


def test_summary_and_page(runs, capsys, monkeypatch):
    base, run, twin = runs
    monkeypatch.setenv("COLUMNS", "100")
    page = base / "page.html"
    assert main(["track", str(run), str(twin), "--out", str(page)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    _, a = read_run(run)
    _, b = read_run(twin)
    for blk in ("0.weight", "4.bias"):
        vals = [r[f"D/{blk}"] for r in a]
        row = next(line for line in out.splitlines() if line.startswith(blk + " "))
        assert row.split()[1:5] == [f"{v:.3e}" for v in (vals[0], vals[-1], min(vals), max(vals))]
    ratio = b[0]["RQ/2.weight"] / a[0]["RQ/2.weight"]
    comp = [line for line in out.splitlines() if line.startswith("2.weight ")][-1]
    assert comp.split()[1] == "3" and comp.split()[3] == f"{ratio:.3e}"
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 3
    assert re.findall(r"data-figure='([^']+)'", html) == ["track-d", "track-rq", "track-dplus"]
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    assert [p.name for p in base.iterdir() if p.name.startswith(".")] == []  # no temporary left behind


def test_one_run_and_the_default_page(runs, capsys):
    _, run, _ = runs
    assert main(["track", str(run)]) == 0
    assert (run / "track.html").is_file() and "run 1:" in capsys.readouterr().out
    (run / "track.html").unlink()


def _copy(runs, name):
    base, run, _ = runs
    dst = base / name
    shutil.copytree(run, dst)
    return dst


def test_bad_logs_are_refused_before_any_work(runs, tmp_path, capsys):
    page = tmp_path / "p.html"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["track", str(empty), "--out", str(page)]) == 2
    assert f"holds no {FILENAME}" in capsys.readouterr().err
    assert main(["track", str(tmp_path / "missing"), "--out", str(page)]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = _copy(runs, "bad")
    lines = (bad / FILENAME).read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    (bad / FILENAME).write_text("".join(lines), encoding="utf-8")
    assert main(["track", str(bad), "--out", str(page)]) == 2
    assert re.search(r"curvature\.jsonl, line 3: not a JSON line", capsys.readouterr().err)
    other = _copy(runs, "other")
    lines[0] = '{"schema": "someone-else/2", "rows": []}\n'
    (other / FILENAME).write_text("".join(lines), encoding="utf-8")
    assert main(["track", str(other), "--out", str(page)]) == 2
    assert "line 1: not a curvature log of coupled-curvature" in capsys.readouterr().err
    assert not page.exists()
    assert main(["track", str(runs[1]), "--out", str(tmp_path)]) == 2  # --out is a folder
    assert "--out" in capsys.readouterr().err


def test_parser_imports_neither_torch_nor_sympy():
    code = ("import sys; from coupled_curvature.cli import build_parser; build_parser().parse_args(['track', 'x']);"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sympy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_page_renders_in_chromium(runs, tmp_path):
    base, run, twin = runs
    page = tmp_path / "page.html"
    assert main(["track", str(run), str(twin), "--out", str(page)]) == 0
    shot = tmp_path / "shot.png"
    subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 10_000
