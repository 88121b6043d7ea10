"""Helpers of the reliability suite: tiny collections in tmp_path, experiment files, CLI results.

Every bad-input case runs the real CLI (``zerda_eval.cli.main``) and checks what a user sees: a
non-zero exit code, exactly one line on stderr naming the culprit, no traceback, and no partial
output left behind.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

from zerda_eval.store.run_dir import PER_QUERY_FILE, RUN_FILE

DOCS = {
    "d1": "The fennec fox lives in the Sahara desert and sleeps in sand dunes by day.",
    "d2": "Camels store fat in their humps and cross the desert without water for days.",
    "d3": "An oasis is a fertile spot in a desert where underground water reaches the surface.",
    "d4": "Sand dunes move with the wind; the largest dunes of the Sahara exceed 180 metres.",
    "d5": "Desert nights are cold because dry air and clear skies let the heat escape.",
    "d6": "The fennec fox has large ears that shed heat and hear prey under the sand.",
    "d7": "Date palms grow around an oasis and give shade, fruit and wood.",
    "d8": "Scorpions hide under rocks during the day and hunt insects at night.",
}
QUERIES = {"q1": "fennec fox ears", "q2": "water in the desert oasis", "q3": "why are desert nights cold"}
QRELS = {"q1": {"d6": 2, "d1": 1}, "q2": {"d3": 2, "d7": 1, "d2": 1}, "q3": {"d5": 2}}
RUN_AND_PER_QUERY = (RUN_FILE, PER_QUERY_FILE)  # a cell's files result.json seals
TIMING_COLUMNS = {
    "index_time_s",
    "index_build_s",
    "index_time_parallel_s",
    "latency_mean_ms",
    "latency_parallel_mean_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "qps",
    "peak_rss_increment_mb",
}
# Lines a progress bar (tqdm / rich) may leave on stderr; they are not messages.
PROGRESS = re.compile(r"\d+%\||\|\s*\d+/\d+|\d+/\d+ \[")


def write_beir(
    folder: Path,
    docs: dict[str, str] | None = None,
    queries: dict[str, str] | None = None,
    qrels: dict[str, dict[str, int]] | None = None,
) -> Path:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) with the given or the default data."""
    docs = DOCS if docs is None else docs
    queries = QUERIES if queries is None else queries
    qrels = QRELS if qrels is None else qrels
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"_id": d, "title": "", "text": t}) for d, t in docs.items()]
    (folder / "corpus.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    lines = [json.dumps({"_id": q, "text": t}) for q, t in queries.items()]
    (folder / "queries.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, j in qrels.items() for d, g in j.items()]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def toml_value(value: object) -> str:
    """A Python value as TOML (json's strings, numbers, lists and booleans are TOML too)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def experiment_toml(
    tmp: Path,
    datasets: list[dict] | None = None,
    systems: list[dict] | None = None,
    experiment: dict | None = None,
    name: str = "reliability",
    fusions: list[dict] | None = None,
) -> Path:
    """Write ``<tmp>/experiment.toml``: one user BEIR collection and one BM25 system unless given."""
    if datasets is None:
        datasets = [{"path": str(write_beir(tmp / "collection")), "format": "beir", "name": "tiny"}]
    if systems is None:
        systems = [{"name": "bm25", "family": "zerda.keyword"}]
    head = {
        "name": name,
        "output_dir": str(tmp / "out"),
        "cache_dir": str(tmp / "cache"),
        "depth": 10,
        "measures": ["ndcg@10", "mrr@10", "recall@10"],
        **(experiment or {}),
    }
    parts = ["[experiment]", *(f"{k} = {toml_value(v)}" for k, v in head.items())]
    for section, entries in (("datasets", datasets), ("systems", systems), ("fusions", fusions or [])):
        for entry in entries:
            parts += ["", f"[[{section}]]", *(f"{k} = {toml_value(v)}" for k, v in entry.items())]
    path = tmp / "experiment.toml"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def messages(self) -> list[str]:
        """The non-empty stderr lines as a terminal shows them, progress bars left out."""
        shown = (line.split("\r")[-1].strip() for line in self.err.split("\n"))
        return [line for line in shown if line and not PROGRESS.search(line)]


def assert_one_line_error(result: CliResult, *fragments: str) -> str:
    """Non-zero exit, no traceback, exactly one stderr message, containing every fragment (any case)."""
    assert "Traceback" not in result.out + result.err, result.err
    assert result.code not in (0, None), (result.code, result.err)
    assert len(result.messages) == 1, result.err
    line = result.messages[0]
    for fragment in fragments:
        assert fragment.lower() in line.lower(), (fragment, line)
    return line


def unfinished_cells(output_dir: Path) -> list[str]:
    """Temporary files, and cell directories without a valid ``result.json`` (relative paths)."""
    if not output_dir.exists():
        return []
    leftovers = [p for p in output_dir.rglob("*") if p.name.startswith(".") or ".tmp" in p.name]
    cells = output_dir / "cells"
    for cell in cells.iterdir() if cells.is_dir() else []:
        try:
            json.loads((cell / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            leftovers.append(cell)
        else:
            assert all((cell / name).is_file() for name in RUN_AND_PER_QUERY), cell
    return sorted(str(p.relative_to(output_dir)) for p in leftovers)


def assert_no_partial_output(output_dir: Path) -> None:
    """No temporary files, and every cell directory present is a finished cell (valid result.json)."""
    leftovers = unfinished_cells(output_dir)
    assert not leftovers, f"partial output left behind: {leftovers}"


def read_per_query(cell: Path) -> dict[tuple[str, str], float]:
    with (cell / "per_query.csv").open(encoding="utf-8") as handle:
        return {(row["query_id"], row["measure"]): float(row["value"]) for row in csv.DictReader(handle)}


def read_run(cell: Path, use_scores: bool = False) -> dict[str, dict[str, float]]:
    """A cell's run file (gzip, read by Python's ``gzip``) for pytrec_eval: the file's order (its rank column)
    unless ``use_scores``."""
    run: dict[str, dict[str, float]] = {}
    with gzip.open(cell / RUN_FILE, "rt", encoding="utf-8") as handle:
        text = handle.read()
    for line in text.splitlines():
        qid, _, doc, rank, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score) if use_scores else 1.0 / int(rank)
    return run


def only_cell(output_dir: Path) -> Path:
    cells = [p for p in (output_dir / "cells").iterdir() if p.is_dir()]
    assert len(cells) == 1, cells
    return cells[0]


def cell_files(output_dir: Path) -> dict[str, bytes]:
    """``{"<cell_id>/<file>": bytes}`` of the run and per-query files of every cell."""
    return {
        f"{cell.name}/{name}": (cell / name).read_bytes()
        for cell in sorted((output_dir / "cells").iterdir())
        for name in RUN_AND_PER_QUERY
    }


def results_without_timing(output_dir: Path) -> list[dict[str, str]]:
    with (output_dir / "results.csv").open(encoding="utf-8") as handle:
        rows = [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(handle)]
    return sorted(rows, key=lambda row: row["cell_id"])
