"""MkDocs hooks that put generated material into the site (``hooks:`` in ``mkdocs.yml``).

* **Math, offline.** ``pymdownx.arithmatex`` (generic mode) marks every formula; KaTeX typesets it in the
  browser from a copy served by the site itself (``assets/katex/``), so no page needs the network. The
  KaTeX files come from the Debian package ``libjs-katex`` (``/usr/share/javascript/katex``) or from the
  folder named by ``CCURV_KATEX_DIR``; the build stops with what to install when neither is there.
* **The report.** ``ccurv report``'s Markdown (every theorem with its proof, the appendix of checks, the
  witnesses and the figures) is generated during the build into ``report/report.md``, so
  ``mkdocs build`` alone makes a complete site (about 40 s on 2 cores). ``mkdocs serve`` generates it
  once per process. ``CCURV_SITE_REPORT=skip`` leaves it out for quick edits of the guide pages; the
  report page and the theorems page (``<!-- ccurv:report-link -->``) then say so.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

KATEX_SYSTEM = "/usr/share/javascript/katex"
#: what the pages load, relative to the KaTeX folder (fonts/ is copied whole)
KATEX_FILES = ("katex.min.js", "katex.min.css", "contrib/auto-render.js")
REPORT_DIR = "report"

SKIPPED_PAGE = ("# The report\n\nThis build left the report out (`CCURV_SITE_REPORT=skip`). Build the site without "
                "that variable to include every theorem with its proof, or run `ccurv report --format html`.\n")

_report_cache: dict[int, dict[str, bytes]] = {}


def katex_dir() -> Path:
    """The KaTeX distribution to serve: ``$CCURV_KATEX_DIR`` or Debian's ``libjs-katex``."""
    chosen = os.environ.get("CCURV_KATEX_DIR") or KATEX_SYSTEM
    folder = Path(chosen)
    missing = [f for f in (*KATEX_FILES, "fonts") if not (folder / f).exists()]
    if missing:
        raise PluginError(
            f"the site typesets its formulas with a KaTeX copy it serves itself, and {folder} lacks "
            f"{', '.join(missing)}: install it (`apt-get install libjs-katex`) or point CCURV_KATEX_DIR at a "
            "KaTeX distribution folder (katex.min.js, katex.min.css, contrib/auto-render.js, fonts/)")
    return folder


def _katex_files(config: Any) -> list[File]:
    src = katex_dir()
    names = [*KATEX_FILES, *(f"fonts/{p.name}" for p in sorted((src / "fonts").iterdir())
                            if p.suffix in (".woff2", ".woff", ".ttf"))]
    return [File.generated(config, f"assets/katex/{n}", abs_src_path=str((src / n).resolve())) for n in names]


def _report_files(seed: int = 0) -> dict[str, bytes]:
    """``report.md`` and its figures, generated once per process."""
    if seed not in _report_cache:
        from coupled_curvature.commands.report import build_report

        with tempfile.TemporaryDirectory(prefix="ccurv-site-report-") as tmp:
            out = os.path.join(tmp, "report")
            print("INFO    -  generating the report for the site (ccurv report --format md; about 40 s)",
                  file=sys.stderr)
            build_report(out, formats=("md",), seed=seed)
            _report_cache[seed] = {p.name: p.read_bytes() for p in sorted(Path(out).iterdir())
                                   if p.suffix in (".md", ".svg")}
    return _report_cache[seed]


def report_included() -> bool:
    return os.environ.get("CCURV_SITE_REPORT", "").strip().lower() != "skip"


def on_files(files: Files, config: Any) -> Files:
    for f in _katex_files(config):
        files.append(f)
    if report_included():
        for name, content in _report_files().items():
            files.append(File.generated(config, f"{REPORT_DIR}/{name}", content=content))
    else:  # the navigation still names the page: it says what was left out and how to put it in
        files.append(File.generated(config, f"{REPORT_DIR}/report.md", content=SKIPPED_PAGE))
    return files


def report_link() -> str:
    if report_included():
        return ("The report generated for this site: [every theorem with its proof](report/report.md) "
                "(statements, proofs with each step's evidence, the appendix of checks, witnesses, "
                "cross-checks, figures).")
    return SKIPPED_PAGE.split("\n\n", 1)[1].strip()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace("<!-- ccurv:report-link -->", report_link())
