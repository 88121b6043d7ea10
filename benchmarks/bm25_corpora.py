"""The two corpora every BM25 benchmark runs on, at any size: Zipf-synthetic text and real sentences.

- ``"zipf"``: passages of 20-80 tokens drawn from a 200,000-word vocabulary with Zipf(1.1) frequencies (a few
  words are in most passages, as stopwords are); queries of 3-10 words drawn the same way.
- ``"real"``: passages of two real sentences, from SciFact's abstracts (title and abstract split into
  sentences), paired at random with a seeded generator, so any number of passages reuses the ~50,000
  sentences; queries are SciFact's 300 test claims, tokenized as they are, stopwords included.

Both are token lists of ``retrieval.core.tokenize`` style (the engines' input), generated chunk by chunk
(``passages``), so a 10M corpus is never whole in memory unless the caller keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

import numpy as np

from retrieval.core import tokenize

CORPORA = ("zipf", "real")
SCIFACT = "beir/scifact/test"
VOCABULARY = np.array([f"w{i}" for i in range(200_000)], dtype=object)
CHUNK = 50_000  # passages generated at a time
# A sentence ends at ., ! or ? followed by white space and an upper-case letter or a digit.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def zipf_token_lists(rng: np.random.Generator, n: int, low: int, high: int) -> list[list[str]]:
    """``n`` token lists of ``low``-``high`` Zipf(1.1) words (the token strings shared, not copied)."""
    lengths = rng.integers(low, high + 1, size=n)
    ranks = rng.zipf(1.1, size=int(lengths.sum())) - 1
    words = VOCABULARY[ranks[ranks < len(VOCABULARY)]].tolist()
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [words[bounds[i] : bounds[i + 1]] for i in range(n)]


@cache
def scifact_sentences() -> tuple[tuple[str, ...], ...]:
    """Every non-empty sentence of SciFact's documents, tokenized (read through the project's dataset loader)."""
    from zerda_eval.datasets import load_collection

    sentences = []
    for text in load_collection(SCIFACT).texts:
        for sentence in SENTENCE_END.split(text):
            tokens = tokenize(sentence)
            if tokens:
                sentences.append(tuple(tokens))
    return tuple(sentences)


def scifact_queries() -> list[list[str]]:
    """SciFact's test claims, tokenized, stopwords and all."""
    from zerda_eval.datasets import load_collection

    return [tokenize(query) for query in load_collection(SCIFACT).queries.values()]


def passages(corpus: str, n: int, seed: int) -> Iterator[list[str]]:
    """``n`` passages of ``corpus`` ("zipf" or "real"), generated ``CHUNK`` at a time from ``seed``."""
    rng = np.random.default_rng(seed)
    sentences = scifact_sentences() if corpus == "real" else ()
    for start in range(0, n, CHUNK):
        size = min(CHUNK, n - start)
        if corpus == "zipf":
            yield from zipf_token_lists(rng, size, 20, 80)
        else:
            for first, second in rng.integers(0, len(sentences), size=(size, 2)).tolist():
                yield [*sentences[first], *sentences[second]]


def queries(corpus: str, n: int, seed: int) -> list[list[str]]:
    """The benchmark's queries on ``corpus``: ``n`` Zipf queries, or SciFact's 300 claims (``n`` ignored)."""
    if corpus == "zipf":
        return zipf_token_lists(np.random.default_rng(seed), n, 3, 10)
    return scifact_queries()
