"""The per-query explorer in headless Chromium at 1280 px, worked with the keyboard only: real key presses
(``devtools.Browser.press``: Tab, arrow keys, Home, End, Enter, Space) reach the controls, choose two
systems, move through the sorted query list (one Tab stop; the arrow keys move in it) and open and close a
query; the page is only read, never clicked or scripted. What it shows is checked against the run directory
and the judgements read from the shared files. Paging and the filter are driven the same way on a report
of the explorer alone, with pages of 5 queries and files of 4.
"""

from __future__ import annotations

import itertools

import pytest

from tests.zerda_eval.report.conftest import quranqa_dev
from tests.zerda_eval.report.devtools import Browser
from tests.zerda_eval.report.test_browser import CHROMIUM, VIEWPORT
from zerda_eval.report import explorer, write_report
from zerda_eval.report.html import render_html
from zerda_eval.report.tables import load_run_dir
from zerda_eval.store.run_dir import read_cell_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install -y chromium)")
DATASET = "quranqa23/taskA/dev"  # the first dataset: the one the explorer opens on
MAX_TABS = 400  # presses allowed to reach the explorer's first control from the top of the page
FOCUSED = "document.activeElement.id || document.activeElement.tagName"
ROWS = "document.querySelectorAll('#ex-table tbody tr').length"
OPENED = "document.querySelector('#ex-table tr.detail') !== null"
SHOWN = """(() => {
  const $ = (id) => document.getElementById(id);
  const rows = [...$("ex-table").tBodies[0].rows].filter((r) => !r.classList.contains("detail"));
  const detail = document.querySelector("#ex-table tr.detail");
  const root = document.documentElement;
  return {
    systems: [$("ex-a").selectedOptions[0].text, $("ex-b").selectedOptions[0].text],
    measure: $("ex-measure").selectedOptions[0].text,
    page: $("ex-page").textContent,
    loaded: [...document.scripts].map((s) => s.getAttribute("src")).filter(Boolean),
    rows: rows.map((r) => [...r.cells].slice(0, 5).map((c) => c.textContent)),
    focusedRow: rows.findIndex((r) => r.contains(document.activeElement)),
    focusedBox: document.activeElement.getBoundingClientRect().toJSON(),
    focusedTag: document.activeElement.tagName,
    expanded: rows.map((r) => r.querySelector("button").getAttribute("aria-expanded")),
    text: detail && detail.querySelector("p").textContent,
    lists: detail && [...detail.querySelectorAll("ol")].map((ol) => [...ol.children].map((li) => li.textContent)),
    detailBox: detail && detail.getBoundingClientRect().toJSON(), height: window.innerHeight,
    viewport: root.clientWidth, scrollWidth: root.scrollWidth,
    beyond: [...document.querySelectorAll("#explorer *")]
      .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 0.5).map((e) => e.tagName),
  };
})()"""


def tab_to(browser: Browser, target: str) -> int:
    """Press Tab until ``target`` has the focus; how many presses it took."""
    for presses in range(1, MAX_TABS + 1):
        browser.press("Tab")
        if browser.read(FOCUSED) == target:
            return presses
    raise AssertionError(f"{MAX_TABS} Tab presses never reached #{target}")


def test_the_explorer_works_with_the_keyboard_at_1280_px(run_dir, shared_dir, tmp_path):
    write_report(run_dir, tmp_path / "report")
    data = load_run_dir(run_dir)
    rows = data.results[data.results["dataset"] == DATASET]
    with Browser(CHROMIUM, VIEWPORT) as browser:
        browser.open((tmp_path / "report" / "report.html").as_uri())
        browser.until(ROWS)  # the list is drawn once the measure's values file has loaded
        tab_to(browser, "ex-dataset")
        browser.press("Tab")
        assert browser.read(FOCUSED) == "ex-measure"
        browser.press("Tab")
        assert browser.read(FOCUSED) == "ex-a"
        browser.press("ArrowDown")  # A: from the baseline (first row) to the second system
        browser.press("Tab")
        assert browser.read(FOCUSED) == "ex-b"
        browser.press("End")  # B: the last system
        listed = browser.read(SHOWN)
        browser.press("Tab")
        assert browser.read(FOCUSED) == "ex-search"
        browser.press("Tab")  # into the sorted list: the first query's button
        first = browser.read(SHOWN)
        browser.press("ArrowDown")
        browser.press("ArrowDown")  # down the list to the third query
        third = browser.read(SHOWN)
        browser.press("Enter")  # open it (its file of rankings loads first)
        browser.until(OPENED)
        opened = browser.read(SHOWN)
        browser.press(" ")  # and close it again
        closed = browser.read(SHOWN)
        browser.press("ArrowUp")  # back up the list
        back = browser.read(SHOWN)
        browser.press("End")
        last = browser.read(SHOWN)
        browser.press("Home")
        home = browser.read(SHOWN)
        browser.press("Tab", shift=True)  # out of the list, back to the filter, and in again: where it was
        out = browser.read(FOCUSED)
        browser.press("Tab")
        again = browser.read(SHOWN)
        browser.press("Tab")  # one Tab leaves the list, however long it is
        after = browser.read(SHOWN)

    cell_a, cell_b = rows["cell_id"].iloc[1], rows["cell_id"].iloc[-1]
    assert listed["systems"] == [data.labels[rows["system"].iloc[1]], data.labels[rows["system"].iloc[-1]]]
    assert listed["viewport"] == VIEWPORT and listed["scrollWidth"] <= VIEWPORT and listed["beyond"] == []
    measure = listed["measure"]

    def values(cell):
        own = data.per_query[(data.per_query["cell_id"] == cell) & (data.per_query["measure"] == measure)]
        return dict(zip(own["query_id"], own["value"], strict=True))

    a, b = values(cell_a), values(cell_b)
    assert len(listed["rows"]) == len(a) > 3
    for qid, _, shown_a, shown_b, delta in listed["rows"]:
        assert shown_a == f"{a[qid]:.4f}" and shown_b == f"{b[qid]:.4f}"
        assert float(delta) == pytest.approx(b[qid] - a[qid], abs=6e-5)
    magnitudes = [abs(b[row[0]] - a[row[0]]) for row in listed["rows"]]
    assert all(x >= y - 1e-6 for x, y in itertools.pairwise(magnitudes))
    assert any(x > 0 for x in magnitudes)  # the two systems differ somewhere: the sort is tested

    assert (first["focusedRow"], first["focusedTag"]) == (0, "BUTTON")
    assert (third["focusedRow"], third["focusedTag"]) == (2, "BUTTON") and third["text"] is None
    qid = listed["rows"][2][0]
    assert opened["expanded"][2] == "true" and opened["expanded"].count("true") == 1
    assert opened["text"].startswith(qid + ": ") and opened["focusedRow"] == 2
    assert opened["focusedBox"]["top"] >= 0 and opened["focusedBox"]["bottom"] <= opened["height"]
    _, queries, qrels = quranqa_dev(shared_dir)  # the judgements, read straight from the shared files
    assert opened["text"] == f"{qid}: {queries[qid]}"
    for lines, cell in zip(opened["lists"], (cell_a, cell_b), strict=True):
        top = [doc for doc, _ in read_cell_run(run_dir, cell).get(qid, [])[:10]]
        assert len(top) == 10 and [line.rsplit(" ", 1) for line in lines] == [
            [judgement(qrels[qid].get(doc)), doc] for doc in top
        ]
    box = opened["detailBox"]  # the opened query and both lists in the window, not below its bottom edge
    assert box["top"] >= 0 and box["bottom"] <= opened["height"] + 1 and box["right"] <= VIEWPORT  # 1 px: rounding
    assert opened["scrollWidth"] <= VIEWPORT and opened["beyond"] == []
    assert closed["expanded"][2] == "false" and closed["text"] is None and closed["focusedRow"] == 2
    assert back["focusedRow"] == 1
    assert last["focusedRow"] == len(listed["rows"]) - 1 and home["focusedRow"] == 0
    assert out == "ex-search" and again["focusedRow"] == 0 and again["focusedTag"] == "BUTTON"
    assert after["focusedRow"] == -1


def judgement(grade: int | None) -> str:
    return "unjudged" if grade is None else f"relevant {grade}" if grade > 0 else f"judged {grade}"


def test_the_explorer_pages_its_list_and_its_files_and_filters_at_1280_px(run_dir, shared_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(explorer, "PAGE_ROWS", 5)
    monkeypatch.setattr(explorer, "CHUNK_QUERIES", 4)
    data = load_run_dir(run_dir)
    block = explorer.explorer_block(data)  # a page of the explorer alone (no plots to draw: a cheap test)
    explorer.write_explorer(tmp_path / "report", block)
    (tmp_path / "report" / "report.html").write_text(render_html([block], "explorer"), encoding="utf-8")
    rows = data.results[data.results["dataset"] == DATASET]
    with Browser(CHROMIUM, VIEWPORT) as browser:
        browser.open((tmp_path / "report" / "report.html").as_uri())
        browser.until(ROWS)
        first = browser.read(SHOWN)
        tab_to(browser, "ex-search")
        browser.press("Tab")  # the list
        browser.press("Tab")  # "previous page" is disabled on the first page: "next page"
        assert browser.read(FOCUSED) == "ex-next"
        browser.press("Enter")
        second = browser.read(SHOWN)
        browser.press("Tab", shift=True)  # "previous page", enabled now
        assert browser.read(FOCUSED) == "ex-prev"
        browser.press("Tab", shift=True)  # the list of the second page
        browser.press("Enter")
        browser.until(OPENED)
        opened = browser.read(SHOWN)
        browser.press("Tab", shift=True)
        assert browser.read(FOCUSED) == "ex-search"
        browser.type("12")
        filtered = browser.read(SHOWN)

    measure = first["measure"]
    a_cell, b_cell = rows["cell_id"].iloc[0], rows["cell_id"].iloc[1]  # A: the baseline, B: the next system
    assert first["systems"] == [data.labels[rows["system"].iloc[0]], data.labels[rows["system"].iloc[1]]]

    def values(cell):
        own = data.per_query[(data.per_query["cell_id"] == cell) & (data.per_query["measure"] == measure)]
        return dict(zip(own["query_id"], own["value"], strict=True))

    a, b = values(a_cell), values(b_cell)
    order = sorted(a, key=lambda q: (-round(abs(round(b[q], 6) - round(a[q], 6)), 12), q))
    assert len(order) == 21 and first["page"] == "queries 1-5 of 21 (page 1 of 5)"
    assert [row[0] for row in first["rows"]] == order[:5]
    assert second["page"] == "queries 6-10 of 21 (page 2 of 5)"
    assert [row[0] for row in second["rows"]] == order[5:10]
    for qid, _, shown_a, shown_b, _ in second["rows"]:
        assert (shown_a, shown_b) == (f"{a[qid]:.4f}", f"{b[qid]:.4f}")
    # the opened query (the second page's first) came from its own file of rankings, loaded when opened
    qid = order[5]
    chunk = data.per_query[data.per_query["cell_id"] == a_cell]["query_id"].drop_duplicates().tolist().index(qid) // 4
    assert f"explorer/d0-queries-{chunk}.js" not in second["loaded"]
    assert f"explorer/d0-queries-{chunk}.js" in opened["loaded"]
    assert not any("queries" in name and str(chunk) not in name for name in opened["loaded"])
    _, queries, qrels = quranqa_dev(shared_dir)
    assert opened["text"] == f"{qid}: {queries[qid]}"
    for lines, cell in zip(opened["lists"], (a_cell, b_cell), strict=True):
        top = [doc for doc, _ in read_cell_run(run_dir, cell).get(qid, [])[:10]]
        assert [line.rsplit(" ", 1) for line in lines] == [[judgement(qrels[qid].get(doc)), doc] for doc in top]
    holding = [q for q in order if "12" in f"{q} {queries[q]}".lower()]
    assert 0 < len(holding) < len(order)
    assert [row[0] for row in filtered["rows"]] == holding[:5]  # back to the first page of what matches
    assert filtered["page"].startswith(f"queries 1-{min(5, len(holding))} of {len(holding)} ")
    for seen in (first, second, opened, filtered):
        assert seen["scrollWidth"] <= VIEWPORT and seen["beyond"] == []
