"""The harness's own dense family (``family = "dense"``): cosine over cached corpus vectors, no per-document objects.

The seed families (``pipeline.dense``, ``zerda.vector``) wrap every document in the seed's objects (a
``ContextItem`` or ``DocumentChunk`` holding its text) before searching, as their APIs specify: at MS MARCO's
8.8M passages those objects alone exceed a worker's memory. This family holds only the collection's doc ids
and the memory-mapped corpus vectors (``encoders.corpus_vectors``, ``cache_dir``), searched exactly in blocks
(``retrieval.core.dense.exact_top_k``) or through a FAISS approximate index (``index``), whose recall against
exact search the cell records (``stats["vector_index"]``, results column ``ann_recall``). Scores are the raw
cosines (the seed families clip theirs to [0, 1]); ties by lower corpus row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zerda_eval.ranking import Ranking
from zerda_eval.systems.base import System
from zerda_eval.systems.encoders import VectorSearch, VectorSearchFamily, corpus_vectors


class Dense(VectorSearchFamily, System):
    """Exact or approximate cosine top k over the collection's cached offline embeddings."""

    family = "dense"
    description = "dense retrieval at any corpus size: cosine over memory-mapped embeddings, exact or FAISS ANN"

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._vectors = corpus_vectors(self.params, collection.texts, cache_dir, self.analysis(collection))
        self._vector_search = VectorSearch(self._vectors, self.params)
        self._doc_ids = collection.doc_ids

    def _search(self, text: str, k: int) -> Ranking:
        hits = self._vector_search.top_k(self._vectors.embed_query(text), k)
        return [(self._doc_ids[row], score) for row, score in hits]
