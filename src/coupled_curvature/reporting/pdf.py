"""The LaTeX report compiled to ``report.pdf`` with ``pdflatex`` (two runs: the second resolves
the cross-references and the table of contents the first one recorded).

:func:`require_pdflatex` is called before any work, so that a missing TeX installation is said
in one line and nothing is computed. :func:`compile_pdf` runs inside the report's temporary
folder (:func:`coupled_curvature.base.output.write_folder`): the auxiliary files go to a build folder
that is removed afterwards, and a failed compilation raises, so the temporary folder is discarded
and an earlier report stays as it was.

>>> missing = not shutil.which("pdflatex")
>>> missing or require_pdflatex().endswith("pdflatex")
True
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from coupled_curvature.base.errors import CoupledCurvatureError

__all__ = ["DEBIAN_PACKAGES", "LatexUnavailableError", "LatexBuildError", "require_pdflatex", "compile_pdf",
           "first_error"]

#: what ``apt-get install`` needs for the report's preamble (T1 fonts, lmodern, amsmath, booktabs, longtable)
DEBIAN_PACKAGES = "texlive-latex-base texlive-latex-recommended lmodern texlive-fonts-recommended"

#: seconds one pdflatex run may take (the full report compiles in a few seconds)
TIMEOUT = 300


class LatexUnavailableError(CoupledCurvatureError, RuntimeError):
    """``pdflatex`` is not on the PATH; the message names the packages to install."""


class LatexBuildError(CoupledCurvatureError, RuntimeError):
    """``pdflatex`` failed on the report; the message carries its first error line."""


def require_pdflatex() -> str:
    """The path of ``pdflatex``, or :class:`LatexUnavailableError` with the install line."""
    path = shutil.which("pdflatex")
    if path is None:
        raise LatexUnavailableError("--format pdf needs pdflatex, which is not on the PATH; install it, e.g. "
                                    f"apt-get install {DEBIAN_PACKAGES}")
    return path


def first_error(log: str) -> str:
    """The first TeX error of a log (the ``!`` line and the line number after it), or its last line.

    >>> first_error("This is pdfTeX\\n! Undefined control sequence.\\nl.12 \\\\foo\\n")
    'Undefined control sequence. (l.12 \\\\foo)'
    >>> first_error("no error here\\n")
    'no error here'
    """
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("! "):
            where = next((x.strip() for x in lines[i + 1:i + 8] if x.startswith("l.")), "")
            return line[2:].strip() + (f" ({where})" if where else "")
    return lines[-1].strip() if lines else "no log written"


def compile_pdf(folder: str, tex: str, name: str = "report") -> str:
    """Compile the LaTeX source ``tex`` into ``folder/<name>.pdf`` (pdflatex twice); returns its path.

    The figures the source includes are looked up in ``folder``; every auxiliary file (``.aux``,
    ``.log``, ``.toc``, ``.out``) stays in a temporary build folder inside ``folder`` that is removed
    afterwards. :class:`LatexBuildError` with the first TeX error when a run fails.
    """
    pdflatex = require_pdflatex()
    build = tempfile.mkdtemp(prefix=".pdflatex-", dir=folder)
    try:
        with open(os.path.join(build, f"{name}.tex"), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(tex)
        argv = [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                f"-output-directory={os.path.basename(build)}", os.path.join(os.path.basename(build), f"{name}.tex")]
        for run in (1, 2):
            try:
                done = subprocess.run(argv, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True,
                                      timeout=TIMEOUT, check=False)
            except subprocess.TimeoutExpired:
                raise LatexBuildError(f"pdflatex run {run} took longer than {TIMEOUT} s; no PDF written") from None
            if done.returncode != 0:
                try:
                    with open(os.path.join(build, f"{name}.log"), encoding="latin-1") as fh:
                        log = fh.read()
                except OSError:
                    log = done.stdout.decode("latin-1", "replace")
                raise LatexBuildError(f"pdflatex failed on {name}.tex (run {run}): {first_error(log)}")
        target = os.path.join(folder, f"{name}.pdf")
        os.replace(os.path.join(build, f"{name}.pdf"), target)
        return target
    finally:
        shutil.rmtree(build, ignore_errors=True)
