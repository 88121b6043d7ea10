"""User systems (``family = "python"``) cannot read the judgements nor change what other systems see.

A user's ``index(collection)`` receives the documents (ids, texts, language, protocol options) and its
``search(query_text, k)`` the query text: nothing reachable from either holds the qrels or the queries,
and what it is handed is private or read-only, so a system that writes into it changes no other
system's numbers. A user system that fails (raises, returns None or a wrong shape) is one line naming
the system and the query, with the user's own traceback above it, never "internal error".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    DOCS,
    QRELS,
    QUERIES,
    assert_no_partial_output,
    read_per_query,
    write_beir,
)
from zerda_eval import Experiment
from zerda_eval.store.run_dir import cell_dir


def _experiment(tmp: Path, output: str, systems: list[dict] | None = None) -> dict[str, Any]:
    return {
        "experiment": {
            "name": "users",
            "output_dir": str(tmp / output),
            "cache_dir": str(tmp / "cache"),
            "depth": 10,
            "measures": ["ndcg@10", "recall@10"],
        },
        "datasets": [{"path": str(write_beir(tmp / "collection")), "name": "tiny"}],
        "systems": systems or [],
    }


def _judgement_like(value: Any) -> bool:
    """A mapping of judged query ids to mappings of doc ids (the qrels), or of query ids to their texts."""
    if not isinstance(value, Mapping) or not value:
        return False
    keys = {str(k) for k in value}
    return bool(keys & set(QRELS)) or bool(
        {str(v) for v in value.values() if isinstance(v, str)} & set(QUERIES.values())
    )


def _reachable(root: Any, depth: int = 4) -> list[tuple[str, Any]]:
    """Every (path, value) reachable from ``root`` through attributes, mapping values and items."""
    found, stack, seen = [], [("collection", root, 0)], set()
    while stack:
        path, value, level = stack.pop()
        if id(value) in seen or level > depth or isinstance(value, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(value))
        found.append((path, value))
        names = set(getattr(value, "__dict__", {})) | set(getattr(value, "__slots__", ()))
        names |= {n for n in dir(value) if not n.startswith("__") and n in ("qrels", "queries", "collection")}
        for name in names:
            try:
                child = getattr(value, name)
            except Exception:
                continue
            if not callable(child) or isinstance(child, Mapping):
                stack.append((f"{path}.{name}", child, level + 1))
        if isinstance(value, Mapping):
            stack += [(f"{path}[{k!r}]", v, level + 1) for k, v in list(value.items())[:50]]
    return found


class Cheater:
    """Returns the judged documents when it can find the judgements anywhere; nothing otherwise."""

    version = "1"

    def index(self, collection: Any) -> None:
        self.found = [path for path, value in _reachable(collection) if _judgement_like(value)]
        self.attributes = {name for name in dir(collection) if not name.startswith("_")}
        qrels = getattr(collection, "qrels", None) or getattr(getattr(collection, "collection", None), "qrels", None)
        self.qrels = qrels or {}

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        for qid, text in QUERIES.items():
            if text == query_text and qid in self.qrels:
                return sorted(((d, float(g)) for d, g in self.qrels[qid].items()), key=lambda hit: -hit[1])[:k]
        return []


def test_a_user_system_never_sees_judgements_nor_queries(tmp_path):
    cheater = Cheater()
    results = Experiment.from_dict(_experiment(tmp_path, "out"), systems={"cheater": cheater}).run(progress=False)
    assert cheater.found == []  # nothing reachable from what index() got holds the qrels or the queries
    assert not {"qrels", "queries", "collection", "no_answer_qids"} & cheater.attributes
    assert {"doc_ids", "texts", "language"} <= cheater.attributes  # the documents it indexes are there
    assert results.table.set_index("system").loc["cheater", "ndcg@10"] == 0.0


class Vandal:
    """Writes into everything it is handed: ids, texts, options, and any judgements it finds."""

    version = "1"

    def index(self, collection: Any) -> None:
        self.attempts = {}
        for name, act in {
            "reverse doc ids": lambda: collection.doc_ids.reverse(),
            "blank texts": lambda: collection.texts.__setitem__(slice(None), [""] * len(collection.texts)),
            "replace texts": lambda: setattr(collection, "texts", ["sand"] * len(collection.doc_ids)),
            "edit options": lambda: collection.options.__setitem__("ignore_identical_ids", False),
            "clear qrels": lambda: collection.qrels.clear(),
        }.items():
            try:
                act()
                self.attempts[name] = "done"
            except Exception as exc:  # read-only: refused, which is fine
                self.attempts[name] = type(exc).__name__

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return [("d1", 1.0)]


class Reader:
    """Records the documents it is handed (after a vandal ran in the same grid)."""

    version = "1"

    def index(self, collection: Any) -> None:
        self.docs = dict(zip(collection.doc_ids, collection.texts, strict=True))

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return [("d1", 1.0)]


def test_a_system_that_writes_into_what_it_is_given_changes_no_other_number(tmp_path):
    bm25 = {"name": "bm25", "family": "zerda.keyword"}
    alone = Experiment.from_dict(_experiment(tmp_path, "alone", [bm25])).run(progress=False)
    reference = read_per_query(cell_dir(alone.run_dir, alone.cell_id("bm25")))
    vandal, reader = Vandal(), Reader()
    mixed = Experiment.from_dict(_experiment(tmp_path, "mixed", [bm25]), systems={"vandal": vandal, "reader": reader})
    # the vandal's cell runs before bm25's and the reader's: put it first in the grid
    mixed.spec.cells.sort(key=lambda cell: cell.name != "vandal")
    results = mixed.run(progress=False)
    assert set(vandal.attempts) == {"reverse doc ids", "blank texts", "replace texts", "edit options", "clear qrels"}
    assert reader.docs == DOCS  # the next system sees the documents as they are on disk
    assert read_per_query(cell_dir(results.run_dir, results.cell_id("bm25"))) == reference
    # and a fresh run of bm25 in this process (the collection is cached per process) still agrees
    again = Experiment.from_dict(_experiment(tmp_path, "again", [bm25])).run(progress=False)
    assert read_per_query(cell_dir(again.run_dir, again.cell_id("bm25"))) == reference
    assert_no_partial_output(tmp_path / "mixed")


USER_MODULE = """
class Broken:
    version = "1"

    def __init__(self, mode):
        self.mode = mode

    def index(self, collection):
        if self.mode == "index raises":
            build_vocabulary(collection)

    def search(self, query_text, k):
        if self.mode == "search raises" and "desert" in query_text:
            return lookup_in_my_index(query_text)
        if self.mode == "returns None":
            return None
        if self.mode == "wrong shape":
            return [("d1", 1.0, "extra")]
        if self.mode == "returns a number":
            return 3.5
        if self.mode == "nan score":
            return [("d1", float("nan"))]
        if self.mode == "generator raises":
            return hits_of(query_text)
        return [("d1", 1.0)]


def build_vocabulary(collection):
    raise ValueError("vocabulary is empty")


def lookup_in_my_index(text):
    raise KeyError(text)


def hits_of(text):
    yield ("d1", 1.0)
    raise RuntimeError("index closed")
"""

BROKEN_CASES = {
    # mode: (fragments of the last line, a name the user's traceback shows or None)
    "index raises": (["'mine'", "index", "ValueError", "vocabulary is empty"], "build_vocabulary"),
    "search raises": (["'mine'", "query 'q2'", "KeyError"], "lookup_in_my_index"),
    "returns None": (["'mine'", "query 'q1'", "None", "(doc_id, score)"], None),
    "wrong shape": (["'mine'", "query 'q1'", "('d1', 1.0, 'extra')", "(doc_id, score)"], None),
    "returns a number": (["'mine'", "query 'q1'", "3.5", "(doc_id, score)"], None),
    "nan score": (["'mine'", "query 'q1'", "nan", "'d1'"], None),
    "generator raises": (["'mine'", "query 'q1'", "RuntimeError", "index closed"], "hits_of"),
}


@pytest.mark.parametrize("mode", list(BROKEN_CASES))
def test_a_failing_user_system_is_named_with_its_query_and_its_own_traceback(mode, cli, tmp_path, monkeypatch):
    from tests.reliability.harness import experiment_toml

    (tmp_path / "user_code").mkdir()
    (tmp_path / "user_code" / "broken_systems.py").write_text(USER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "user_code"))
    params = {"object": "broken_systems:Broken", "version": "1", "options": {"mode": mode}}
    config = experiment_toml(tmp_path, systems=[{"name": "mine", "family": "python", "params": params}])
    result = cli("run", config, "--no-report")
    fragments, user_frame = BROKEN_CASES[mode]
    assert result.code == 1, result.err
    assert "internal error" not in result.err
    last = result.messages[-1]
    assert last.startswith("zerda-eval: error:"), result.err
    for fragment in fragments:
        assert fragment in last, (fragment, last)
    if user_frame is None:
        assert "Traceback" not in result.err and len(result.messages) == 1, result.err
    else:  # the user's own code failed: its traceback is shown, ending in the user's frame, none of ours
        assert "Traceback" in result.err and user_frame in result.err, result.err
        assert "zerda_eval/" not in result.err.split("Traceback", 1)[1], result.err
    assert_no_partial_output(tmp_path / "out")


def test_a_streamed_corpus_view_is_private_too(monkeypatch):
    """A corpus too large to hold (texts read on demand) is handed over with the view's own id tuple."""
    from zerda_eval.datasets import load_collection, loader, streamed
    from zerda_eval.systems.user import documents_of

    monkeypatch.setattr(streamed, "STREAM_ABOVE_DOCS", 1_000)
    loader._cached.cache_clear()
    try:
        collection = load_collection("vaswani")
        assert isinstance(collection.texts, streamed.StreamedTexts)
        view = documents_of(collection)
        before = list(collection.doc_ids)
        with pytest.raises(AttributeError):
            view.texts._doc_ids.reverse()  # a tuple: nothing to write into
        view.texts._doc_ids = ("x",) * len(before)  # replacing it changes the view's object only
        assert collection.texts._doc_ids is collection.doc_ids and list(collection.doc_ids) == before
        assert not hasattr(view, "qrels") and not hasattr(view, "queries")
    finally:
        loader._cached.cache_clear()
