"""The per-query explorer in headless Chromium at 1280 px: it fills, sorts, opens a query, and stays inside
the page. Every control is a native ``<select>`` or ``<button>`` (reachable with Tab, worked with the
keyboard); the probe focuses the first query's button and activates it as Enter would."""

from __future__ import annotations

import html
import itertools
import json
import re

import pytest

from tests.zerda_eval.report.conftest import quranqa_dev
from tests.zerda_eval.report.test_browser import CHROMIUM, VIEWPORT, chromium
from zerda_eval.report import write_report
from zerda_eval.report.tables import load_run_dir
from zerda_eval.store.run_dir import read_cell_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install -y chromium)")
PROBE = """<script>
window.addEventListener("load", () => {
  const $ = (id) => document.getElementById(id);
  const controls = ["ex-dataset", "ex-measure", "ex-a", "ex-b"].map($);
  const b = $("ex-b");
  b.value = String(b.options.length - 1);
  b.dispatchEvent(new Event("change"));
  const rows = [...$("ex-table").tBodies[0].rows];
  const button = rows[0].querySelector("button");
  button.focus();
  const focused = document.activeElement === button;
  button.click();
  const detail = rows[0].nextElementSibling;
  const root = document.documentElement;
  const out = {
    controls: controls.map((e) => e.tagName + ":" + (e.tabIndex >= 0)),
    systems: [$("ex-a").selectedOptions[0].text, b.selectedOptions[0].text],
    measure: $("ex-measure").selectedOptions[0].text,
    rows: rows.map((r) => [...r.cells].slice(0, 5).map((c) => c.textContent)),
    focused, expanded: button.getAttribute("aria-expanded"), buttonTag: button.tagName,
    text: detail.querySelector("p").textContent,
    lists: [...detail.querySelectorAll("ol")].map((ol) => [...ol.children].map((li) => li.textContent)),
    viewport: root.clientWidth, scrollWidth: root.scrollWidth,
    beyond: [...document.querySelectorAll("#explorer *")]
      .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 0.5).map((e) => e.tagName),
  };
  const pre = document.createElement("pre");
  pre.id = "zerda-explorer-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def test_the_explorer_sorts_opens_and_fits_at_1280_px(run_dir, shared_dir, tmp_path):
    write_report(run_dir, tmp_path / "report")
    page = tmp_path / "report" / "report.html"
    probe = page.with_name("explorer-probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = chromium(f"--window-size={VIEWPORT},900", "--virtual-time-budget=15000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="zerda-explorer-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the probe did not report; chromium said: {done.stderr[-500:]}"
    seen = json.loads(html.unescape(found.group(1)))
    assert seen["controls"] == ["SELECT:true"] * 4 and seen["buttonTag"] == "BUTTON" and seen["focused"]
    assert seen["scrollWidth"] <= seen["viewport"] == VIEWPORT and seen["beyond"] == []
    # the rows: every judged query of the dataset, A and B as the per-query table has them, |B - A| descending
    data = load_run_dir(run_dir)
    rows = data.results[data.results["dataset"] == "quranqa23/taskA/dev"]
    cell_a, cell_b = rows["cell_id"].iloc[0], rows["cell_id"].iloc[-1]  # A: the baseline (first row), B: the last
    assert seen["systems"] == [data.labels[rows["system"].iloc[0]], data.labels[rows["system"].iloc[-1]]]
    measure = seen["measure"]

    def values(cell):
        own = data.per_query[(data.per_query["cell_id"] == cell) & (data.per_query["measure"] == measure)]
        return dict(zip(own["query_id"], own["value"], strict=True))

    a, b = values(cell_a), values(cell_b)
    assert len(seen["rows"]) == len(a)
    for qid, _, shown_a, shown_b, delta in seen["rows"]:
        assert shown_a == f"{a[qid]:.4f}" and shown_b == f"{b[qid]:.4f}"
        assert float(delta) == pytest.approx(b[qid] - a[qid], abs=6e-5)
    magnitudes = [abs(b[row[0]] - a[row[0]]) for row in seen["rows"]]
    assert all(x >= y - 1e-6 for x, y in itertools.pairwise(magnitudes))
    # the opened query: its text and both top 10s, each document with its judgement
    qid = seen["rows"][0][0]
    assert seen["expanded"] == "true" and seen["text"].startswith(qid + ": ")
    _, _, qrels = quranqa_dev(shared_dir)  # the judgements, read straight from the shared files
    for lines, cell in zip(seen["lists"], (cell_a, cell_b), strict=True):
        top = [doc for doc, _ in read_cell_run(run_dir, cell).get(qid, [])[:10]]
        assert [line.rsplit(" ", 1) for line in lines] == [[judgement(qrels[qid].get(doc)), doc] for doc in top]


def judgement(grade: int | None) -> str:
    return "unjudged" if grade is None else f"relevant {grade}" if grade > 0 else f"judged {grade}"
