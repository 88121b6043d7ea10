"""The per-query explorer of report.html: two systems of a dataset, their queries sorted by difference.

Where a researcher finds why a system wins: choose a dataset, a measure and two systems; the queries
are listed by how much the second beats the first (largest difference first, either way), and opening
one shows its text and both systems' top ``EXPLORER_TOP`` with each document's judgement (its grade,
0 for judged non-relevant, "unjudged"). The data is a script file beside report.html (``EXPLORER_FILE``,
which sets ``window.zerdaExplorerData``: a ``<script src>`` loads over file://, where a fetch would be
refused), read by a small script in the page; no server, no asset outside the report folder. The values
are the cells' per-query values (``per_query.parquet``), the rankings their ``run.trec`` files; query texts
and judgements come from the collection, loaded as the run loaded it. A dataset whose collection cannot be
loaded here is left out with a note.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zerda_eval.errors import ZerdaEvalError
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX
from zerda_eval.report.formats import EXPLORER_FILE
from zerda_eval.report.tables import RunData, dataset_measures
from zerda_eval.store.run_dir import read_cell_run

EXPLORER_TOP = 10  # documents shown per system of an opened query
DIGITS = 6  # per-query values as the page holds them
DATA_NAME = "zerdaExplorerData"  # the global EXPLORER_FILE sets


@dataclass(frozen=True)
class Explorer:
    """A report block: the explorer's data (``explorer_data``); html renders it, markdown and LaTeX skip it."""

    payload: dict[str, Any]
    notes: tuple[str, ...]

    def script(self) -> str:
        """``EXPLORER_FILE``'s text: the payload as JSON assigned to ``window.zerdaExplorerData``."""
        return f"window.{DATA_NAME} = {json.dumps(self.payload, ensure_ascii=False, separators=(',', ':'))};\n"


def explorer_block(data: RunData, collections: Mapping[str, Any] | None = None) -> Explorer | None:
    """The explorer of every dataset with at least two systems whose collection loads; None if there is none.

    ``collections``: ``dataset_collections(data)`` when the caller has it already."""
    collections = dataset_collections(data) if collections is None else collections
    datasets, notes = [], []
    for dataset in data.datasets:
        rows = data.results[data.results["dataset"] == dataset]
        if len(rows) < 2:
            continue
        collection = collections[dataset]
        if isinstance(collection, ZerdaEvalError):
            notes.append(f"{dataset}: left out, its collection did not load here ({collection})")
            continue
        datasets.append(_dataset(data, dataset, rows, collection))
    return Explorer({"datasets": datasets}, tuple(notes)) if datasets else None


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


def _dataset(data: RunData, dataset: str, rows: Any, collection: Any) -> dict[str, Any]:
    measures = [m for m in dataset_measures(data, dataset) if not m.startswith(ANSWERABLE_PREFIX)]
    cells = [str(c) for c in rows["cell_id"]]
    per_query = data.per_query[data.per_query["cell_id"].isin(cells) & data.per_query["measure"].isin(measures)]
    qids = list(dict.fromkeys(per_query["query_id"].astype(str)))
    where = {qid: i for i, qid in enumerate(qids)}
    values = {m: [[None] * len(qids) for _ in cells] for m in measures}
    column = {cell: i for i, cell in enumerate(cells)}
    for cell, measure, qid, value in per_query[["cell_id", "measure", "query_id", "value"]].itertuples(index=False):
        values[measure][column[str(cell)]][where[str(qid)]] = round(float(value), DIGITS)
    docs: dict[str, int] = {}
    top = []
    for cell in cells:
        run = read_cell_run(data.run_dir, cell)
        top.append([[docs.setdefault(d, len(docs)) for d, _ in run.get(qid, [])[:EXPLORER_TOP]] for qid in qids])
    doc_ids = list(docs)
    grades = []
    for i, qid in enumerate(qids):
        judged = collection.qrels.get(qid, {})
        shown = {doc for ranking in top for doc in ranking[i]}
        grades.append({str(doc): judged[doc_ids[doc]] for doc in sorted(shown) if doc_ids[doc] in judged})
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
        "values": values,
        "docs": doc_ids,
        "top": top,
        "grades": grades,
    }


STYLE = """
.explorer .controls { display: flex; flex-wrap: wrap; gap: 0.6em 1.2em; margin: 0.6em 0; }
.explorer label { display: flex; flex-direction: column; font-size: 13px; color: #57606a; }
.explorer select { font-size: 14px; max-width: 22em; padding: 0.15em; }
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
  const data = window.%s;
  if (!data) {
    $("ex-summary").textContent = "%s was not found beside report.html: keep the report folder together.";
    return;
  }
  const [dsSel, mSel, aSel, bSel] = ["ex-dataset", "ex-measure", "ex-a", "ex-b"].map($);
  const body = $("ex-table").tBodies[0];
  const fmt = (v) => v === null ? "-" : v.toFixed(4);
  const option = (sel, items, chosen) => {
    sel.replaceChildren(...items.map((text, i) => new Option(text, i, false, i === chosen)));
  };
  data.datasets.forEach((d, i) => dsSel.add(new Option(d.name, i)));
  const dataset = () => data.datasets[Number(dsSel.value)];
  function pickDataset() {
    const d = dataset();
    option(mSel, d.measures, 0);
    option(aSel, d.systems, d.baseline);
    option(bSel, d.systems, d.baseline === 0 ? 1 : 0);
    render();
  }
  function mark(grade) {
    const span = document.createElement("span");
    span.className = "grade " + (grade === undefined ? "unjudged" : grade > 0 ? "rel" : "nonrel");
    span.textContent = grade === undefined ? "unjudged" : (grade > 0 ? "relevant " : "judged ") + grade;
    return span;
  }
  function topList(d, system, q, title) {
    const box = document.createElement("div");
    const head = document.createElement("strong");
    head.textContent = title + ": " + d.systems[system];
    const list = document.createElement("ol");
    for (const doc of d.top[system][q]) {
      const item = document.createElement("li");
      item.append(mark(d.grades[q][String(doc)]), " ", d.docs[doc]);
      list.append(item);
    }
    if (!d.top[system][q].length) {
      list.append(Object.assign(document.createElement("li"), {textContent: "(nothing returned)"}));
    }
    box.append(head, list);
    return box;
  }
  function toggle(button, d, q, a, b) {
    const open = button.getAttribute("aria-expanded") === "true";
    const row = button.closest("tr");
    if (open) { row.nextElementSibling.remove(); }
    else {
      const detail = document.createElement("tr");
      detail.className = "detail";
      const cell = detail.insertCell();
      cell.colSpan = 6;
      const text = document.createElement("p");
      text.textContent = d.queries[q] + ": " + d.texts[q];
      const tops = document.createElement("div");
      tops.className = "tops";
      tops.append(topList(d, a, q, "A"), topList(d, b, q, "B"));
      cell.append(text, tops);
      row.after(detail);
      detail.scrollIntoView({block: "nearest"});  // both lists in sight, the focused button above them
    }
    button.setAttribute("aria-expanded", String(!open));
    button.textContent = open ? "open" : "close";
  }
  function render() {
    const d = dataset();
    const m = d.measures[Number(mSel.value)], a = Number(aSel.value), b = Number(bSel.value);
    const va = d.values[m][a], vb = d.values[m][b];
    const order = d.queries.map((_, q) => q).filter((q) => va[q] !== null || vb[q] !== null);
    const delta = (q) => (vb[q] ?? 0) - (va[q] ?? 0);
    order.sort((p, q) => Math.abs(delta(q)) - Math.abs(delta(p)) || (d.queries[p] < d.queries[q] ? -1 : 1));
    const wins = order.filter((q) => delta(q) > 1e-12).length, losses = order.filter((q) => delta(q) < -1e-12).length;
    $("ex-summary").textContent = `${m}: B beats A on ${wins} queries, A beats B on ${losses}, ` +
      `${order.length - wins - losses} ties; largest differences first.`;
    body.replaceChildren();
    for (const [i, q] of order.entries()) {
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
      button.setAttribute("aria-label", "show query " + d.queries[q] + " and both top " + d.top[a][q].length);
      button.addEventListener("click", () => toggle(button, d, q, Number(aSel.value), Number(bSel.value)));
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
  [mSel, aSel, bSel].forEach((sel) => sel.addEventListener("change", render));
  pickDataset();
})();
"""

HEAD_TEXT = (
    "Choose a dataset, a measure and two systems A and B: the queries are listed by how much B differs from "
    "A on that measure, largest difference first (green: B better, red: A better). Open a query to read it and "
    f"see both systems' top {EXPLORER_TOP} with each document's judgement: Tab into the list, move with the "
    "arrow keys (Home, End), Enter or Space opens and closes."
)


def explorer_html(block: Explorer) -> str:
    """The explorer's controls, an empty table the script fills, its data and its script."""
    notes = "".join(f"<p><em>{_escape(note)}</em></p>" for note in block.notes)
    return (
        f'<section class="explorer" id="explorer"><p>{_escape(HEAD_TEXT)}</p>{notes}'
        '<div class="controls">'
        '<label for="ex-dataset">dataset<select id="ex-dataset"></select></label>'
        '<label for="ex-measure">measure<select id="ex-measure"></select></label>'
        '<label for="ex-a">system A<select id="ex-a"></select></label>'
        '<label for="ex-b">system B<select id="ex-b"></select></label>'
        '</div><p id="ex-summary" aria-live="polite"></p>'
        '<table id="ex-table"><colgroup><col class="qid"><col><col class="num"><col class="num"><col class="num">'
        '<col class="open"></colgroup><thead><tr><th class="text">query</th><th class="text">text</th>'
        '<th class="num">A</th><th class="num">B</th><th class="num">B - A</th><th class="text"></th></tr></thead>'
        "<tbody></tbody></table>"
        f'<script src="{_escape(EXPLORER_FILE)}"></script>'
        f"<script>{SCRIPT % (DATA_NAME, EXPLORER_FILE)}</script></section>"
    )


def _escape(text: str) -> str:
    return html.escape(text)
