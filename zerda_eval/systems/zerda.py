"""The zerda families (seed 000): keyword, vector, metadata and hybrid retrieval over a collection.

Every document becomes a ``DocumentChunk`` whose ``doc_id`` is the collection's; results map back
through ``ScoredChunk.doc_id``. ``HybridRetriever`` merges branches by content hash, so documents
with the same (case/space-normalised) text collapse into one: ``stats["duplicates_collapsed"]``
says how many did in the collection.
"""

from __future__ import annotations

import tempfile
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar

from retrieval.core import BM25Index
from retrieval.core.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.core.hashing import normalized_text_sha256
from retrieval.core.rm3 import DEFAULT_FB_DOCS, DEFAULT_FB_TERMS, DEFAULT_ORIGINAL_QUERY_WEIGHT, RM3, rm3_top_k
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
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.ranking import Ranking
from zerda_eval.systems.analysis import (
    ANALYZER_PARAMS,
    Analysis,
    check_token_options_reach_a_tokenizer,
)
from zerda_eval.systems.base import System
from zerda_eval.systems.encoders import EMBEDDER_PARAMS, CorpusVectors, MatrixVectorAdapter, corpus_vectors
from zerda_eval.systems.params import ParamSpec

BM25_ENGINES = ("reference", "fast")
ENGINE_HELP = "reference = the seed's pure-Python BM25Scorer; fast = SparseBM25 (same top k, scores to a few ulps)"
BM25_PARAMS = {
    "k1": ParamSpec(DEFAULT_K1, "float", "BM25 term-frequency saturation", minimum=0.0),
    "b": ParamSpec(DEFAULT_B, "float", "BM25 length normalisation", minimum=0.0, maximum=1.0),
}

RM3_PARAMS = {
    "rm3": ParamSpec(False, "bool", "RM3 pseudo-relevance feedback: a second BM25 pass with the expanded query"),
    "fb_docs": ParamSpec(
        None, "int", f"RM3 feedback documents (with rm3 = true; default {DEFAULT_FB_DOCS})", minimum=1, optional=True
    ),
    "fb_terms": ParamSpec(
        None, "int", f"RM3 expansion terms (with rm3 = true; default {DEFAULT_FB_TERMS})", minimum=1, optional=True
    ),
    "original_query_weight": ParamSpec(
        None,
        "float",
        f"RM3 weight of the original query (with rm3 = true; default {DEFAULT_ORIGINAL_QUERY_WEIGHT})",
        minimum=0.0,
        maximum=1.0,
        optional=True,
    ),
}
RM3_DEFAULTS = {field.name: field.default for field in fields(RM3)}


def with_rm3_defaults(params: dict[str, Any], where: str) -> dict[str, Any]:
    """``params`` with RM3's defaults filled in when ``rm3`` is on; an RM3 option without it is a ``ConfigError``
    (it would be recorded and not applied)."""
    if params["rm3"]:
        filled = {name: default if params[name] is None else params[name] for name, default in RM3_DEFAULTS.items()}
        return {**params, **filled}
    for name in RM3_DEFAULTS:
        if params[name] is not None:
            raise ConfigError(f"{where}.{name}: an RM3 option, applied only with rm3 = true; add it or remove {name}")
    return params


def rm3_of(params: Mapping[str, Any]) -> RM3 | None:
    """The RM3 expansion ``params`` ask for (resolved by ``with_rm3_defaults``), or None when off."""
    if not params.get("rm3"):
        return None
    return RM3(params["fb_docs"], params["fb_terms"], params["original_query_weight"])


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
    return len(texts) - len({normalized_text_sha256(text) for text in texts})


def _to_results(hits: list[Any]) -> Ranking:
    return [(str(hit.doc_id), float(hit.composite_score)) for hit in hits]


def vector_retriever(
    collection: Any, params: dict[str, Any], min_score: float, cache_dir: Path | None, analysis: Analysis
) -> VectorRetriever:
    """A ``VectorRetriever`` whose adapter serves the collection's cached embeddings."""
    vectors = corpus_vectors(params, collection.texts, cache_dir, analysis)
    adapter = MatrixVectorAdapter(collection_chunks(collection), vectors, min_score)
    config = ContextEngineConfig(RetrieverConfig(min_vector_score=min_score))
    return VectorRetriever(config, vector_store_adapter=adapter)


class AnalyzedBM25Scorer(BM25Scorer):
    """seed 000 ``BM25Scorer`` whose documents and queries are tokenized by ``analyze``.

    With ``analyze = retrieval.core.tokenize`` (every analysis option off) it is the seed's scorer.
    With ``rm3``, a query is answered by RM3 (``retrieval.core.rm3``): a first pass, the feedback documents'
    tokens, then a weighted second pass whose scores are the ones returned. ``last_top_score`` is the raw
    BM25 of the best hit of the last ``score`` call (before the retriever divides by it).
    """

    def __init__(self, k1: float, b: float, analyze: Any, rm3: RM3 | None = None):
        super().__init__(k1=k1, b=b)
        self.analyze = analyze
        self.rm3 = rm3
        self.last_top_score: float | None = None

    def index(self, documents: list[str]) -> None:
        self._index = BM25Index(self.k1, self.b).fit([self.analyze(text) for text in documents])

    def score(self, query: str, top_k: int = 20) -> list[tuple[int, float]]:
        tokens = self.analyze(query)
        if self.rm3 is None:
            hits = self._top_k(tokens, top_k)
        else:
            hits = rm3_top_k(tokens, top_k, self.rm3, self._top_k, self._document_terms, self._weighted_top_k)
        self.last_top_score = hits[0][1] if hits else None
        return hits

    def _top_k(self, tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        return self._index.top_k(tokens, k)

    def _document_terms(self, doc_index: int) -> Counter[str]:
        return Counter(self._index.corpus[doc_index])

    def _weighted_top_k(self, term_weights: Mapping[str, float], k: int) -> list[tuple[int, float]]:
        return self._index.weighted_top_k(term_weights, k)


class SparseBM25Scorer(AnalyzedBM25Scorer):
    """``AnalyzedBM25Scorer`` answered by ``retrieval.core.bm25_fast.SparseBM25`` (the fast engine): the
    reference's top k, scores within a few ulps (a query's terms are summed highest bound first).

    ``build`` turns the documents into the index (from the index store when the run has a cache directory).
    RM3 reads a feedback document's tokens by analysing its text again (the index keeps no token lists) and
    scores the weighted pass with ``retrieval.core.bm25_weighted``.
    """

    def __init__(self, k1: float, b: float, analyze: Any, build: Callable[[list[str]], Any], rm3: RM3 | None = None):
        super().__init__(k1=k1, b=b, analyze=analyze, rm3=rm3)
        self._build = build

    def index(self, documents: list[str]) -> None:
        self._sparse = self._build(documents)
        self._documents = documents

    def _top_k(self, tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        rows, scores = self._sparse.top_k_batch([tokens], k)
        return list(zip(rows[0].tolist(), scores[0].tolist(), strict=True))

    def _document_terms(self, doc_index: int) -> Counter[str]:
        return Counter(self.analyze(self._documents[doc_index]))

    def _weighted_top_k(self, term_weights: Mapping[str, float], k: int) -> list[tuple[int, float]]:
        from retrieval.core.bm25_weighted import sparse_weighted_top_k

        return sparse_weighted_top_k(self._sparse, term_weights, k)

    @property
    def traversals(self) -> Any:
        """How many queries each of ``SparseBM25``'s traversals answered (a live count, filled as queries run)."""
        return self._sparse.traversals


class TunedKeywordRetriever(KeywordRetriever):
    """seed 000 ``KeywordRetriever`` over the given scorer (the seed builds one with default k1, b and its
    tokenizer)."""

    def __init__(self, config: ContextEngineConfig, scorer: AnalyzedBM25Scorer):
        super().__init__(config)
        self._bm25 = scorer


def record_traversals(stats: dict[str, Any], scorer: AnalyzedBM25Scorer) -> None:
    """``stats["bm25_traversals"]``: the fast engine's count of the queries each of its traversals
    (``bm25_fast.TRAVERSALS``) answered, which fills as the cell's queries run (its untimed warm-up query
    included)."""
    if isinstance(scorer, SparseBM25Scorer):
        stats["bm25_traversals"] = scorer.traversals


def keyword_scorer(
    params: dict[str, Any], engine: str, analysis: Analysis, cache_dir: Path | None
) -> AnalyzedBM25Scorer:
    """The BM25 scorer of ``engine`` ("reference": the seed's, pure Python; "fast": ``SparseBM25``), with RM3
    when ``params`` turn it on."""
    analyze, rm3 = analysis.analyzer(), rm3_of(params)
    if engine == "reference":
        return AnalyzedBM25Scorer(k1=params["k1"], b=params["b"], analyze=analyze, rm3=rm3)
    described = analysis.describe()
    return SparseBM25Scorer(
        params["k1"],
        params["b"],
        analyze,
        lambda texts: _sparse_bm25(texts, analyze, params, described, cache_dir),
        rm3=rm3,
    )


class ZerdaKeyword(System):
    """seed 000 ``KeywordRetriever``: BM25, scores divided by the best of the top ``2k``.

    ``engine="fast"`` gives the same answers from ``retrieval.core.bm25_fast.SparseBM25`` (posting
    lists, numba). Both engines tokenize with the system's analyzer (``ANALYZER_PARAMS``).
    ``no_answer_threshold`` compares the raw BM25 of the top hit (before the division). ``rm3 = true``
    expands each query by RM3 (``fb_docs``, ``fb_terms``, ``original_query_weight``; both engines).
    """

    family = "zerda.keyword"
    description = "zerda KeywordRetriever (BM25, max-normalised)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **BM25_PARAMS,
        "engine": ParamSpec("reference", "str", ENGINE_HELP, choices=BM25_ENGINES),
        **ANALYZER_PARAMS,
        **RM3_PARAMS,
    }

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        return with_rm3_defaults(super().resolve_params(params, where), where)

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        p = self.params
        self._scorer = keyword_scorer(p, p["engine"], self.analysis(collection), cache_dir)
        self._retriever = TunedKeywordRetriever(ContextEngineConfig(), self._scorer)
        self._retriever.index_chunks(collection_chunks(collection))
        record_traversals(self.stats, self._scorer)

    def _scored(self, text: str, k: int) -> tuple[Ranking, float | None]:
        """The seed retriever's answer (its over-fetch and max division), and its scorer's raw top score."""
        results = _to_results(self._retriever.retrieve(text, k))
        return results, self._scorer.last_top_score if results else None


def _sparse_bm25(texts: list[str], analyze: Any, params: dict[str, Any], described: dict, cache_dir: Path | None):
    """``SparseBM25`` of the texts: memory-mapped from ``cache_dir`` (built there once), else in memory."""
    if cache_dir is None:
        from retrieval.core.bm25_fast import SparseBM25

        return SparseBM25(k1=params["k1"], b=params["b"]).fit(analyze(text) for text in texts)
    from zerda_eval.store.indexes import cached_sparse_bm25

    return cached_sparse_bm25(texts, analyze, params["k1"], params["b"], described, cache_dir)


VECTOR_BACKENDS = ("adapter", "in_memory", "faiss", "chroma")


def _vector_database(backend: str, vectors: CorpusVectors, cache_dir: Path | None):
    """A FAISS (exact ``IndexFlatIP``) or persistent Chroma database that embeds queries with ``vectors``.

    Chroma lives in ``<cache_dir>/chroma`` (else a temporary directory removed with the database) in a
    collection named by ``vectors.fingerprint`` (embedder, its params, the texts it embedded), so a cached
    collection of the same vectors is reused, never mixed.
    """
    if backend == "faiss":
        from retrieval.zerda.backends import FAISSVectorDatabase

        return FAISSVectorDatabase(vectors.embed_query)
    from retrieval.zerda.backends import ChromaVectorDatabase

    name = f"zerda-{vectors.fingerprint[:40]}"
    if cache_dir is not None:
        return ChromaVectorDatabase(vectors.embed_query, cache_dir / "chroma", collection_name=name)
    scratch = tempfile.TemporaryDirectory(prefix="zerda-chroma-")
    database = ChromaVectorDatabase(vectors.embed_query, Path(scratch.name), collection_name=name)
    weakref.finalize(database, scratch.cleanup)  # the folder lives as long as the database, then goes
    return database


def backend_vector_retriever(
    collection: Any, params: dict[str, Any], cache_dir: Path | None, analysis: Analysis
) -> VectorRetriever:
    """A ``VectorRetriever`` in the mode ``params["backend"]`` names, over the collection's cached embeddings."""
    backend, min_score = params["backend"], params["min_vector_score"]
    if backend == "adapter":
        return vector_retriever(collection, params, min_score, cache_dir, analysis)
    vectors = corpus_vectors(params, collection.texts, cache_dir, analysis)
    config = ContextEngineConfig(RetrieverConfig(min_vector_score=min_score))
    chunks = collection_chunks(collection)
    if backend == "in_memory":
        return VectorRetriever(config, chunks=chunks, embeddings=list(vectors.matrix), embed_fn=vectors.embed_query)
    database = _vector_database(backend, vectors, cache_dir)
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

    The corpus vectors are computed once (``zerda_eval.store.embeddings``); every backend uses them
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
        **ANALYZER_PARAMS,
        "min_vector_score": ParamSpec(
            RetrieverConfig.min_vector_score, "float", "drop hits below this cosine", minimum=-1.0, maximum=1.0
        ),
        "backend": ParamSpec(
            "adapter",
            "str",
            "VectorRetriever mode: adapter (matrix product), in_memory (seed loop), faiss or chroma (vector_db)",
            choices=VECTOR_BACKENDS,
        ),
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        check_token_options_reach_a_tokenizer(params, where)

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._retriever = backend_vector_retriever(collection, self.params, cache_dir, self.analysis(collection))

    def _search(self, text: str, k: int) -> Ranking:
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

    def _search(self, text: str, k: int) -> Ranking:
        return _to_results(self._retriever.retrieve(text, k, self._filters))


class ZerdaHybrid(System):
    """seed 000 ``HybridRetriever`` over vector + keyword; ``rrf_order`` picks the documented or fixed RRF step.

    The analysis options reach both branches: the keyword branch's tokens and the vector branch's text.
    """

    family = "zerda.hybrid"
    description = "zerda HybridRetriever (weighted vector+keyword, RRF bonus)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **EMBEDDER_PARAMS,
        **BM25_PARAMS,
        **ANALYZER_PARAMS,
        "vector_weight": ParamSpec(RetrieverConfig.vector_weight, "float", "weight of the vector score", minimum=0.0),
        "keyword_weight": ParamSpec(
            RetrieverConfig.keyword_weight, "float", "weight of the keyword score", minimum=0.0
        ),
        "keyword_engine": ParamSpec("reference", "str", f"keyword branch: {ENGINE_HELP}", choices=BM25_ENGINES),
        "rrf_order": ParamSpec(
            RetrieverConfig.rrf_order,
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
        analysis = self.analysis(collection)
        keyword = TunedKeywordRetriever(config, keyword_scorer(p, p["keyword_engine"], analysis, cache_dir))
        keyword.index_chunks(collection_chunks(collection))
        record_traversals(self.stats, keyword._bm25)
        vector = vector_retriever(collection, p, config.retriever.min_vector_score, cache_dir, analysis)
        self._retriever = HybridRetriever(config, vector_retriever=vector, keyword_retriever=keyword)
        self.stats["duplicates_collapsed"] = duplicates_collapsed(list(collection.texts))

    def _search(self, text: str, k: int) -> Ranking:
        return _to_results(self._retriever.retrieve(text, min(self.params["top_k"] or k, k)))
