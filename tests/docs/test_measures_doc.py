"""docs/MEASURES.md lists every name of the name table, with the trec_eval measure the table records."""

from __future__ import annotations

import re
from pathlib import Path

from zerda_eval.evaluation.measures import MEASURE_NAMES, REQUIRED

DOC = Path(__file__).resolve().parents[2] / "docs" / "MEASURES.md"


def test_every_name_has_a_row_naming_its_trec_eval_measure():
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`"):
            for name in re.findall(r"`([A-Za-z]+)", cells[0]):
                rows[name] = cells
    assert set(rows) == set(MEASURE_NAMES)
    for name, row in MEASURE_NAMES.items():
        cutoff, rel, trec_eval = rows[name][2], rows[name][3], rows[name][4]
        assert cutoff == row.cutoff, name
        assert (rel == "yes") == row.takes_rel, name
        first_trec_measure = row.trec_eval.split(" ")[0].split(";")[0].replace(".k", "")
        assert first_trec_measure in trec_eval, (name, trec_eval)
        assert (cutoff == REQUIRED) == (f"`{name}@k`" in rows[name][0] and f"`{name}`" not in rows[name][0]), name
