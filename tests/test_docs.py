"""The documentation site builds with ``mkdocs build --strict`` and its API pages name every public
name of ``coupled_curvature.__all__``; the pages filled from the package (theorems, commands) hold
every theorem and every command.

Skipped where MkDocs is not installed (the ``docs`` extra) or outside a source checkout (the
installed-package run has no ``mkdocs.yml``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"
HOOKS = ROOT / "docs" / "hooks"

DOCS_EXTRA = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")
needs_mkdocs = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in DOCS_EXTRA) or not CONFIG.is_file(),
    reason="needs the docs extra (mkdocs, mkdocs-material, mkdocstrings-python) and the checkout's mkdocs.yml")


def undocumented(names: list[str], html: str) -> list[str]:
    """The names without an API entry in ``html``: an anchor ``id="<module path>.<name>"``."""
    return [n for n in names if not re.search(rf'id="coupled_curvature(?:\.\w+)*\.{re.escape(n)}"', html)]


def test_the_name_check_can_fail():
    html = '<h3 id="coupled_curvature.numeric.core.diagnostics.diagnose">diagnose</h3>'
    assert undocumented(["diagnose"], html) == []
    assert undocumented(["diagnose", "Diagnosis", "agnose"], html) == ["Diagnosis", "agnose"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(CONFIG), "-d", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


@needs_mkdocs
def test_strict_build_names_every_public_name(site):
    import coupled_curvature

    api = (site / "api.html").read_text(encoding="utf-8")
    assert undocumented(list(coupled_curvature.__all__), api) == []
    for extra in ("spectral_profile", "cutoff_sensitivity", "CurvatureCallback", "read_run"):
        assert undocumented([extra], api) == []
    # every guide page and the three older documents are built and in the navigation
    index = (site / "index.html").read_text(encoding="utf-8")
    for page in ("getting-started", "reading", "your-model", "tracking", "certified", "theorems", "cli", "api",
                 "distributed", "benchmarks", "peers"):
        assert (site / f"{page}.html").is_file() and f'href="{page}.html"' in index, page


@needs_mkdocs
def test_pages_filled_from_the_package(site):
    from coupled_curvature.commands import COMMANDS
    from coupled_curvature.theorems import THEOREMS

    theorems = (site / "theorems.html").read_text(encoding="utf-8")
    assert all(f"{t.id} · {t.title}" in theorems for t in THEOREMS.values())
    cli = (site / "cli.html").read_text(encoding="utf-8")
    assert all(f"usage: ccurv {name}" in cli for name in COMMANDS)
    api = (site / "api.html").read_text(encoding="utf-8")
    prose = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", api, flags=re.S)
    assert "&gt;&gt;&gt;" in api and "&gt;&gt;&gt;" not in prose  # every doctest prompt sits in a code block
    assert "<blockquote>" not in api  # none read as Markdown quotes


def test_docstrings_become_markdown():
    """The griffe extension of the site (docs/hooks/docstrings.py) on its own examples."""
    if not (HOOKS / "docstrings.py").is_file():
        pytest.skip("needs the source checkout's docs/hooks")
    pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    import doctest

    spec = importlib.util.spec_from_file_location("_ccurv_docs_docstrings", HOOKS / "docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert doctest.testmod(module).failed == 0
    md = module.to_markdown("Text.\n\n    >>> indented  # a literal block: left as it is\n\n>>> x = 1\n>>> x\n1\n")
    assert md.splitlines() == ["Text.", "", "    >>> indented  # a literal block: left as it is", "", "```pycon",
                               ">>> x = 1", ">>> x", "1", "```"]
