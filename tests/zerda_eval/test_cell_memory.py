"""A grid cell's memory does not grow as Python objects with queries x depth (issue 46 item 1).

A run held as ``{qid: [(doc_id, score), ...]}`` costs about 90 bytes a row (a tuple, a float, a list slot)
before anything copies it; a 7,000 x 1,000 MS MARCO grid cell is 7M rows. The cell must hold its run as
arrays (12 bytes a row) from search to file. Measured with ``tracemalloc`` (numpy's buffers are traced
too) over system cells, fusion cells and a tuned fusion of 300 queries x 1,000 deep, in a process that ran
the same grid once before (imports and compiled kernels are not a cell's): the largest traced peak of one
cell must stay under ``BYTES_PER_ROW`` a row. The dict path peaked at 253 bytes a row in a system cell and
374 in a fusion cell; arrays peak at 127 and 159 (numpy's transient index arrays while ordering, evaluating
and bounding ties, and reading the inputs' files).
"""

from __future__ import annotations

import tomllib
import tracemalloc

from tests.conftest import experiment_header, write_trec_folder

QUERIES, DEPTH, DOCS = 300, 1000, 3000
BYTES_PER_ROW = 180


class Ranker:
    """Each query's ``k`` docs from one id list (shared strings, as an index holds them), scores falling in
    steps of three (ties); ``shift`` makes two rankers differ."""

    version = "1"

    def __init__(self, doc_ids: list[str], shift: int) -> None:
        self.doc_ids, self.shift = doc_ids, shift

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        start = (int(query_text.split()[-1]) * 7 + self.shift) % len(self.doc_ids)
        return [(self.doc_ids[(start + i) % len(self.doc_ids)], float((k - i) // 3)) for i in range(k)]


def test_a_cell_holds_its_run_as_arrays_not_python_tuples(tmp_path, monkeypatch):
    from zerda_eval import Experiment
    from zerda_eval.execution import runner

    doc_ids = [f"doc{i}" for i in range(DOCS)]
    queries = {f"q{i}": f"query number {i}" for i in range(QUERIES)}
    qrels = [(qid, doc_ids[(i * 11) % DOCS], 1 + i % 2) for i, qid in enumerate(queries)]
    data = write_trec_folder(tmp_path / "data", dict.fromkeys(doc_ids, "text"), queries, qrels)
    mapping = tomllib.loads(experiment_header(tmp_path, "memory", '["ndcg@10", "R@1000", "AP"]'))
    mapping["experiment"]["depth"] = DEPTH
    mapping["datasets"] = [{"name": "toy", "path": str(data), "format": "trec"}]
    mapping["fusions"] = [{"name": "rrf", "inputs": ["one", "two"], "method": "rrf", "grid": {"k": [10, 60]}}]
    mapping["tuning"] = {"measure": "ndcg@10", "folds": 2}
    mapping["fusions"][0]["tune"] = True
    peaks: dict[str, int] = {}
    real = runner.run_cell

    def traced(cell, *args, **kwargs):
        tracemalloc.start()
        try:
            return real(cell, *args, **kwargs)
        finally:
            peaks[cell.label] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()

    rankers = {"one": Ranker(doc_ids, 0), "two": Ranker(doc_ids, 500)}
    warm = {**mapping, "experiment": {**mapping["experiment"], "output_dir": str(tmp_path / "warm")}}
    Experiment.from_dict(warm, systems=rankers).run(progress=False)
    monkeypatch.setattr(runner, "run_cell", traced)
    results = Experiment.from_dict(mapping, systems=rankers).run(progress=False)
    assert len(results.table) == 5 and {"one", "rrf[k=10]", "rrf[tuned]"} <= set(peaks)  # every kind of cell ran
    rows = QUERIES * DEPTH
    assert max(peaks.values()) < BYTES_PER_ROW * rows, {label: round(peak / rows) for label, peak in peaks.items()}
