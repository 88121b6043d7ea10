"""The zerda families (seed 000): keyword, vector, metadata and hybrid retrieval over a collection.

Every document becomes a ``DocumentChunk`` whose ``doc_id`` is the collection's; results map back
through ``ScoredChunk.doc_id``. ``HybridRetriever`` merges branches by content hash, so documents
with the same (case/space-normalised) text collapse into one: ``stats["duplicates_collapsed"]``
says how many did in the collection.
"""

from __future__ import annotations

import tempfile
import weakref
from pathlib import Path
from typing import Any, ClassVar

from retrieval.core import analyzer
from retrieval.zerda import (
    BM25Scorer,
    ChunkMetadata,
    ContextEngineConfig,
    DocumentChunk,
    HybridRetriever,
    KeywordRetriever,
    MetadataRetriever,
    RetrieverConfig,
    VectorRetriever,
)
from retrieval.zerda.config import RRF_ORDERS
from retrieval.zerda.models import content_hash
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.systems.base import ParamSpec, Results, System
from zerda_eval.systems.encoders import EMBEDDER_PARAMS, CorpusVectors, MatrixVectorAdapter, corpus_vectors

BM25_PARAMS = {
    "k1": ParamSpec(1.5, "float", "BM25 term-frequency saturation", minimum=0.0),
    "b": ParamSpec(0.75, "float", "BM25 length normalisation", minimum=0.0, maximum=1.0),
}
ANALYZER_PARAMS = {
    "normalization": ParamSpec(
        None,
        "str",
        "Arabic light normalisation; default: the dataset's option",
        choices=("none", "light"),
        optional=True,
    ),
    "stemmer": ParamSpec(None, "str", "PyStemmer (Snowball) language", choices=("english", "arabic"), optional=True),
}


def collection_analyzer(params: dict[str, Any], collection: Any, stats: dict[str, Any]):
    """The analyzer the params ask for; normalization falls back to the dataset's protocol option."""
    normalization = params["normalization"] or collection.options.get("normalization", "none")
    stats["analyzer"] = {"normalization": normalization, "stemmer": params["stemmer"]}
    return analyzer(normalization, params["stemmer"])


def collection_chunks(collection: Any) -> list[DocumentChunk]:
    """One chunk per document; metadata ``source`` = collection id, ``category`` = its language."""
    return [
        DocumentChunk(
            text=text,
            doc_id=doc_id,
            metadata=ChunkMetadata(doc_id=doc_id, source=collection.id, category=collection.language),
        )
        for doc_id, text in zip(collection.doc_ids, collection.texts, strict=True)
    ]


def duplicates_collapsed(texts: list[str]) -> int:
    """How many documents the zerda content-hash merge folds into another one."""
    return len(texts) - len({content_hash(text) for text in texts})


def _to_results(hits: list[Any]) -> Results:
    return [(str(hit.doc_id), float(hit.composite_score)) for hit in hits]


def vector_retriever(
    collection: Any, params: dict[str, Any], min_score: float, cache_dir: Path | None
) -> VectorRetriever:
    """A ``VectorRetriever`` whose adapter serves the collection's cached embeddings."""
    vectors = corpus_vectors(params["embedder"], params["dim"], collection.texts, cache_dir)
    adapter = MatrixVectorAdapter(collection_chunks(collection), vectors, min_score)
    config = ContextEngineConfig(RetrieverConfig(min_vector_score=min_score))
    return VectorRetriever(config, vector_store_adapter=adapter)


class TunedKeywordRetriever(KeywordRetriever):
    """seed 000 ``KeywordRetriever`` with its ``BM25Scorer`` built from k1 and b (the seed hard-codes defaults)."""

    def __init__(self, config: ContextEngineConfig, k1: float, b: float):
        super().__init__(config)
        self._bm25 = BM25Scorer(k1=k1, b=b)


class ZerdaKeyword(System):
    """seed 000 ``KeywordRetriever``: BM25, scores divided by the best of the top ``2k``.

    ``engine="fast"`` gives the same answers from ``retrieval.core.bm25_fast.SparseBM25`` (sparse
    matrix, scipy) and is the only engine that takes analyzer options (the seed tokenizes itself).
    """

    family = "zerda.keyword"
    description = "zerda KeywordRetriever (BM25, max-normalised)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **BM25_PARAMS,
        "engine": ParamSpec(
            "reference", "str", "reference = the seed's pure-Python BM25Scorer", choices=("reference", "fast")
        ),
        **ANALYZER_PARAMS,
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        custom = params["normalization"] not in (None, "none") or params["stemmer"] is not None
        if params["engine"] == "reference" and custom:
            raise ConfigError(
                f'{where}: normalization/stemmer need engine = "fast" (the seed\'s BM25Scorer has its own tokenizer)'
            )

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        p = self.params
        self._doc_ids = list(collection.doc_ids)
        if p["engine"] == "fast":
            self._analyze = collection_analyzer(p, collection, self.stats)
            self._fast = _sparse_bm25(collection.texts, self._analyze, p, self.stats["analyzer"], cache_dir)
        else:
            self.stats["analyzer"] = "seed tokenizer"
            self._retriever = TunedKeywordRetriever(ContextEngineConfig(), p["k1"], p["b"])
            self._retriever.index_chunks(collection_chunks(collection))

    def _search(self, text: str, k: int) -> Results:
        if self.params["engine"] == "reference":
            return _to_results(self._retriever.retrieve(text, k))
        indices, scores = self._fast.top_k_batch([self._analyze(text)], k * 2)
        rows, values = indices[0].tolist(), scores[0].tolist()
        best = (max(values) if values else 0.0) or 1.0  # as KeywordRetriever: no match keeps 0.0 scores
        return [(self._doc_ids[row], value / best) for row, value in zip(rows[:k], values[:k], strict=True)]


def _sparse_bm25(texts: list[str], analyze: Any, params: dict[str, Any], described: dict, cache_dir: Path | None):
    """``SparseBM25`` of the texts: memory-mapped from ``cache_dir`` (built there once), else in memory."""
    if cache_dir is None:
        from retrieval.core.bm25_fast import SparseBM25

        return SparseBM25(k1=params["k1"], b=params["b"]).fit(analyze(text) for text in texts)
    from zerda_eval.index_cache import cached_sparse_bm25

    return cached_sparse_bm25(texts, analyze, params["k1"], params["b"], described, cache_dir)


VECTOR_BACKENDS = ("adapter", "in_memory", "faiss", "chroma")


def _vector_database(
    backend: str, vectors: CorpusVectors, params: dict[str, Any], texts: list[str], cache_dir: Path | None
):
    """A FAISS (exact ``IndexFlatIP``) or persistent Chroma database that embeds queries with ``vectors``.

    Chroma lives in ``<cache_dir>/chroma`` (else a temporary directory removed with the database) in a
    collection named by the embedding cache key, so a cached collection of the same corpus and model is reused,
    never mixed.
    """
    if backend == "faiss":
        from retrieval.zerda.backends import FAISSVectorDatabase

        return FAISSVectorDatabase(vectors.embed_query)
    from retrieval.zerda.backends import ChromaVectorDatabase
    from zerda_eval.embedding_cache import cache_key

    # Named by the embedding cache key (model name, its parameters and weights' hash, corpus): a Chroma
    # name allows no "st:/path" slashes, and a model folder saved anew must not reuse old vectors.
    name = f"zerda-{cache_key(vectors.embedder, texts)[:48]}"
    if cache_dir is not None:
        return ChromaVectorDatabase(vectors.embed_query, cache_dir / "chroma", collection_name=name)
    scratch = tempfile.TemporaryDirectory(prefix="zerda-chroma-")
    database = ChromaVectorDatabase(vectors.embed_query, Path(scratch.name), collection_name=name)
    weakref.finalize(database, scratch.cleanup)  # the folder lives as long as the database, then goes
    return database


def backend_vector_retriever(collection: Any, params: dict[str, Any], cache_dir: Path | None) -> VectorRetriever:
    """A ``VectorRetriever`` in the mode ``params["backend"]`` names, over the collection's cached embeddings."""
    backend, min_score = params["backend"], params["min_vector_score"]
    if backend == "adapter":
        return vector_retriever(collection, params, min_score, cache_dir)
    vectors = corpus_vectors(params["embedder"], params["dim"], collection.texts, cache_dir)
    config = ContextEngineConfig(RetrieverConfig(min_vector_score=min_score))
    chunks = collection_chunks(collection)
    if backend == "in_memory":
        return VectorRetriever(config, chunks=chunks, embeddings=list(vectors.matrix), embed_fn=vectors.embed_query)
    database = _vector_database(backend, vectors, params, list(collection.texts), cache_dir)
    retriever = VectorRetriever(config)
    if len(database) == len(chunks):  # a persisted Chroma collection of this very corpus and embedder
        retriever.index_vector_db([], database)
    elif len(database) == 0:
        retriever.index_vector_db(chunks, database, embeddings=vectors.matrix)  # the cached vectors, no re-embedding
    else:
        raise RunError(
            f"{getattr(database, 'path', backend)}: the vector database holds {len(database)} chunks, "
            f"expected 0 or {len(chunks)}; delete that directory and run again"
        )
    return retriever


class ZerdaVector(System):
    """seed 000 ``VectorRetriever`` over precomputed, disk-cached corpus embeddings, in the mode ``backend`` picks.

    The corpus vectors are computed once (``zerda_eval.embedding_cache``); every backend uses them
    (none re-embeds the corpus) and embeds queries with the same embedder:

    - ``adapter`` (default): a ``vector_store_adapter`` scoring all documents with one matrix product, for
      speed; it returns the in-memory mode's hits (cosine, ``min_vector_score``, best first).
    - ``in_memory``: the seed's own in-memory mode, a Python loop of ``_cosine`` over every chunk.
    - ``faiss``: native ``vector_db`` mode, ``FAISSVectorDatabase`` (exact inner product on unit vectors).
    - ``chroma``: native ``vector_db`` mode, a persistent ``ChromaVectorDatabase`` (HNSW, cosine space).

    Seed quirk kept in ``vector_db`` mode: ``min_vector_score`` 0.0 means no threshold (``score or None``),
    so faiss/chroma may return negative-cosine hits where adapter/in_memory drop them.
    """

    family = "zerda.vector"
    description = "zerda VectorRetriever (cosine over offline embeddings)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **EMBEDDER_PARAMS,
        "min_vector_score": ParamSpec(0.0, "float", "drop hits below this cosine", minimum=-1.0, maximum=1.0),
        "backend": ParamSpec(
            "adapter",
            "str",
            "VectorRetriever mode: adapter (matrix product), in_memory (seed loop), faiss or chroma (vector_db)",
            choices=VECTOR_BACKENDS,
        ),
    }

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._retriever = backend_vector_retriever(collection, self.params, cache_dir)

    def _search(self, text: str, k: int) -> Results:
        return _to_results(self._retriever.retrieve(text, k))


class ZerdaMetadata(System):
    """seed 000 ``MetadataRetriever``: every document matching ``filters`` scores 1.0, the query is unused.

    A floor baseline: with the default filter (the whole collection) the ranking is the tie-break order.
    Chunk metadata: ``doc_id``, ``source`` (collection id), ``category`` (collection language).
    """

    family = "zerda.metadata"
    description = "zerda MetadataRetriever (filter only; a floor baseline)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        "filters": ParamSpec({}, "table", "metadata filters; {} = {source = <collection id>}"),
    }

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._filters = self.params["filters"] or {"source": collection.id}
        self._retriever = MetadataRetriever(ContextEngineConfig(), collection_chunks(collection))

    def _search(self, text: str, k: int) -> Results:
        return _to_results(self._retriever.retrieve(text, k, self._filters))


class ZerdaHybrid(System):
    """seed 000 ``HybridRetriever`` over vector + keyword; ``rrf_order`` picks the documented or fixed RRF step."""

    family = "zerda.hybrid"
    description = "zerda HybridRetriever (weighted vector+keyword, RRF bonus)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **EMBEDDER_PARAMS,
        **BM25_PARAMS,
        "vector_weight": ParamSpec(0.6, "float", "weight of the vector score", minimum=0.0),
        "keyword_weight": ParamSpec(0.3, "float", "weight of the keyword score", minimum=0.0),
        "rrf_order": ParamSpec(
            "as_documented",
            "str",
            "as_documented: RRF bonus overwritten (seed); fixed: added",
            choices=RRF_ORDERS,
        ),
        "top_k": ParamSpec(
            None,
            "int",
            "top_k passed to HybridRetriever.retrieve (each branch fetches 2 x top_k); default: the run depth",
            minimum=1,
            optional=True,
        ),
    }

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        p = self.params
        config = ContextEngineConfig(
            RetrieverConfig(
                vector_weight=p["vector_weight"], keyword_weight=p["keyword_weight"], rrf_order=p["rrf_order"]
            )
        )
        keyword = TunedKeywordRetriever(config, p["k1"], p["b"])
        keyword.index_chunks(collection_chunks(collection))
        vector = vector_retriever(collection, p, config.retriever.min_vector_score, cache_dir)
        self._retriever = HybridRetriever(config, vector_retriever=vector, keyword_retriever=keyword)
        self.stats["duplicates_collapsed"] = duplicates_collapsed(list(collection.texts))

    def _search(self, text: str, k: int) -> Results:
        return _to_results(self._retriever.retrieve(text, min(self.params["top_k"] or k, k)))
