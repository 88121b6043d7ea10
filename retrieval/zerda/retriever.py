"""The zerda retriever module (seed 000): BM25 scorer, vector / keyword / metadata retrievers, hybrid.

Scoring pieces come from ``retrieval.core`` (one tokenizer, one BM25, one cosine, one RRF); this module
adds the seed's retrieval behaviour around them, including its documented quirks.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.core import BM25Index, rrf_scores, tokenize
from retrieval.core import cosine as _cosine  # the seed's private `_cosine` is the project's one cosine
from retrieval.core.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.core.top_k import top_k_indices
from retrieval.zerda.config import AS_DOCUMENTED, ContextEngineConfig, check_rrf_order
from retrieval.zerda.models import ScoredChunk, chunk_metadata_dict, chunk_text

if TYPE_CHECKING:  # backends pull optional heavy deps (chromadb, faiss, pinecone): never import at runtime
    from retrieval.zerda.backends import VectorDatabaseBase
    from retrieval.zerda.models import DocumentChunk

__all__ = [
    "BM25Scorer",
    "HybridRetriever",
    "HybridRetrieverStrategy",
    "KeywordRetriever",
    "MetadataRetriever",
    "VectorRetriever",
]

logger = logging.getLogger(__name__)


class BM25Scorer:
    """Dependency-free BM25 over the seed tokenizer; a thin wrapper of ``retrieval.core.BM25Index``."""

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        self.k1 = k1
        self.b = b
        self._index = BM25Index(k1, b)

    @property
    def _corpus(self) -> list[list[str]]:
        return self._index.corpus

    @property
    def _idf(self) -> dict[str, float]:
        return self._index.idf

    @property
    def _avg_dl(self) -> float:
        return self._index.avg_dl

    def index(self, documents: list[str]) -> None:
        """Tokenize and index ``documents``, replacing ``_corpus``, ``_idf`` and ``_avg_dl``.

        An empty ``documents`` leaves an empty index (``score`` then returns ``[]``).
        """
        self._index = BM25Index(self.k1, self.b).fit([tokenize(text) for text in documents])

    def score(self, query: str, top_k: int = 20) -> list[tuple[int, float]]:
        """``[(doc_index, score), ...]`` best first (ties by lower index), at most ``top_k`` long."""
        index = self._index  # read once: a concurrent index() swaps the whole object
        return index.top_k(tokenize(query), top_k)


class HybridRetrieverStrategy(ABC):
    """What a single retrieval method offers (``HybridRetriever`` itself does not subclass it)."""

    @abstractmethod
    def retrieve(self, query: str, top_k: int, filters: dict[str, Any] | None = None) -> list[ScoredChunk]:
        """The best ``top_k`` chunks for ``query``, best first."""


# search() filter keyword of each built-in zerda backend (seed 000: "vector_db filter-kwarg resolution").
_BACKEND_FILTER_KWARG = {
    "ChromaVectorDatabase": "filters",
    "FAISSVectorDatabase": "doc_id_filter",
    "PineconeVectorDatabase": "filter_dict",
}
_FILTER_KWARG_CANDIDATES = ("filters", "filter_dict", "doc_id_filter", "where")


def _filter_kwarg_from_signature(search: Callable[..., Any]) -> str | None:
    """The first of ``_FILTER_KWARG_CANDIDATES`` that ``search`` accepts by name, else ``None``."""
    try:
        parameters = inspect.signature(search).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in _FILTER_KWARG_CANDIDATES if name in parameters), None)


def _resolve_vector_db_filter_kwargs(vector_db: Any, filters: dict[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments that carry ``filters`` into ``vector_db.search`` ({} for an unfiltered search).

    Known backends by class name; others by ``search``'s signature. ``doc_id_filter`` takes only
    ``filters["doc_id"]`` (FAISS filters by doc id only), so e.g. a category filter resolves to {}.
    A falsy doc id (``""``, ``None``, ``0``) is no filter either: the seed's "If filters is falsy [...]
    it returns {} (i.e. an unfiltered search)" read as zerda does, per filter value (issue 18).
    """
    if not filters:
        return {}
    backend = type(vector_db).__name__
    kwarg = _BACKEND_FILTER_KWARG.get(backend) or _filter_kwarg_from_signature(vector_db.search)
    if kwarg is None:
        logger.debug("%s.search has no filter keyword; ignoring filters %r", backend, filters)
        return {}
    if kwarg == "doc_id_filter":
        if not filters.get("doc_id"):
            logger.debug("%s filters by doc_id only; ignoring filters %r", backend, filters)
            return {}
        return {kwarg: filters["doc_id"]}
    return {kwarg: filters}


def _wrap_scored_pairs(pairs: Sequence[tuple[Any, float]]) -> list[ScoredChunk]:
    """Backend / adapter ``(chunk, score)`` pairs as ScoredChunks (vector and composite = score)."""
    return [ScoredChunk(chunk, vector_score=float(score), composite_score=float(score)) for chunk, score in pairs]


class VectorRetriever(HybridRetrieverStrategy):
    """Dense retrieval in one of three modes, checked per call: vector_db, adapter, in-memory."""

    def __init__(
        self,
        config: ContextEngineConfig,
        chunks: list[Any] | None = None,
        embeddings: list[np.ndarray] | None = None,
        embed_fn: Callable[[str], Any] | None = None,
        vector_store_adapter: Any | None = None,
        vector_db: VectorDatabaseBase | None = None,
    ):
        if chunks is not None and embeddings is not None and len(chunks) != len(embeddings):
            raise ValueError(
                f"VectorRetriever got {len(chunks)} chunks but {len(embeddings)} embeddings; "
                "pass one embedding per chunk"
            )
        self.cfg = config.retriever
        self._chunks: list[Any] = list(chunks or [])
        self._embeddings: list[np.ndarray] = list(embeddings) if embeddings is not None else []
        self._embed_fn = embed_fn
        self._adapter = vector_store_adapter
        self._vector_db = vector_db
        self._query_cache: dict[str, np.ndarray] = {}

    def index_vector_db(
        self,
        chunks: list[DocumentChunk],
        vector_db: VectorDatabaseBase,
        embeddings: np.ndarray | None = None,
    ) -> None:
        """Switch to native vector_db mode and add ``chunks`` to it; errors from ``add`` propagate."""
        logger.info("Indexing %d chunks into %s", len(chunks), type(vector_db).__name__)
        self._vector_db = vector_db
        if chunks:
            vector_db.add(chunks, embeddings=embeddings)
        logger.info("Indexed %d chunks; %s holds %d", len(chunks), type(vector_db).__name__, len(vector_db))

    def index_chunks(self, chunks: list[Any], embed_fn: Callable[[str], Any]) -> None:
        """In-memory mode: embed every chunk, one ``embed_fn(text)`` call each; errors propagate."""
        logger.info("Embedding %d chunks for in-memory vector retrieval", len(chunks))
        embeddings = [np.asarray(embed_fn(chunk_text(chunk))) for chunk in chunks]
        if embed_fn is not self._embed_fn:
            # Deviation for correctness: vectors cached from another embed_fn would be silently wrong.
            self._query_cache.clear()
        self._chunks, self._embed_fn, self._embeddings = list(chunks), embed_fn, embeddings
        logger.info("Embedded %d chunks", len(embeddings))

    def retrieve(self, query: str, top_k: int, filters: dict[str, Any] | None = None) -> list[ScoredChunk]:
        """Best ``top_k`` chunks; backend/adapter failures and query-embedding failures give ``[]``."""
        if self._vector_db is not None:
            return self._retrieve_vector_db(query, top_k, filters)
        if self._adapter is not None:
            return self._retrieve_adapter(query, top_k, filters)
        return self._retrieve_in_memory(query, top_k)

    def _retrieve_vector_db(self, query: str, top_k: int, filters: dict[str, Any] | None) -> list[ScoredChunk]:
        backend_kwargs = _resolve_vector_db_filter_kwargs(self._vector_db, filters)
        try:
            pairs = self._vector_db.search(
                query, top_k=top_k, score_threshold=self.cfg.min_vector_score or None, **backend_kwargs
            )
        except Exception as exc:  # seed: fail-safe, the hybrid keeps its other branches
            logger.error("vector_db search failed (%s): %s", type(self._vector_db).__name__, exc)
            return []
        return _wrap_scored_pairs(pairs)

    def _retrieve_adapter(self, query: str, top_k: int, filters: dict[str, Any] | None) -> list[ScoredChunk]:
        try:
            pairs = self._adapter.similarity_search_with_score(query, k=top_k, filter=filters)
        except Exception as exc:  # seed: fail-safe, same posture as vector_db mode
            logger.error("vector store adapter search failed (%s): %s", type(self._adapter).__name__, exc)
            return []
        return _wrap_scored_pairs(pairs)

    def _retrieve_in_memory(self, query: str, top_k: int) -> list[ScoredChunk]:
        # Seed: filters are accepted but never applied in in-memory mode.
        if not self._chunks or not self._embeddings or self._embed_fn is None:
            return []
        query_embedding = self._get_query_embedding(query)
        if query_embedding is None:
            return []
        hits = []
        for chunk, embedding in zip(self._chunks, self._embeddings, strict=True):
            similarity = _cosine(query_embedding, embedding)
            if similarity >= self.cfg.min_vector_score:
                hits.append(ScoredChunk(chunk, vector_score=similarity, composite_score=similarity))
        return [hits[i] for i in top_k_indices([hit.composite_score for hit in hits])][:top_k]

    def _get_query_embedding(self, query: str) -> np.ndarray | None:
        """Query vector from the unbounded ``_query_cache``; an ``embed_fn`` error logs a warning -> None."""
        cached = self._query_cache.get(query)
        if cached is not None:
            return cached
        try:
            embedding = np.asarray(self._embed_fn(query))
        except Exception as exc:  # seed: unlike index_chunks, query-time embedding errors are swallowed
            logger.warning("embedding the query failed: %s", exc)
            return None
        self._query_cache[query] = embedding
        return embedding


class KeywordRetriever(HybridRetrieverStrategy):
    """BM25 retrieval over the chunks' text, scores normalised to [0, 1] by the batch maximum."""

    def __init__(self, config: ContextEngineConfig, chunks: list[Any] | None = None):
        self.cfg = config.retriever
        self._bm25 = BM25Scorer()
        self._chunks: list[Any] = []
        if chunks:
            self._chunks = list(chunks)
            self._build_index()

    def index_chunks(self, chunks: list[Any]) -> None:
        """(Re)build the BM25 index over ``chunks``."""
        self._chunks = list(chunks)
        self._build_index()

    def _build_index(self) -> None:
        self._bm25.index([chunk_text(chunk) for chunk in self._chunks])

    def retrieve(self, query: str, top_k: int, filters: dict[str, Any] | None = None) -> list[ScoredChunk]:
        """Top ``top_k`` chunks; ``filters`` is ignored (BM25 knows no metadata).

        Fetches ``top_k * 2`` raw scores and divides by their maximum. When no document matches, the
        maximum is 0: the divisor becomes 1, so the hits keep score 0.0 and are returned as they are
        (the seed never drops zero-score hits, and a division by zero must not produce NaN).
        """
        raw = self._bm25.score(query, top_k=top_k * 2)
        if not raw:
            return []
        max_score = max(score for _, score in raw) or 1.0
        hits = []
        for index, score in raw[:top_k]:
            normalised = score / max_score
            hits.append(ScoredChunk(self._chunks[index], keyword_score=normalised, composite_score=normalised))
        return hits


class MetadataRetriever(HybridRetrieverStrategy):
    """Filter-only retrieval: every chunk whose metadata satisfies all filters scores 1.0."""

    def __init__(self, config: ContextEngineConfig, chunks: list[Any] | None = None):
        self.cfg = config.retriever
        self._chunks: list[Any] = list(chunks or [])

    def index_chunks(self, chunks: list[Any]) -> None:
        """Replace the chunks to filter."""
        self._chunks = list(chunks)

    @staticmethod
    def _matches_filters(metadata: dict[str, Any], filters: dict[str, Any]) -> bool:
        """All filters hold: missing/None value -> no match; list value -> IN; else equality."""
        for key, wanted in filters.items():
            actual = metadata.get(key)
            if actual is None:
                return False
            if isinstance(wanted, list):
                if actual not in wanted:
                    return False
            elif actual != wanted:
                return False
        return True

    def retrieve(self, query: str, top_k: int, filters: dict[str, Any] | None = None) -> list[ScoredChunk]:
        """Matching chunks in corpus order, at most ``top_k``; ``[]`` without chunks or filters."""
        if not self._chunks or not filters:
            return []
        matches = (
            chunk
            for chunk in self._chunks
            if self._matches_filters(chunk_metadata_dict(getattr(chunk, "metadata", None)), filters)
        )
        return [ScoredChunk(chunk, metadata_score=1.0, composite_score=1.0) for chunk in matches][:top_k]


class HybridRetriever:
    """Fuses vector, keyword and metadata retrieval: weighted scores plus an RRF bonus (seed 000)."""

    RRF_K = 60
    RRF_BONUS_WEIGHT = 0.20  # seed: "a flat 20%-of-the-max bonus weight, hardcoded, not configurable"

    def __init__(
        self,
        config: ContextEngineConfig,
        vector_retriever: VectorRetriever | None = None,
        keyword_retriever: KeywordRetriever | None = None,
        metadata_retriever: MetadataRetriever | None = None,
    ):
        self.cfg = config.retriever
        self._vec = vector_retriever
        self._kw = keyword_retriever
        self._meta = metadata_retriever

    def retrieve(
        self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None
    ) -> list[ScoredChunk]:
        """The seed's eight steps; ``cfg.rrf_order`` only decides whether step 6 runs before step 7."""
        rrf_order = check_rrf_order(self.cfg.rrf_order)  # the dataclass is mutable: re-check per call
        k = top_k or self.cfg.top_k  # step 1
        all_results: dict[str, ScoredChunk] = {}
        ranked_lists: list[list[ScoredChunk]] = []
        use_metadata = self.cfg.use_metadata and self._meta is not None and bool(filters)
        # Steps 2-4: vector and keyword fetch k*2; metadata fetches k (step 4 is "same merge pattern",
        # not the over-fetch of steps 2-3: issue 18); every branch merges by content hash.
        branches = (
            (self.cfg.use_vector and self._vec is not None, self._vec, filters, "vector_score", k * 2),
            (self.cfg.use_keyword and self._kw is not None, self._kw, None, "keyword_score", k * 2),
            (use_metadata, self._meta, filters, "metadata_score", k),
        )
        for enabled, retriever, branch_filters, score_field, fetch in branches:
            if enabled:
                hits = retriever.retrieve(query, fetch, branch_filters)
                ranked_lists.append(hits)
                self._merge(all_results, hits, score_field)
        if not all_results:  # step 5
            logger.warning("hybrid retrieval found nothing for query %r", query)
            return []
        chunks_list = list(all_results.values())
        if rrf_order == AS_DOCUMENTED:  # seed order: the step-7 assignment discards the step-6 bonus
            self._apply_rrf(chunks_list, ranked_lists)
            self._apply_weights(chunks_list)
        else:
            self._apply_weights(chunks_list)
            self._apply_rrf(chunks_list, ranked_lists)
        return [chunks_list[i] for i in top_k_indices([sc.composite_score for sc in chunks_list])][:k]  # step 8

    @staticmethod
    def _merge(all_results: dict[str, ScoredChunk], hits: list[ScoredChunk], score_field: str) -> None:
        """Add new chunks; for a hash already present merge only this branch's score into that object.

        A text repeated within one branch keeps its best score for that branch.
        """
        for hit in hits:
            existing = all_results.setdefault(hit.content_hash, hit)
            if existing is not hit:
                best = max(getattr(existing, score_field), getattr(hit, score_field))
                setattr(existing, score_field, best)

    def _apply_rrf(self, chunks_list: list[ScoredChunk], ranked_lists: list[list[ScoredChunk]]) -> None:
        """Step 6: add ``0.20 * rrf / max_rrf`` to each composite, rrf summed over the unmerged lists."""
        rrf, bonus = rrf_bonuses([[hit.content_hash for hit in hits] for hits in ranked_lists], self.RRF_K)
        for sc in chunks_list:
            sc.rrf_score = rrf.get(sc.content_hash, 0.0)
            sc.composite_score += bonus.get(sc.content_hash, 0.0)

    def _apply_weights(self, chunks_list: list[ScoredChunk]) -> None:
        """Step 7: the weighted composite, assigned with ``=`` (overwrites what came before)."""
        cfg = self.cfg
        weights = (cfg.vector_weight, cfg.keyword_weight, cfg.metadata_weight)
        for sc in chunks_list:
            sc.composite_score = weighted_sum((sc.vector_score, sc.keyword_score, sc.metadata_score), weights)


def rrf_bonuses(ranked_lists: Sequence[Sequence[Hashable]], k: int = HybridRetriever.RRF_K) -> tuple[dict, dict]:
    """Step 6 on ranked lists of keys: each key's raw RRF score and its bonus ``0.20 * rrf / max_rrf``.

    ``HybridRetriever`` and the harness's ``zerda`` fusion method both compute the bonus here.
    """
    rrf = rrf_scores([list(keys) for keys in ranked_lists], k=k)
    top = max(rrf.values(), default=0.0)
    if top <= 0:
        return rrf, dict.fromkeys(rrf, 0.0)
    return rrf, {key: HybridRetriever.RRF_BONUS_WEIGHT * value / top for key, value in rrf.items()}


def weighted_sum(scores: Sequence[float], weights: Sequence[float]) -> float:
    """Step 7's composite ``sum(score_i * weight_i)``, added in branch order (as the seed's expression)."""
    total = 0.0
    for score, weight in zip(scores, weights, strict=True):
        total += score * weight
    return total
