"""Load the HTML report in headless Chromium: no console errors, math rendered with size, heading visible,
the four figures (inlined SVG; the last two in the "Arbitrary precision" and "Cutoff sensitivity" sections)
laid out with size; no element wider than the viewport at 1280 and at 800 px.

Skipped only when no ``chromium`` is installed. The probe is a copy of the report with a
measuring script appended (the report itself has no scripts); ``--dump-dom`` returns its verdict.
"""

import json
import re
import shutil
import subprocess

import pytest

from coupled_curvature.commands import report as build
from coupled_curvature.reporting.cutoff_section import cutoff_table
from _report_data import small_collect

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--window-size=1280,1600"]

PROBE = """
<script>
window.addEventListener("load", function () {  // after images and layout, not while they load
  var errors = window.__probeErrors || [];
  function box(e) { var r = e.getBoundingClientRect(); return [r.width, r.height]; }
  var maths = Array.prototype.slice.call(document.querySelectorAll("math"));
  var sizes = maths.map(box);
  var h2 = document.querySelector("section[id^='T'] h2");  // the first theorem's heading
  var hb = h2 ? h2.getBoundingClientRect() : null;
  var imgs = Array.prototype.slice.call(document.querySelectorAll("figure svg")).map(function (i) {
    var r = i.getBoundingClientRect(); return [i.getAttribute("data-figure"), i.querySelectorAll("path").length, r.width, r.height]; });
  var ph = document.querySelector("#precision h2"), pt = document.querySelector("#precision table");
  var ch = document.querySelector("#cutoff h2"), ct = document.querySelector("#cutoff table");
  var out = {errors: errors, n_math: maths.length,
             zero_math: sizes.filter(function (s) { return !(s[0] > 0 && s[1] > 0); }).length,
             mathml_layout: maths.length ? getComputedStyle(maths[0]).display : "",
             heading: h2 ? h2.textContent : null,
             heading_box: hb ? [hb.top, hb.width, hb.height] : null,
             heading_visible: h2 ? getComputedStyle(h2).visibility === "visible" && hb.width > 0 && hb.height > 0 : false,
             images: imgs,
             precision_heading: ph ? ph.textContent : null,
             precision_rows: pt ? pt.querySelectorAll("tbody tr").length : 0,
             cutoff_heading: ch ? ch.textContent : null,
             cutoff_rows: ct ? ct.querySelectorAll("tbody tr").length : 0};
  var pre = document.createElement("pre"); pre.id = "probe-result"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""
CATCH = ("<script>window.__probeErrors = []; window.addEventListener('error', function (e) {"
         " window.__probeErrors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || 'error'));"
         " }, true);</script>")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_report_renders_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = tmp_path / "report"
    build.build_report(str(out), formats="html")
    html = (out / "report.html").read_text(encoding="utf-8")
    probe = out / "probe.html"
    probe.write_text(html.replace("<head>", "<head>" + CATCH, 1).replace("</body>", PROBE + "</body>", 1),
                     encoding="utf-8")
    profile = tmp_path / "profile"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', run.stdout, re.S)
    assert m, run.stderr[-2000:]
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    console_errors = [l for l in run.stderr.splitlines() if "CONSOLE" in l and ("rror" in l or "Uncaught" in l)]
    assert res["errors"] == [] and console_errors == []
    assert res["n_math"] > 20 and res["zero_math"] == 0
    assert res["heading"].startswith("T4") and res["heading_visible"]
    # the figures are inlined SVG (report.html alone is complete): drawn, laid out with size
    assert all(w > 0 and bw > 300 and bh > 200 for _, w, bw, bh in res["images"])
    assert [name for name, *_ in res["images"]] == ["rescaling", "neuron_scaling", "precision", "cutoff",
                                                     "sharpness_twin"]
    assert "<img" not in html and ".svg'" not in html
    assert res["precision_heading"] == "Arbitrary precision" and res["precision_rows"] == 4
    assert res["cutoff_heading"] == "Cutoff sensitivity"
    assert res["cutoff_rows"] == len(cutoff_table(small_collect()[0].cutoff)) - 1
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                    (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000


WIDTH_PROBE = """
<script>
window.addEventListener("load", function () {
  var all = Array.prototype.slice.call(document.querySelectorAll("*"));
  var right = Math.max.apply(null, all.map(function (e) { return e.getBoundingClientRect().right; }));
  var worst = all.filter(function (e) { return e.getBoundingClientRect().right > window.innerWidth; })
                 .slice(0, 5).map(function (e) { return e.tagName + "." + e.className + ":" + (e.textContent || "").slice(0, 60); });
  var pre = document.createElement("pre"); pre.id = "probe-result";
  pre.textContent = JSON.stringify({right: right, viewport: window.innerWidth,
                                    scroll: document.documentElement.scrollWidth, worst: worst});
  document.body.appendChild(pre);
});
</script>
"""


def _width_run(html: str, folder, width: int) -> dict:
    probe = folder / f"width{width}.html"
    probe.write_text(html.replace("</body>", WIDTH_PROBE + "</body>", 1), encoding="utf-8")
    flags = [f for f in FLAGS if not f.startswith("--window-size")] + [f"--window-size={width},1000"]
    run = subprocess.run([CHROMIUM, *flags, f"--user-data-dir={folder / 'profile'}", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', run.stdout, re.S)
    assert m, run.stderr[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("width", [1280, 800])
def test_html_report_fits_the_window(tmp_path, monkeypatch, width):
    """No element's right edge is past the viewport (tables and formulas wrap), and a screenshot is taken."""
    monkeypatch.setattr(build, "collect", lambda *a, **k: small_collect())
    out = tmp_path / "report"
    build.build_report(str(out), formats="html")
    html = (out / "report.html").read_text(encoding="utf-8")
    res = _width_run(html, tmp_path, width)
    assert res["viewport"] == width
    assert res["right"] <= width and res["scroll"] <= width, res
    shot = tmp_path / f"report-{width}.png"
    flags = [f for f in FLAGS if not f.startswith("--window-size")] + [f"--window-size={width},1400"]
    subprocess.run([CHROMIUM, *flags, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
