"""Ctrl-C and SIGTERM while a command writes: one line, no traceback, the previous output intact.

A child process runs ``ccurv report`` through the real command line and the real folder writer,
with the report's content replaced by one file and a long sleep, so the signal arrives while the
new report is half built in its temporary folder beside the target.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coupled_curvature.base.output import write_folder
from tests.reliability._harness import tree_hash

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if started in background
    sys.path[:0] = [{root!r}]
    import coupled_curvature.commands.report as build
    from coupled_curvature.base.output import write_folder

    def build_report(out, **options):  # the real command line and writer, a slow report inside
        def fill(tmp):
            with open(os.path.join(tmp, "report.md"), "w") as fh:
                fh.write("half a report")
            print("writing", flush=True)
            time.sleep(120)
        return write_folder(out, "report", fill)

    build.build_report = build_report
    from coupled_curvature.cli import main
    sys.exit(main(["report", "--out", sys.argv[1], "--format", "md"]))
    """
)


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
@pytest.mark.parametrize("existing", [False, True])
def test_signal_while_writing_leaves_previous_output(sig, code, word, existing, tmp_path):
    out = tmp_path / "report"
    if existing:
        def fill(tmp):
            Path(tmp, "report.md").write_text("the previous report")
        write_folder(str(out), "report", fill)
    before = tree_hash(tmp_path)
    script = CHILD.format(root=str(ROOT / "src"))
    child = subprocess.Popen([sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert child.stdout.readline().strip() == "writing"  # the temporary folder exists now
        assert any(p.name.startswith(".report.tmp-") for p in tmp_path.iterdir())
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"ccurv: {word}; earlier output files were left as they were"]
    assert tree_hash(tmp_path) == before  # previous report (or nothing) and no hidden temp folder
    assert sorted(os.listdir(tmp_path)) == (["report"] if existing else [])
