"""Dataset errors are one line and name the id, file and line; offline ids say where files go."""

from __future__ import annotations

import ir_datasets
import pytest
from ir_datasets.datasets.base import Dataset
from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries

from zerda_eval.datasets import load_collection
from zerda_eval.errors import DatasetError


def test_unknown_id_suggests_the_closest_one():
    with pytest.raises(DatasetError) as error:
        load_collection("beir/scifact/tset")
    message = str(error.value)
    assert "\n" not in message
    assert "unknown dataset id 'beir/scifact/tset' (did you mean 'beir/scifact/test'?)" in message
    assert "quranqa23/taskA/dev" in message  # lists the bundled ids


class _Unreachable(BaseDocs, BaseQueries, BaseQrels):
    """What ir_datasets does without network: the download raises requests' ConnectionError (an OSError)."""

    def docs_iter(self):
        raise OSError("Failed to resolve 'example.org' ([Errno -2] Name or service not known)")

    def queries_iter(self):
        return iter([])

    def qrels_iter(self):
        return iter([])


def test_an_id_whose_data_cannot_be_downloaded_gives_one_line_saying_where_to_put_it():
    if "zerda-test/unreachable" not in set(ir_datasets.registry):
        ir_datasets.registry.register("zerda-test/unreachable", Dataset(_Unreachable()))
    with pytest.raises(DatasetError) as error:
        load_collection("zerda-test/unreachable")
    message = str(error.value)
    assert "\n" not in message and "'zerda-test/unreachable' is not available offline" in message
    assert "zerda-test" in message.split("cache under")[1] and "IR_DATASETS_HOME" in message


def test_missing_bundled_file_names_the_file_and_the_env_var(monkeypatch, tmp_path):
    from zerda_eval.datasets.registry import PARSERS

    monkeypatch.setenv("ZERDA_EVAL_DATA", str(tmp_path))
    with pytest.raises(DatasetError, match=r"QQA23_TaskA_QPC_v1\.1\.tsv is missing.*ZERDA_EVAL_DATA"):
        PARSERS["quranqa23/taskA/dev"]()
