"""Seed 000's zerda retrieval API: BM25, vector, keyword, metadata and hybrid retrievers.

Importing this package needs only the core dependencies; vector backends (chromadb, faiss, pinecone)
are imported by ``retrieval.zerda.backends`` when a backend is built.
"""

from retrieval.zerda.config import RRF_ORDERS, ContextEngineConfig, RetrieverConfig
from retrieval.zerda.models import ChunkMetadata, DocumentChunk, ScoredChunk, chunk_metadata_dict
from retrieval.zerda.retriever import (
    BM25Scorer,
    HybridRetriever,
    HybridRetrieverStrategy,
    KeywordRetriever,
    MetadataRetriever,
    VectorRetriever,
)

__all__ = [
    "RRF_ORDERS",
    "BM25Scorer",
    "ChunkMetadata",
    "ContextEngineConfig",
    "DocumentChunk",
    "HybridRetriever",
    "HybridRetrieverStrategy",
    "KeywordRetriever",
    "MetadataRetriever",
    "RetrieverConfig",
    "ScoredChunk",
    "VectorRetriever",
    "chunk_metadata_dict",
]
