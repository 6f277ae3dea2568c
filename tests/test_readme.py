"""The README's Python examples run and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S) if README.is_file() else []


@pytest.mark.skipif(not BLOCKS, reason="needs the source checkout's README.md")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path):
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr


@pytest.mark.skipif(not BLOCKS, reason="needs the source checkout's README.md")
def test_own_model_example_prints_the_same_D_after_rescaling(tmp_path):
    """The first example claims the rescaled net's D equals the original's 'to ~1e-15 relative'."""
    block = BLOCKS[0]
    assert "layer_rescale" in block and "~1e-15" in block
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = out.stdout.strip().splitlines()
    coupled, _dplus = (float(v) for v in lines[-2].split())
    moved = float(lines[-1])
    assert abs(moved - coupled) <= 1e-13 * abs(coupled)
    assert moved != 0.0
