"""What every reliability case asserts: the folder is unchanged and the CLI said one clean line."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_hash(root: Path) -> str:
    """sha256 over every path (hidden ones too), mode and file content below ``root``."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            st = p.lstat()
            h.update(f"{p.relative_to(root)}|{st.st_mode:o}\n".encode())
            if p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


def cli_error(capsys, argv: list[str]) -> str:
    """Run ``ccurv argv`` in-process; assert exit 2 and one ``ccurv: error:`` line; return it."""
    from coupled_curvature.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("training", "  "))]
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    errors = [ln for ln in lines if ln.startswith("ccurv: error:")]
    assert len(errors) == 1, err
    return errors[0]
