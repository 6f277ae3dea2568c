"""The README's Python examples run and print what the README says they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S) if README.is_file() else []


def prints_what_it_says(block: str, stdout: str) -> bool:
    """The commented lines after ``# prints:`` are the last lines printed (each stripped)."""
    said = [ln.removeprefix("#").strip() for ln in block.split("# prints:", 1)[1].strip().splitlines()]
    printed = [ln.strip() for ln in stdout.strip().splitlines()]
    return bool(said) and printed[-len(said):] == said


def test_the_printed_lines_check_can_fail():
    block = 'print("a"); print("b")\n# prints:\n# a\n# b\n'
    assert prints_what_it_says(block, "a\nb\n")
    assert not prints_what_it_says(block, "a\nc\n") and not prints_what_it_says(block, "b\n")
    assert not prints_what_it_says("# prints:\n", "a\n")


@pytest.mark.skipif(not BLOCKS, reason="needs the source checkout's README.md")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_and_prints_what_it_says(index, tmp_path):
    """Each block runs cleanly; the rescaling example prints the same D after layer_rescale, as it claims
    ('to ~1e-15 relative'; checked to 1e-13); the profile example takes the Gram route and prints the
    same cumulative weight after layer_rescale (checked to 1e-13); a block that ends with ``# prints:``
    and commented lines prints exactly those lines last."""
    block = BLOCKS[index]
    paths = [str(README.parent / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=env)  # the checkout's code, not whichever copy is installed
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    if "# prints:" in block:
        assert prints_what_it_says(block, out.stdout), out.stdout[-3000:]
    if "import compare" in block:  # "Working with results": D unchanged (≤ 1e-12) under a uniform
        # neuron scaling by 3, RQ moved by 3² − 1 = 8 in the scaled layer, D moved by the non-uniform one
        uniform, mixed, summary = out.stdout.splitlines()[-3:]
        d_moved, rq_moved = (float(w.rstrip(",")) for w in uniform.split() if w[0].isdigit())
        assert d_moved <= 1e-12 and abs(rq_moved - 8.0) <= 0.01
        assert float(mixed.split()[-1]) >= 0.1 and summary.startswith("D:  median")
    elif "spectral_profile" in block:  # the profile example: same route, same cumulative weight after rescaling
        lines = out.stdout.strip().splitlines()
        assert lines[0].startswith("gram ") and float(lines[-1]) <= 1e-13
    elif "layer_rescale" in block:
        assert "~1e-15" in block
        lines = out.stdout.strip().splitlines()
        coupled, _dplus = (float(v) for v in lines[-2].split())
        moved = float(lines[-1])
        assert moved != 0.0 and abs(moved - coupled) <= 1e-13 * abs(coupled)
