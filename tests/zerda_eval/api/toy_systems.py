"""A user's retriever as a test would write one: importable as ``tests.zerda_eval.api.toy_systems:make_overlap``."""

from __future__ import annotations

from collections import Counter
from typing import Any


class WordOverlap:
    """How often the document holds the query's words, times ``weight``."""

    version = "1"

    def __init__(self, weight: float = 1.0):
        self.weight = weight

    def index(self, collection: Any) -> None:
        self.docs = {d: Counter(t.lower().split()) for d, t in zip(collection.doc_ids, collection.texts, strict=True)}

    def search(self, query_text: str, k: int) -> list[tuple[str, float]]:
        words = set(query_text.lower().split())
        scores = {d: self.weight * sum(c[w] for w in words) for d, c in self.docs.items()}
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def make_overlap(weight: float = 1.0) -> WordOverlap:
    """The factory a TOML file names: ``object = "tests.zerda_eval.api.toy_systems:make_overlap"``."""
    return WordOverlap(weight)
