"""SQuAD-format question answering sets used as question -> paragraph retrieval sets.

The corpus is the set of unique contexts, deduplicated on their exact text, in first-seen order.
A paragraph's id is ``"p"`` + the first 12 hex digits of the SHA-1 of its UTF-8 text: stable across
file order and subsets, so runs and qrels stay comparable. Each question has exactly one relevant
paragraph, its own context (relevance 1).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

from zerda_eval.errors import DataFormatError


def paragraph_id(text: str) -> str:
    """The stable id of a context paragraph: ``p`` + 12 hex digits of SHA-1(text)."""
    return "p" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def squad_records(path: Path) -> tuple[list[GenericDoc], list[GenericQuery], list[TrecQrel]]:
    """Parse a SQuAD v1.1 JSON file into corpus, questions and qrels records."""
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (ValueError, KeyError, TypeError) as error:
        raise DataFormatError(f"{path}: not a SQuAD JSON file with a 'data' list ({error})") from None
    docs: dict[str, GenericDoc] = {}
    queries: list[GenericQuery] = []
    qrels: list[TrecQrel] = []
    for article in articles:
        for paragraph in article["paragraphs"]:
            doc_id = paragraph_id(paragraph["context"])
            known = docs.setdefault(doc_id, GenericDoc(doc_id, paragraph["context"]))
            if known.text != paragraph["context"]:
                raise DataFormatError(f"{path}: two different contexts share the id {doc_id}")
            for qa in paragraph["qas"]:
                queries.append(GenericQuery(qa["id"], qa["question"]))
                qrels.append(TrecQrel(qa["id"], doc_id, 1, "0"))
    return list(docs.values()), queries, qrels
