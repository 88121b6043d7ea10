"""The seed-004 retrieval API: context items, retrievers, rerankers, routing, late interaction, memory.

Shares ``retrieval.core`` with the zerda API: one tokenizer, one cosine, one RRF.
"""

from retrieval.pipeline.async_ import (
    AsyncCohereReranker,
    AsyncCrossEncoderReranker,
    AsyncDenseRetriever,
    AsyncHybridRetriever,
)
from retrieval.pipeline.cross_modal import CrossModalEncoder, SharedSpaceRetriever
from retrieval.pipeline.dense import DenseRetriever
from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.fusion import rrf_fuse
from retrieval.pipeline.hybrid import HybridRetriever
from retrieval.pipeline.late_interaction import LateInteractionRetriever, LateInteractionScorer, MaxSimScorer
from retrieval.pipeline.memory import ExponentialDecay, MemoryRetrieverAdapter, ScoredMemoryRetriever
from retrieval.pipeline.models import ContextItem, MemoryEntry, QueryBundle, SourceType
from retrieval.pipeline.protocols import (
    AsyncReranker,
    AsyncRetriever,
    ContextStore,
    MemoryDecay,
    MemoryEntryStore,
    Reranker,
    Retriever,
    Tokenizer,
    TokenLevelEncoder,
    VectorStore,
)
from retrieval.pipeline.rerankers import (
    CohereReranker,
    CrossEncoderReranker,
    FlashRankReranker,
    RerankerPipeline,
    RoundRobinReranker,
    ScoreReranker,
)
from retrieval.pipeline.routing import CallbackRouter, KeywordRouter, MetadataRouter, RoutedRetriever
from retrieval.pipeline.sparse import SparseRetriever
from retrieval.pipeline.stores import InMemoryContextStore, InMemoryEntryStore, InMemoryVectorStore
from retrieval.pipeline.tokens import RegexTokenCounter

__all__ = [
    "AsyncCohereReranker",
    "AsyncCrossEncoderReranker",
    "AsyncDenseRetriever",
    "AsyncHybridRetriever",
    "AsyncReranker",
    "AsyncRetriever",
    "CallbackRouter",
    "CohereReranker",
    "ContextItem",
    "ContextStore",
    "CrossEncoderReranker",
    "CrossModalEncoder",
    "DenseRetriever",
    "ExponentialDecay",
    "FlashRankReranker",
    "HybridRetriever",
    "InMemoryContextStore",
    "InMemoryEntryStore",
    "InMemoryVectorStore",
    "KeywordRouter",
    "LateInteractionRetriever",
    "LateInteractionScorer",
    "MaxSimScorer",
    "MemoryDecay",
    "MemoryEntry",
    "MemoryEntryStore",
    "MemoryRetrieverAdapter",
    "MetadataRouter",
    "QueryBundle",
    "RegexTokenCounter",
    "Reranker",
    "RerankerPipeline",
    "Retriever",
    "RetrieverError",
    "RoundRobinReranker",
    "RoutedRetriever",
    "ScoreReranker",
    "ScoredMemoryRetriever",
    "SharedSpaceRetriever",
    "SourceType",
    "SparseRetriever",
    "TokenLevelEncoder",
    "Tokenizer",
    "VectorStore",
    "rrf_fuse",
]
