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


@pytest.mark.skipif(not BLOCKS, reason="needs the source checkout's README.md")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_and_prints_what_it_says(index, tmp_path):
    """Each block runs cleanly; the rescaling example prints the same D after layer_rescale, as it claims
    ('to ~1e-15 relative'; checked to 1e-13)."""
    block = BLOCKS[index]
    # this checkout's package, not whichever copy is installed (an editable install may point elsewhere)
    path = os.pathsep.join(p for p in (str(README.parent), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": path})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    if "layer_rescale" in block:
        assert "~1e-15" in block
        lines = out.stdout.strip().splitlines()
        coupled, _dplus = (float(v) for v in lines[-2].split())
        moved = float(lines[-1])
        assert moved != 0.0 and abs(moved - coupled) <= 1e-13 * abs(coupled)
