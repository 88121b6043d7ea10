"""Every bundled set: counts equal the shared README's table; exact records read from the raw files."""

from __future__ import annotations

import hashlib
import json

import ir_datasets
import pytest

from zerda_eval.datasets import BUNDLED_IDS, list_datasets, load_collection

# The table of ../shared/datasets/README.md: docs, judged queries, qrels rows as published.
README_COUNTS = {
    "beir/scifact/test": (5183, 300, 339),
    "beir/scifact/train": (5183, 809, 919),
    "cranfield": (1400, 225, 1837),
    "vaswani": (11429, 93, 2083),
    "quranqa23/taskA/train": (1266, 174, 972),
    "quranqa23/taskA/dev": (1266, 25, 160),
    "quranqa23/taskA/train+dev": (1266, 199, 1132),
    "tydiqa-goldp/ar/dev": (842, 921, 921),
    "xquad/ar": (240, 1190, 1190),
}
# README: train+dev has 169 answerable and 30 no-answer questions; train 972 + dev 160 rows.
CRANFIELD_SOURCE_ROWS = 225  # code -1: one "source document" row per query, dropped by the protocol


@pytest.fixture(scope="module")
def listing():
    return list_datasets().set_index("name")


def test_listing_covers_every_bundled_id_with_readme_counts(listing):
    assert list(listing.index) == list(BUNDLED_IDS) == list(README_COUNTS)
    for dataset_id, (docs, queries, pairs) in README_COUNTS.items():
        row = listing.loc[dataset_id]
        assert (row["docs"], row["queries"], row["judged pairs"]) == (docs, queries, pairs), dataset_id
        assert row["language"] in ("en", "ar") and row["source"] and row["licence"]


@pytest.mark.parametrize("dataset_id", list(README_COUNTS))
def test_collection_counts(dataset_id):
    docs, queries, pairs = README_COUNTS[dataset_id]
    collection = load_collection(dataset_id)
    assert len(collection.doc_ids) == len(collection.texts) == len(set(collection.doc_ids)) == docs
    assert len(collection.queries) == queries
    expected_pairs = pairs - CRANFIELD_SOURCE_ROWS if dataset_id == "cranfield" else pairs
    assert sum(len(judged) for judged in collection.qrels.values()) == expected_pairs
    assert list(collection.qrels) == list(collection.queries)


def test_loading_twice_returns_the_cached_collection():
    assert load_collection("xquad/ar") is load_collection("xquad/ar")
    assert load_collection("xquad/ar") is not load_collection("xquad/ar", normalization="light")


def test_scifact_records(shared):
    folder = shared / "beir-scifact"
    first = json.loads((folder / "corpus.jsonl").open(encoding="utf-8").readline())
    _header, row = (folder / "qrels" / "test.tsv").read_text().splitlines()[:2]
    qid, doc_id, score = row.split("\t")
    collection = load_collection("beir/scifact/test")
    assert collection.doc_ids[0] == first["_id"] == "4983"
    assert collection.texts[0] == f"{first['title']} {first['text']}"
    assert collection.qrels[qid][doc_id] == int(score)
    assert collection.queries["1"] == "0-dimensional biomaterials show inductive properties."
    assert collection.language == "en" and collection.options["ignore_identical_ids"] is True
    train = load_collection("beir/scifact/train")
    assert train.doc_ids == collection.doc_ids and not set(train.queries) & set(collection.queries)


def test_vaswani_records_match_an_independent_parse_of_the_trec_files(shared):
    folder = shared / "vaswani"
    raw_docs = {}
    for block in (folder / "doc-text.trec").read_text().split("</DOC>")[:-1]:
        head, text = block.split("</DOCNO>")
        raw_docs[head.split("<DOCNO>")[1].strip()] = " ".join(text.split())
    collection = load_collection("vaswani")
    assert collection.doc_ids == list(raw_docs)
    assert [" ".join(text.split()) for text in collection.texts] == list(raw_docs.values())
    assert collection.texts[0].startswith("compact memories have flexible capacities")
    qid, _, doc_id, rel = (folder / "qrels").read_text().split("\n")[0].split()
    assert collection.qrels[qid][doc_id] == int(rel) == 1
    topic = "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"
    assert " ".join(collection.queries["1"].split()) == topic


def test_quranqa_records(shared):
    folder = shared / "quranqa23-taskA"
    pid, text = (folder / "QQA23_TaskA_QPC_v1.1.tsv").read_text(encoding="utf-8").split("\n")[0].split("\t")
    qid, _, answer, rel = (folder / "QQA23_TaskA_qrels_dev.gold").read_text().split("\n")[0].split()
    no_answer = {
        line.split()[0]
        for split in ("train", "dev")
        for line in (folder / f"QQA23_TaskA_qrels_{split}.gold").read_text().splitlines()
        if line.split() and line.split()[2] == "-1"
    }
    dev = load_collection("quranqa23/taskA/dev")
    assert (dev.doc_ids[0], dev.texts[0]) == (pid, text) == ("1:1-4", text)
    assert dev.qrels[qid][answer] == int(rel)
    assert dev.queries["114"] == "من الذي خسف الله به الأرض؟"
    both = load_collection("quranqa23/taskA/train+dev")
    assert both.no_answer_qids == no_answer and len(no_answer) == 30
    assert len(both.queries) - len(both.no_answer_qids) == 169
    assert all(both.qrels[q] == {"-1": 1} for q in no_answer)


@pytest.mark.parametrize(
    ("dataset_id", "path"),
    [
        ("tydiqa-goldp/ar/dev", "tydiqa-goldp-ar/tydiqa-goldp-dev-arabic.json"),
        ("xquad/ar", "xquad-ar/xquad.ar.json"),
    ],
)
def test_squad_sets_are_deduplicated_contexts_with_one_relevant_paragraph(shared, dataset_id, path):
    articles = json.loads((shared / path).read_text(encoding="utf-8"))["data"]
    paragraphs = [p for article in articles for p in article["paragraphs"]]
    first, first_qa = paragraphs[0]["context"], paragraphs[0]["qas"][0]
    collection = load_collection(dataset_id)
    assert collection.texts[0] == first
    assert collection.doc_ids[0] == "p" + hashlib.sha1(first.encode()).hexdigest()[:12]
    assert collection.queries[first_qa["id"]] == first_qa["question"]
    assert collection.qrels[first_qa["id"]] == {collection.doc_ids[0]: 1}
    assert len(collection.texts) == len({p["context"] for p in paragraphs}) == len(set(collection.texts))
    assert collection.language == "ar" and collection.options["ignore_identical_ids"] is False


@pytest.mark.parametrize(
    "dataset_id",
    [
        "quranqa23/taskA/train",
        "quranqa23/taskA/dev",
        "quranqa23/taskA/train+dev",
        "tydiqa-goldp/ar/dev",
        "xquad/ar",
    ],
)
def test_registered_ids_load_through_ir_datasets(dataset_id):
    docs, queries, pairs = README_COUNTS[dataset_id]
    dataset = ir_datasets.load(dataset_id)
    doc_records = list(dataset.docs_iter())
    assert dataset.docs_count() == len(doc_records) == docs
    assert all(isinstance(d, ir_datasets.formats.GenericDoc) for d in doc_records)
    assert all(isinstance(q, ir_datasets.formats.GenericQuery) for q in dataset.queries_iter())
    qrels = list(dataset.qrels_iter())
    assert len(qrels) == pairs and all(isinstance(q, ir_datasets.formats.TrecQrel) for q in qrels)
    assert len({q.query_id for q in dataset.queries_iter()}) == queries
