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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"
HOOKS = ROOT / "docs" / "hooks"

DOCS_EXTRA = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")
KATEX = Path(os.environ.get("CCURV_KATEX_DIR") or "/usr/share/javascript/katex")
needs_mkdocs = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in DOCS_EXTRA) or not CONFIG.is_file()
    or not (KATEX / "katex.min.js").is_file(),
    reason="needs the docs extra (mkdocs, mkdocs-material, mkdocstrings-python), the checkout's mkdocs.yml and "
           "KaTeX for the formulas (apt-get install libjs-katex, or CCURV_KATEX_DIR)")


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


def _assets_hook():
    if not (HOOKS / "assets.py").is_file():
        pytest.skip("needs the source checkout's docs/hooks")
    pytest.importorskip("mkdocs", reason="mkdocs comes with the docs extra")
    spec = importlib.util.spec_from_file_location("_ccurv_docs_assets", HOOKS / "assets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_missing_katex_stops_the_build_with_what_to_install(tmp_path, monkeypatch):
    from mkdocs.exceptions import PluginError

    hook = _assets_hook()
    monkeypatch.setenv("CCURV_KATEX_DIR", str(tmp_path))
    with pytest.raises(PluginError, match=r"apt-get install libjs-katex.*CCURV_KATEX_DIR"):
        hook.katex_dir()
    for name in (*hook.KATEX_FILES, "fonts/KaTeX_Main-Regular.woff2"):  # a complete distribution folder is taken
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert hook.katex_dir() == tmp_path


@needs_mkdocs
def test_the_site_serves_katex_and_holds_the_report_with_its_proofs(site):
    from coupled_curvature.theorems import THEOREMS

    assert (site / "assets/katex/katex.min.js").is_file() and (site / "assets/katex/katex.min.css").is_file()
    assert list((site / "assets/katex/fonts").glob("KaTeX_Main-Regular.woff2"))
    for page in ("index.html", "theorems.html", "report/report.html"):
        text = (site / page).read_text(encoding="utf-8")
        assert re.search(r'src="(\.\./)?assets/katex/katex\.min\.js"', text), page
        assert 'class="arithmatex"' in text, page  # the page has formulas marked for KaTeX
    report = (site / "report/report.html").read_text(encoding="utf-8")
    for t in THEOREMS.values():
        assert f"{t.id} — {t.title}" in report
    assert report.count("<em>Proof.</em>") >= len(THEOREMS)
    prose = re.sub(r'<(div|span) class="arithmatex">.*?</\1>|<pre.*?</pre>|<code>.*?</code>', "", report, flags=re.S)
    assert "$$" not in prose  # every display formula was taken by arithmatex (a list item's display, too)
    assert {p.name for p in (site / "report").glob("*.svg")} >= {"rescaling.svg", "neuron_scaling.svg"}
    assert 'href="report/report.html"' in (site / "theorems.html").read_text(encoding="utf-8")
    index = (site / "search/search_index.json").read_text(encoding="utf-8")
    assert "report/report.html" in index  # the search covers the proofs


CHROMIUM = shutil.which("chromium")


@needs_mkdocs
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_formulas_are_typeset_when_served(site):
    """Served over HTTP as the docs say, KaTeX turns every marked formula into typeset math; a formula it
    cannot read stays as TeX (the control: one broken formula, one formula left untypeset)."""
    import functools
    import http.server
    import threading

    report = (site / "report/report.html").read_text(encoding="utf-8")
    broken = report.replace("<article", '<span class="arithmatex">\\(\\frac{\\)</span><article', 1)
    (site / "report/probe.html").write_text(broken, encoding="utf-8")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        def dom(page: str) -> str:
            run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--virtual-time-budget=8000", "--dump-dom",
                                  f"http://127.0.0.1:{server.server_address[1]}/{page}"],
                                 capture_output=True, text=True, timeout=120)
            return run.stdout
        for page, errors in (("report/report.html", 0), ("report/probe.html", 1), ("index.html", 0)):
            text = dom(page)
            marked = text.count('class="arithmatex"')
            assert marked > 0 and marked - text.count('class="katex"') == errors, page  # formulas left as TeX
    finally:
        server.shutdown()
        server.server_close()
