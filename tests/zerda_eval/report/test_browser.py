"""report.html in a real browser: headless Chromium (the Debian package ``chromium``) at 1280 px.

The page is loaded with a probe script appended that, once every image has loaded, writes what it
measured into the DOM; ``--dump-dom`` prints that DOM. The page must not scroll sideways (its scroll
width is at most the viewport's), no element may reach past the viewport, every plot must load, and
each plot must be shown at its own display size (not shrunk to fit).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CHROMIUM
from zerda_eval.report import write_report

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary (Debian: apt-get install -y chromium; .ci/run installs it)"
)
VIEWPORT = 1280
PRINTABLE_WIDTH = 720  # A4 or Letter less Chromium's default margins, at 96 CSS px per inch
PROBE = """<script>
window.addEventListener("load", () => {
  const root = document.documentElement;
  const images = [...document.images].map(i => ({
    loaded: i.complete && i.naturalWidth > 0,
    shown: i.getBoundingClientRect().width,
    intended: Number(i.getAttribute("width")),
  }));
  const beyond = [...document.querySelectorAll("body *")]
    .filter(e => e.getBoundingClientRect().right > root.clientWidth + 0.5)
    .map(e => e.tagName + (e.id ? "#" + e.id : ""));
  const out = document.createElement("pre");
  out.id = "zerda-browser-check";
  out.textContent = JSON.stringify({viewport: root.clientWidth, scrollWidth: root.scrollWidth, images, beyond});
  document.body.appendChild(out);
});
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def measure(page: Path, width: int = VIEWPORT, print_rules: bool = False) -> dict:
    """What the probe measured on ``page`` in a ``width`` px wide window (``print_rules``: with the page's
    print CSS applied on screen, headless Chromium having no print-media switch for ``--dump-dom``)."""
    probe = page.with_name("browser-probe.html")
    text = page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>")
    if print_rules:
        assert "@media print {" in text
        text = text.replace("@media print {", "@media all {")
    probe.write_text(text, encoding="utf-8")
    try:
        done = chromium(f"--window-size={width},900", "--virtual-time-budget=15000", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    found = re.search(r'<pre id="zerda-browser-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the probe did not report; chromium said: {done.stderr[-500:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def page(run_dir, tmp_path_factory) -> Path:
    report_dir = tmp_path_factory.mktemp("browser") / "tiny"
    write_report(run_dir, report_dir)
    return (report_dir / "report.html").resolve()


def test_the_page_does_not_scroll_sideways_at_1280_px(page):
    seen = measure(page)
    print(f"viewport {seen['viewport']} px, scroll width {seen['scrollWidth']} px")
    assert seen["viewport"] == VIEWPORT
    assert seen["scrollWidth"] <= seen["viewport"]
    assert seen["beyond"] == []


def test_every_plot_loads_at_its_own_size(page):
    images = measure(page)["images"]
    plots = list((page.parent / "plots").glob("*.png"))
    assert len(images) == len(plots) > 5
    assert all(image["loaded"] for image in images)
    assert all(image["shown"] >= 0.99 * image["intended"] > 0 for image in images)


def test_a_narrow_window_shrinks_plots_instead_of_scrolling(page):
    seen = measure(page, 800)
    assert seen["scrollWidth"] <= seen["viewport"]
    assert all(image["shown"] <= seen["viewport"] for image in seen["images"])


def test_the_print_layout_fits_a_printed_page(page):
    seen = measure(page, PRINTABLE_WIDTH, print_rules=True)
    print(f"print layout: width {seen['viewport']} px, scroll width {seen['scrollWidth']} px")
    assert seen["scrollWidth"] <= seen["viewport"] and seen["beyond"] == []
    assert all(image["loaded"] for image in seen["images"])


def test_the_page_prints(page, tmp_path):
    pdf = tmp_path / "report.pdf"
    chromium("--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri())
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", data)) >= 3


def test_a_table_of_long_grid_labels_does_not_scroll_sideways(tmp_path):
    # reports/best's "What each fold chose": a label with no space beside six other columns
    from zerda_eval.report.html import render_html
    from zerda_eval.report.tables import Table

    grid = "k1=1.5,b=0.4,normalization=none,stemmer=english,stopwords=english,lowercase=true,engine=fast,rm3=false"
    inputs = f"bm25_grid[{grid}] + dense"
    header = ["dataset", "row", "fold", "inputs chosen", "grid point chosen", "ndcg@10 where chosen", "queries"]
    rows = [["beir/scifact/test", "rrf[tuned]", fold, inputs, "rrf[k=10]", "0.7186", "807 / 300"] for fold in "123"]
    page = tmp_path / "report.html"
    page.write_text(render_html([Table(header=header, rows=rows)], "folds"), encoding="utf-8")
    seen = measure(page)
    assert seen["scrollWidth"] <= seen["viewport"] and seen["beyond"] == []
