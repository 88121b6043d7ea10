"""Protocol options: cranfield grades and ids on real rows, self-hit filtering, option validation."""

from __future__ import annotations

import re

import pytest

from zerda_eval.columnar import from_run
from zerda_eval.datasets import load_collection
from zerda_eval.datasets.protocols import drop_self_hits
from zerda_eval.errors import ConfigError


@pytest.fixture(scope="module")
def cranqrel(shared):
    return [line.split() for line in (shared / "cranfield" / "cranqrel").read_text().splitlines() if line.strip()]


def test_cranfield_grades_are_five_minus_code_and_source_documents_dropped(cranqrel):
    collection = load_collection("cranfield")
    kept = [(q, d, int(code)) for q, d, code in cranqrel if code != "-1"]
    assert len(kept) == len(cranqrel) - 225
    assert all(collection.qrels[q][d] == 5 - code for q, d, code in kept)
    assert all(d not in collection.qrels[q] for q, d, code in cranqrel if code == "-1")
    assert ["1", "184", "2"] in cranqrel and collection.qrels["1"]["184"] == 3  # code 2: high relevance
    assert ["1", "486", "-1"] in cranqrel and "486" not in collection.qrels["1"]
    assert set(collection.qrels["1"].values()) <= {1, 2, 3, 4}
    assert collection.options["relevance"] == "5-code"


def test_cranfield_raw_option_keeps_ir_datasets_codes(cranqrel):
    raw = load_collection("cranfield", relevance="raw")
    assert raw.qrels["1"]["184"] == 2 and raw.qrels["1"]["486"] == -1
    assert sum(map(len, raw.qrels.values())) == len(cranqrel)
    assert raw.options["relevance"] == "raw"


def test_cranfield_query_ids_are_ordinals_not_dot_i_numbers(shared):
    text = (shared / "cranfield" / "cran.qry").read_text()
    blocks = re.split(r"^\.I (\d+)\s*$", text, flags=re.MULTILINE)[1:]
    dot_i = blocks[0::2]
    bodies = [" ".join(body.split(".W", 1)[1].split()) for body in blocks[1::2]]
    collection = load_collection("cranfield")
    assert list(collection.queries) == [str(n) for n in range(1, 226)]
    assert dot_i[:3] == ["001", "002", "004"] and dot_i[-1] == "365"
    assert [" ".join(t.split()) for t in collection.queries.values()] == bodies
    # ordinal 3 is the query numbered .I 004 in cran.qry, and cranqrel's query 3 is judged against it
    assert collection.queries["3"].startswith("what problems of heat conduction in composite slabs")


def test_self_hits_dropped_only_when_the_option_is_on():
    scifact = load_collection("beir/scifact/test")
    vaswani = load_collection("vaswani")
    run = from_run({"1": [("1", 9.0), ("31715818", 8.0)], "3": [("7", 1.0)], "7": [("3", 2.0), ("7", 2.0)]})
    assert drop_self_hits(run, scifact).to_dict() == {"1": [("31715818", 8.0)], "3": [("7", 1.0)], "7": [("3", 2.0)]}
    assert drop_self_hits(run, vaswani) == run
    off = load_collection("beir/scifact/test", ignore_identical_ids=False)
    assert drop_self_hits(run, off) == run and off.options["ignore_identical_ids"] is False


def test_no_bundled_beir_doc_id_equals_a_query_id():
    scifact = load_collection("beir/scifact/train")
    assert not set(scifact.doc_ids) & (set(scifact.queries) | set(load_collection("beir/scifact/test").queries))


def test_normalization_is_recorded_and_checked():
    assert load_collection("xquad/ar").options["normalization"] == "none"
    assert load_collection("xquad/ar", normalization="light").options["normalization"] == "light"
    with pytest.raises(ConfigError, match=r"normalization='heavy' is invalid; use one of 'none', 'light'"):
        load_collection("xquad/ar", normalization="heavy")


def test_unknown_option_names_the_dataset_and_the_closest_option():
    with pytest.raises(ConfigError) as error:
        load_collection("cranfield", normalisation="light")
    message = str(error.value)
    assert "\n" not in message and "'cranfield'" in message and "did you mean 'normalization'" in message
    with pytest.raises(ConfigError, match="unknown option 'relevance'"):
        load_collection("vaswani", relevance="raw")
