"""Protocol options: what the config records is what the loader applies; title, self-judged pairs, no_answer."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tests.conftest import experiment_header
from zerda_eval.config.experiment import resolve_experiment
from zerda_eval.datasets import load_collection
from zerda_eval.datasets.collection import NO_ANSWER_ID
from zerda_eval.errors import ZerdaEvalWarning


def _folder(root: Path, qrels: str) -> Path:
    """A BEIR folder whose query and doc ids both count from 1 (as library collections such as CISI do)."""
    root.mkdir(parents=True, exist_ok=True)
    docs = [{"_id": "1", "title": "Heat", "text": "heat transfer in slabs"}, {"_id": "2", "text": "wing flutter"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    queries = [{"_id": "1", "text": "heat slabs"}, {"_id": "2", "text": "flutter"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


def _experiment(dataset: dict) -> dict:
    raw = {
        "experiment": {"name": "opts", "measures": ["ndcg@10"], "depth": 10},
        "datasets": [dataset],
        "systems": [{"name": "bm25", "family": "zerda.keyword"}],
    }
    return resolve_experiment(raw, "opts.toml").resolved["datasets"][0]["options"]


@pytest.mark.parametrize(
    "given",
    [
        {"format": "beir"},
        {},
        {"format": "trec", "corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels/test.tsv"},
        {"format": "beir", "ignore_identical_ids": False, "title": False},
    ],
)
def test_the_config_records_the_options_the_loader_applies(tmp_path: Path, given: dict) -> None:
    """BEIR folders used to be recorded with ignore_identical_ids = false while the loader turned it on."""
    folder = _folder(tmp_path / "lib", "query-id\tcorpus-id\tscore\n1\t2\t1\n2\t2\t1\n")
    if given.get("format") == "trec":
        (folder / "qrels" / "test.tsv").write_text("1 0 2 1\n2 0 2 1\n", encoding="utf-8")
    recorded = _experiment({"path": str(folder), "name": "lib", **given})
    assert recorded == load_collection("lib", path=folder, **given).options


@pytest.mark.parametrize("dataset_id", ["beir/scifact/test", "cranfield", "quranqa23/taskA/dev"])
def test_the_config_records_the_options_the_loader_applies_for_ids(dataset_id: str) -> None:
    assert _experiment({"id": dataset_id}) == load_collection(dataset_id).options


def test_self_judged_pairs_warn_once_with_the_count_and_the_option(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "cisi", "query-id\tcorpus-id\tscore\n1\t1\t1\n2\t2\t1\n2\t1\t1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on = load_collection("cisi", path=folder)
    messages = [str(w.message) for w in caught if issubclass(w.category, ZerdaEvalWarning)]
    assert len(messages) == 1 and "\n" not in messages[0]
    assert "2 judged pair(s)" in messages[0] and "ignore_identical_ids" in messages[0]
    assert on.self_judged_pairs == 2 and on.options["ignore_identical_ids"] is True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off = load_collection("cisi", path=folder, ignore_identical_ids=False)
    assert not [w for w in caught if issubclass(w.category, ZerdaEvalWarning)]
    assert off.self_judged_pairs == 2  # counted either way, warned only when the filter drops them


def test_title_option_for_beir_folders(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "titled", "query-id\tcorpus-id\tscore\n1\t1\t1\n")
    assert load_collection("titled", path=folder).texts == ["Heat heat transfer in slabs", "wing flutter"]
    untitled = load_collection("titled", path=folder, title=False)
    assert untitled.texts == ["heat transfer in slabs", "wing flutter"] and untitled.options["title"] is False


def test_title_option_for_beir_ids() -> None:
    titled = load_collection("beir/scifact/test")
    plain = load_collection("beir/scifact/test", title=False)
    assert titled.options["title"] is True and plain.options["title"] is False
    assert all(t.endswith(p) and len(t) > len(p) for t, p in zip(titled.texts[:50], plain.texts[:50], strict=True))


def test_no_answer_drop_is_applied_by_the_loader() -> None:
    rule = load_collection("quranqa23/taskA/dev")
    dropped = load_collection("quranqa23/taskA/dev", no_answer="drop")
    assert rule.no_answer_qids and not dropped.no_answer_qids
    assert set(dropped.queries) == set(rule.queries) - rule.no_answer_qids
    assert all(NO_ANSWER_ID not in docs for docs in dropped.qrels.values())
    assert dropped.options["no_answer"] == "drop"


def test_the_cli_prints_the_warning_on_one_line_and_the_result_records_the_count(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = _folder(tmp_path / "cli-lib", "query-id\tcorpus-id\tscore\n1\t1\t1\n2\t2\t1\n")
    config = tmp_path / "lib.toml"
    config.write_text(
        experiment_header(tmp_path, "lib")
        + f"""
[[datasets]]
name = "cli-lib"
path = "{folder}"

[[systems]]
name = "bm25"
family = "zerda.keyword"
""",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", str(config), "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert len(lines) == 1 and lines[0].startswith("zerda-eval: warning: cli-lib: 2 judged pair(s)")
    (result,) = (tmp_path / "runs" / "cells").glob("*/result.json")
    recorded = json.loads(result.read_text(encoding="utf-8"))
    assert recorded["stats"]["self_judged_pairs_filtered"] == 2
    assert recorded["config"]["dataset"]["options"]["ignore_identical_ids"] is True
