"""The README's best-configuration table is the committed ``reports/best`` study's: every figure in it equals the
study's ``results.csv`` (BM25, BM25 tuned, the best tuned row picked on test) or its ``report.md``'s
"Best configuration per dataset" table (``best[nested]``), rounded to three places."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## The best configuration per dataset, chosen without a test query"


def readme_rows() -> dict[str, list[str]]:
    """``{dataset: [cells...]}`` of the README's table under ``HEADING``."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): [c.strip().strip("*") for c in cells[1:]] for cells in rows[1:]}


def nested_values() -> dict[str, float]:
    """``best[nested]`` per dataset from report.md's "Best configuration per dataset" table."""
    report = (ROOT / "reports" / "best" / "report.md").read_text(encoding="utf-8")
    table = report.split("## Best configuration per dataset", 1)[1].split("\n### ", 1)[0]
    rows = [line.strip("|").split("|") for line in table.splitlines() if re.match(r"\| [a-z]", line)]
    return {cells[0].strip(): float(cells[1]) for cells in rows[1:]}


def test_readme_best_table_is_the_committed_study():
    results = pd.read_csv(ROOT / "reports" / "best" / "results.csv")
    nested = nested_values()
    rows = readme_rows()
    assert set(rows) == set(nested) and len(rows) == 6
    for dataset, (bm25, tuned_bm25, best_nested, picked) in rows.items():
        cells = results[results["dataset"] == dataset].set_index("system")["ndcg@10"]
        tuned = cells[cells.index.str.endswith("[tuned]")]
        name, value = picked.rsplit(" ", 1)
        assert bm25 == f"{cells['bm25']:.3f}", dataset
        assert tuned_bm25 == f"{cells['bm25_grid[tuned]']:.3f}", dataset
        assert best_nested == f"{nested[dataset]:.3f}", dataset
        assert f"{name}[tuned]" == tuned.idxmax() and value == f"{tuned.max():.3f}", dataset
