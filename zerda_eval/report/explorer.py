"""The per-query explorer of report.html: two systems of a dataset, their queries sorted by difference.

Where a researcher finds why a system wins: choose a dataset, a measure and two systems; the queries
are listed by how much the second beats the first (largest difference first, either way), ``PAGE_ROWS`` to a
page, a filter box keeps the queries whose id or text holds what is typed, and opening one shows its text and
both systems' top ``EXPLORER_TOP`` with each document's judgement (its grade, 0 for judged non-relevant,
"unjudged"). No server, no asset outside the report folder: the data is script files (a ``<script src>``
loads over file://, where a fetch would be refused). ``EXPLORER_FILE`` beside report.html sets
``window.zerdaExplorerData``: per dataset its measures, systems, query ids and texts (what the list and the
filter need). The rest is paged in ``EXPLORER_DIR`` and loaded when first needed, so the page opens in about
a second at 7,000 queries x 10 cells: one file per dataset and measure (every cell's per-query values,
loaded when that measure is chosen) and one per ``CHUNK_QUERIES`` queries (each cell's top
``EXPLORER_TOP`` and their judgements, loaded when one of those queries is opened). Each such file calls
``window.zerdaExplorerChunk(name, data)``. The values are the cells' per-query values
(``per_query.parquet``), the rankings their ``run.trec.gz`` files; query texts and judgements come from the
collection, loaded as the run loaded it. A dataset whose collection cannot be loaded here is left out with a
note.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zerda_eval.errors import ZerdaEvalError
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX
from zerda_eval.report.formats import EXPLORER_DIR, EXPLORER_FILE
from zerda_eval.report.tables import RunData, dataset_measures
from zerda_eval.store.files import atomic_write_text
from zerda_eval.store.run_dir import read_cell_tops

EXPLORER_TOP = 10  # documents shown per system of an opened query
DIGITS = 6  # per-query values as the page holds them
CHUNK_QUERIES = 100  # queries per file of rankings and judgements
PAGE_ROWS = 100  # queries per page of the list
DATA_NAME = "zerdaExplorerData"  # the global EXPLORER_FILE sets
CHUNK_CALL = "zerdaExplorerChunk"  # the function every file of EXPLORER_DIR calls


def values_file(dataset: int, measure: int) -> str:
    """The name (in ``EXPLORER_DIR``, without ``.js``) of a dataset's per-query values of one measure."""
    return f"d{dataset}-values-{measure}"


def queries_file(dataset: int, chunk: int) -> str:
    """The name (in ``EXPLORER_DIR``, without ``.js``) of a dataset's ``chunk``-th file of rankings."""
    return f"d{dataset}-queries-{chunk}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Explorer:
    """A report block: the explorer's index (``payload``) and its paged files (``chunks``: name -> data); html
    renders it, markdown and LaTeX skip it."""

    payload: dict[str, Any]
    chunks: dict[str, Any]
    notes: tuple[str, ...]

    def files(self) -> dict[str, str]:
        """Every file of the explorer, path relative to the report folder -> its text."""
        files = {EXPLORER_FILE: f"window.{DATA_NAME} = {_json(self.payload)};\n"}
        for name, value in self.chunks.items():
            files[f"{EXPLORER_DIR}/{name}.js"] = f"window.{CHUNK_CALL}({_json(name)}, {_json(value)});\n"
        return files


def explorer_files(report_dir: Path) -> list[Path]:
    """The explorer's files in ``report_dir`` now (its index and every paged file)."""
    index = report_dir / EXPLORER_FILE
    return [index] * index.exists() + sorted((report_dir / EXPLORER_DIR).glob("*.js"))


def write_explorer(report_dir: Path, block: Explorer | None) -> None:
    """The explorer's files written into ``report_dir`` (its index last, so a page never loads an index whose
    paged files are not there yet), and those of an earlier report it no longer has removed."""
    files = block.files() if block else {}
    for path in explorer_files(report_dir):
        if path.relative_to(report_dir).as_posix() not in files:
            path.unlink()
    for name, text in sorted(files.items(), key=lambda item: item[0] == EXPLORER_FILE):
        atomic_write_text(report_dir / name, text)


def explorer_block(data: RunData, collections: Mapping[str, Any] | None = None) -> Explorer | None:
    """The explorer of every dataset with at least two systems whose collection loads; None if there is none.

    ``collections``: ``dataset_collections(data)`` when the caller has it already."""
    collections = dataset_collections(data) if collections is None else collections
    datasets: list[dict[str, Any]] = []
    chunks: dict[str, Any] = {}
    notes = []
    for dataset in data.datasets:
        rows = data.results[data.results["dataset"] == dataset]
        if len(rows) < 2:
            continue
        collection = collections[dataset]
        if isinstance(collection, ZerdaEvalError):
            notes.append(f"{dataset}: left out, its collection did not load here ({collection})")
            continue
        datasets.append(_dataset(data, dataset, rows, collection, len(datasets), chunks))
    if not datasets:
        return None
    return Explorer({"datasets": datasets, "top": EXPLORER_TOP, "chunk": CHUNK_QUERIES}, chunks, tuple(notes))


def dataset_collections(data: RunData) -> dict[str, Any]:
    """Each dataset's collection loaded as the run loaded it, or the ``ZerdaEvalError`` that kept it from loading
    here (the explorer and the Judged@k note read them; loaded once per report)."""
    collections: dict[str, Any] = {}
    for dataset in data.datasets:
        try:
            collections[dataset] = _collection(data, dataset)
        except ZerdaEvalError as exc:
            collections[dataset] = exc
    return collections


def _collection(data: RunData, dataset: str) -> Any:
    from zerda_eval.datasets import load_collection

    for entry in data.config.get("datasets", []):
        if isinstance(entry, dict) and entry.get("label", entry.get("id")) == dataset:
            return load_collection(entry.get("id", dataset), **(entry.get("given") or {}))
    return load_collection(dataset)


def _values(per_query: pd.DataFrame, measures: list[str], cells: list[str], qids: list[str]) -> np.ndarray:
    """measures x cells x queries of per-query values (NaN where a cell has none), placed by index, not by loop."""
    grid = np.full((len(measures), len(cells), len(qids)), np.nan)
    at = [
        pd.Index(keys).get_indexer(per_query[column].astype(str))
        for keys, column in ((measures, "measure"), (cells, "cell_id"), (qids, "query_id"))
    ]
    grid[at[0], at[1], at[2]] = per_query["value"].to_numpy(float)
    return grid


def _rounded(row: np.ndarray) -> list[float | None]:
    return [None if value != value else round(value, DIGITS) for value in row.tolist()]


def _dataset(
    data: RunData, dataset: str, rows: Any, collection: Any, number: int, chunks: dict[str, Any]
) -> dict[str, Any]:
    """The index entry of ``dataset``; its values and rankings files added to ``chunks``."""
    measures = [m for m in dataset_measures(data, dataset) if not m.startswith(ANSWERABLE_PREFIX)]
    cells = [str(c) for c in rows["cell_id"]]
    per_query = data.per_query[data.per_query["cell_id"].isin(cells) & data.per_query["measure"].isin(measures)]
    qids = list(dict.fromkeys(per_query["query_id"].astype(str)))
    values = _values(per_query, measures, cells, qids)
    for m in range(len(measures)):
        chunks[values_file(number, m)] = [_rounded(values[m, c]) for c in range(len(cells))]
    tops = [read_cell_tops(data.run_dir, cell, EXPLORER_TOP) for cell in cells]
    for chunk, start in enumerate(range(0, len(qids), CHUNK_QUERIES)):
        part = qids[start : start + CHUNK_QUERIES]
        top = [[cell_tops.get(qid, []) for qid in part] for cell_tops in tops]
        grades = []
        for i, qid in enumerate(part):
            judged = collection.qrels.get(qid, {})
            shown = dict.fromkeys(doc for ranking in top for doc in ranking[i])
            grades.append({doc: judged[doc] for doc in shown if doc in judged})
        chunks[queries_file(number, chunk)] = {"top": top, "grades": grades}
    labels = [str(label) for label in rows["system"]]
    baseline = data.spec.baseline
    return {
        "name": dataset,
        "measures": measures,
        "systems": [data.labels.get(label, label) for label in labels],
        "labels": labels,
        "baseline": next((i for i, label in enumerate(labels) if baseline and label == baseline), 0),
        "queries": qids,
        "texts": [collection.queries.get(qid, "") for qid in qids],
    }


STYLE = """
.explorer .controls { display: flex; flex-wrap: wrap; gap: 0.6em 1.2em; margin: 0.6em 0; }
.explorer label { display: flex; flex-direction: column; font-size: 13px; color: #57606a; }
.explorer select, .explorer input { font-size: 14px; max-width: 22em; padding: 0.15em; }
.explorer .pager { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4em 1em; margin: 0.4em 0; }
.explorer button:disabled { cursor: default; }
.explorer table { width: 100%; table-layout: fixed; }
.explorer col.qid { width: 7em; } .explorer col.num { width: 6.5em; } .explorer col.open { width: 5.5em; }
.explorer td.text { overflow-wrap: anywhere; white-space: normal; }
.explorer td:first-child { white-space: normal; overflow-wrap: anywhere; }
.explorer .win { color: #1a7f37; } .explorer .loss { color: #cf222e; }
.explorer button { font: inherit; font-size: 13px; padding: 0.1em 0.5em; cursor: pointer; }
.explorer button:focus-visible, .explorer select:focus-visible { outline: 3px solid #0969da; outline-offset: 1px; }
.explorer .detail td { background: #f6f8fa; }
.explorer .tops { display: grid; grid-template-columns: 1fr 1fr; gap: 1.2em; }
.explorer ol { margin: 0.3em 0; padding-left: 2em; }
.explorer li { overflow-wrap: anywhere; }
.explorer .grade { display: inline-block; min-width: 6.5em; font-size: 12px; margin-right: 0.5em; }
.explorer .rel { color: #1a7f37; font-weight: 600; } .explorer .nonrel { color: #57606a; }
.explorer .unjudged { color: #9a6700; }
@media print { .explorer { display: none; } }
"""

SCRIPT = """
(() => {
  const $ = (id) => document.getElementById(id);
  const data = window.%(data)s;
  if (!data) {
    $("ex-summary").textContent = "%(index)s was not found beside report.html: keep the report folder together.";
    return;
  }
  const [dsSel, mSel, aSel, bSel, search] = ["ex-dataset", "ex-measure", "ex-a", "ex-b", "ex-search"].map($);
  const [prev, next, pageLine] = ["ex-prev", "ex-next", "ex-page"].map($);
  const body = $("ex-table").tBodies[0];
  const PAGE = %(page)d;
  const fmt = (v) => v === null ? "-" : v.toFixed(4);
  const loaded = {}, waiting = {};  // file name -> the promise of its data; -> the resolve its script calls
  window.%(chunk)s = (name, value) => { if (waiting[name]) { waiting[name](value); delete waiting[name]; } };
  function load(name) {  // a paged file, by a script tag (file:// refuses a fetch); each file once
    if (!loaded[name]) {
      loaded[name] = new Promise((resolve, reject) => {
        waiting[name] = resolve;
        const script = document.createElement("script");
        script.src = "%(folder)s/" + name + ".js";
        script.onerror = () => {
          delete loaded[name];
          reject(new Error(script.getAttribute("src") + " was not found: keep the report folder together."));
        };
        document.head.append(script);
      });
    }
    return loaded[name];
  }
  const option = (sel, items, chosen) => {
    sel.replaceChildren(...items.map((text, i) => new Option(text, i, false, i === chosen)));
  };
  data.datasets.forEach((d, i) => dsSel.add(new Option(d.name, i)));
  const dataset = () => data.datasets[Number(dsSel.value)];
  let page = 0, ticket = 0;
  function pickDataset() {
    const d = dataset();
    option(mSel, d.measures, 0);
    option(aSel, d.systems, d.baseline);
    option(bSel, d.systems, d.baseline === 0 ? 1 : 0);
    restart();
  }
  function restart() { page = 0; render(); }
  function mark(grade) {
    const span = document.createElement("span");
    span.className = "grade " + (grade === undefined ? "unjudged" : grade > 0 ? "rel" : "nonrel");
    span.textContent = grade === undefined ? "unjudged" : (grade > 0 ? "relevant " : "judged ") + grade;
    return span;
  }
  function topList(d, chunk, system, local, title) {
    const box = document.createElement("div");
    const head = document.createElement("strong");
    head.textContent = title + ": " + d.systems[system];
    const list = document.createElement("ol");
    for (const doc of chunk.top[system][local]) {
      const item = document.createElement("li");
      item.append(mark(chunk.grades[local][doc]), " ", doc);
      list.append(item);
    }
    if (!chunk.top[system][local].length) {
      list.append(Object.assign(document.createElement("li"), {textContent: "(nothing returned)"}));
    }
    box.append(head, list);
    return box;
  }
  async function toggle(button, di, q, a, b) {
    const row = button.closest("tr");
    if (button.getAttribute("aria-expanded") === "true") {
      row.nextElementSibling.remove();
      button.setAttribute("aria-expanded", "false");
      button.textContent = "open";
      return;
    }
    let chunk;
    try { chunk = await load(`d${di}-queries-${Math.floor(q / data.chunk)}`); }
    catch (error) { $("ex-summary").textContent = error.message; return; }
    if (!button.isConnected || button.getAttribute("aria-expanded") === "true") return;  // redrawn or opened meanwhile
    const d = data.datasets[di], local = q %% data.chunk;
    const detail = document.createElement("tr");
    detail.className = "detail";
    const cell = detail.insertCell();
    cell.colSpan = 6;
    const text = document.createElement("p");
    text.textContent = d.queries[q] + ": " + d.texts[q];
    const tops = document.createElement("div");
    tops.className = "tops";
    tops.append(topList(d, chunk, a, local, "A"), topList(d, chunk, b, local, "B"));
    cell.append(text, tops);
    row.after(detail);
    button.setAttribute("aria-expanded", "true");
    button.textContent = "close";
    detail.scrollIntoView({block: "nearest"});  // both lists in sight, the focused button above them
  }
  async function render() {
    const mine = ++ticket;
    const di = Number(dsSel.value), d = dataset();
    const mi = Number(mSel.value), a = Number(aSel.value), b = Number(bSel.value), m = d.measures[mi];
    let values;
    try { values = await load(`d${di}-values-${mi}`); }
    catch (error) { $("ex-summary").textContent = error.message; return; }
    if (mine !== ticket) return;  // a later choice is being drawn
    const va = values[a], vb = values[b];
    const all = d.queries.map((_, q) => q).filter((q) => va[q] !== null || vb[q] !== null);
    const delta = (q) => (vb[q] ?? 0) - (va[q] ?? 0);
    all.sort((p, q) => Math.abs(delta(q)) - Math.abs(delta(p)) || (d.queries[p] < d.queries[q] ? -1 : 1));
    const wins = all.filter((q) => delta(q) > 1e-12).length, losses = all.filter((q) => delta(q) < -1e-12).length;
    const needle = search.value.trim().toLowerCase();
    const order = needle ? all.filter((q) => (d.queries[q] + " " + d.texts[q]).toLowerCase().includes(needle)) : all;
    $("ex-summary").textContent = `${m}: B beats A on ${wins} queries, A beats B on ${losses}, ` +
      `${all.length - wins - losses} ties; largest differences first.` +
      (needle ? ` ${order.length} of ${all.length} queries hold "${search.value.trim()}".` : "");
    const pages = Math.max(1, Math.ceil(order.length / PAGE));
    page = Math.min(page, pages - 1);
    const shown = order.slice(page * PAGE, (page + 1) * PAGE);
    pageLine.textContent = order.length ?
      `queries ${page * PAGE + 1}-${page * PAGE + shown.length} of ${order.length} (page ${page + 1} of ${pages})` :
      "no query to show";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
    body.replaceChildren();
    for (const [i, q] of shown.entries()) {
      const row = body.insertRow();
      const cells = [d.queries[q], d.texts[q], fmt(va[q]), fmt(vb[q])];
      cells.forEach((text, i) => {
        Object.assign(row.insertCell(), {textContent: text, className: i > 1 ? "num" : "text"});
      });
      const diff = delta(q);
      Object.assign(row.insertCell(), {
        textContent: (diff > 0 ? "+" : "") + diff.toFixed(4),
        className: "num " + (diff > 1e-12 ? "win" : diff < -1e-12 ? "loss" : ""),
      });
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "open";
      button.setAttribute("aria-expanded", "false");
      button.tabIndex = i === 0 ? 0 : -1;  // one Tab stop for the whole list: the arrow keys move in it
      button.setAttribute("aria-label", "show query " + d.queries[q] + " and both top " + data.top);
      button.addEventListener("click", () => toggle(button, di, q, a, b));
      row.insertCell().append(button);
    }
  }
  body.addEventListener("focusin", (event) => {  // the focused query's button is the list's Tab stop
    if (event.target.tagName !== "BUTTON") return;
    for (const other of body.querySelectorAll("button")) other.tabIndex = other === event.target ? 0 : -1;
  });
  body.addEventListener("keydown", (event) => {
    const buttons = [...body.querySelectorAll("button")], at = buttons.indexOf(document.activeElement);
    const to = {ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: buttons.length - 1}[event.key];
    if (at < 0 || to === undefined || event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    buttons[Math.max(0, Math.min(buttons.length - 1, to))].focus();
  });
  dsSel.addEventListener("change", pickDataset);
  [mSel, aSel, bSel].forEach((sel) => sel.addEventListener("change", restart));
  search.addEventListener("input", restart);
  prev.addEventListener("click", () => { page -= 1; render(); });
  next.addEventListener("click", () => { page += 1; render(); });
  pickDataset();
})();
"""

HEAD_TEXT = (
    "Choose a dataset, a measure and two systems A and B: the queries are listed by how much B differs from "
    f"A on that measure, largest difference first (green: B better, red: A better), {PAGE_ROWS} to a page; the "
    "filter keeps the queries whose id or text holds what you type. Open a query to read it and "
    f"see both systems' top {EXPLORER_TOP} with each document's judgement: Tab into the list, move with the "
    "arrow keys (Home, End), Enter or Space opens and closes."
)


def explorer_html(block: Explorer) -> str:
    """The explorer's controls, an empty table the script fills, its data and its script."""
    notes = "".join(f"<p><em>{_escape(note)}</em></p>" for note in block.notes)
    names = {"data": DATA_NAME, "index": EXPLORER_FILE, "chunk": CHUNK_CALL, "folder": EXPLORER_DIR, "page": PAGE_ROWS}
    return (
        f'<section class="explorer" id="explorer"><p>{_escape(HEAD_TEXT)}</p>{notes}'
        '<div class="controls">'
        '<label for="ex-dataset">dataset<select id="ex-dataset"></select></label>'
        '<label for="ex-measure">measure<select id="ex-measure"></select></label>'
        '<label for="ex-a">system A<select id="ex-a"></select></label>'
        '<label for="ex-b">system B<select id="ex-b"></select></label>'
        '<label for="ex-search">filter: query id or text<input id="ex-search" type="search"></label>'
        '</div><p id="ex-summary" aria-live="polite"></p>'
        '<table id="ex-table"><colgroup><col class="qid"><col><col class="num"><col class="num"><col class="num">'
        '<col class="open"></colgroup><thead><tr><th class="text">query</th><th class="text">text</th>'
        '<th class="num">A</th><th class="num">B</th><th class="num">B - A</th><th class="text"></th></tr></thead>'
        "<tbody></tbody></table>"
        '<div class="pager"><button type="button" id="ex-prev">previous page</button>'
        '<span id="ex-page" aria-live="polite"></span><button type="button" id="ex-next">next page</button></div>'
        f'<script src="{_escape(EXPLORER_FILE)}"></script>'
        f"<script>{SCRIPT % names}</script></section>"
    )


def _escape(text: str) -> str:
    return html.escape(text)
