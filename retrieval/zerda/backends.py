"""Real vector databases behind zerda's ``vector_db`` mode: Chroma, FAISS and Pinecone (seed 000).

Every backend embeds with the embedder it is built with (an ``Embedder`` or a text -> vector
callable) unless ``add`` is given precomputed vectors, stores unit vectors and returns
``[(chunk, cosine similarity), ...]`` best first. Their ``search`` filter keywords differ, as in the
seed: Chroma ``filters`` (metadata), FAISS ``doc_id_filter`` (doc id only), Pinecone ``filter_dict``.
chromadb, faiss and pinecone are imported only when a backend needs them.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings.base import finish_embeddings
from retrieval.zerda.models import ChunkMetadata, DocumentChunk, chunk_metadata_dict, chunk_text

ScoredPairs = list[tuple[Any, float]]
_SCALARS = (str, int, float, bool)


@dataclass
class StoredChunk:
    """A chunk read back from a database that stores text and flat metadata (Chroma): metadata is a dict."""

    text: str
    doc_id: str
    chunk_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


def chunk_doc_id(chunk: Any) -> str:
    """``chunk.doc_id``, else its metadata's ``doc_id``, else ``chunk.id``, else ``""``."""
    doc_id = getattr(chunk, "doc_id", None) or chunk_metadata_dict(getattr(chunk, "metadata", None)).get("doc_id")
    return str(doc_id or getattr(chunk, "id", None) or "")


def chunk_key(chunk: Any, position: int) -> str:
    """A database id: ``chunk_id`` or ``id`` when set, else ``"<doc_id>#<position in the store>"``."""
    key = getattr(chunk, "chunk_id", None) or getattr(chunk, "id", None)
    return str(key) if key else f"{chunk_doc_id(chunk)}#{position}"


def flat_metadata(chunk: Any) -> dict[str, Any]:
    """Chunk metadata as the flat scalar dict Chroma and Pinecone accept, with ``doc_id`` always set.

    A nested dict (``ChunkMetadata.extra``) is merged in without overriding top-level keys; ``None`` is
    dropped; other non-scalars (lists, objects) are stored as JSON text.
    """
    source = dict(chunk_metadata_dict(getattr(chunk, "metadata", None)))
    for key, value in list(source.items()):
        if isinstance(value, dict):
            del source[key]
            for inner_key, inner_value in value.items():
                source.setdefault(inner_key, inner_value)
    flat = {"doc_id": chunk_doc_id(chunk)}
    for key, value in source.items():
        if value is None or key == "doc_id":  # doc_id: the chunk's own, set above
            continue
        flat[str(key)] = value if isinstance(value, _SCALARS) else json.dumps(value, default=str)
    return flat


def metadata_where(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """zerda filters as a Chroma ``where`` / Pinecone ``filter`` (both use MongoDB-style operators).

    ``{"k": v}`` means equality, ``{"k": [a, b]}`` means IN (as ``MetadataRetriever``), an operator dict
    (``{"k": {"$gte": 3}}``) passes through, several keys are ANDed. A filter whose top-level keys are
    operators (``{"$or": [...]}``) is already in backend syntax and is returned unchanged.
    """
    if not filters:
        return None
    if any(str(key).startswith("$") for key in filters):
        return filters
    clauses = []
    for key, value in filters.items():
        if isinstance(value, list | tuple | set):
            clauses.append({key: {"$in": list(value)}})
        elif isinstance(value, dict):
            clauses.append({key: value})
        else:
            clauses.append({key: {"$eq": value}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _batch_embed_fn(embedder: Any) -> Callable[[list[str]], np.ndarray]:
    """texts -> matrix from an ``Embedder`` (batched) or a text -> vector callable (one call per text)."""
    if hasattr(embedder, "embed") and hasattr(embedder, "dim"):
        return embedder.embed
    if callable(embedder):
        return lambda texts: np.stack([np.asarray(embedder(text), dtype=np.float32) for text in texts])
    raise TypeError(f"embedder must be an Embedder or a text -> vector callable, got {type(embedder).__name__}")


class VectorDatabaseBase(ABC):
    """zerda.vector_database's base class: ``add`` chunks, ``search`` by query text, ``len``."""

    def __init__(self, embedder: Any):
        self._embed_texts = _batch_embed_fn(embedder)
        self.dim: int | None = getattr(embedder, "dim", None)

    @abstractmethod
    def add(self, chunks: Sequence[Any], embeddings: Any | None = None) -> None:
        """Store ``chunks``; vectors come from ``embeddings`` (one row per chunk) or the embedder."""

    @abstractmethod
    def search(self, query: str, top_k: int = 5, score_threshold: float | None = None, **filters: Any) -> ScoredPairs:
        """``[(chunk, cosine), ...]`` best first, at most ``top_k``, none below ``score_threshold``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored chunks."""

    def _chunk_vectors(self, chunks: Sequence[Any], embeddings: Any | None) -> np.ndarray:
        """Unit float32 vectors for ``chunks``, checked for count, dimension and finiteness."""
        raw = self._embed_texts([chunk_text(chunk) for chunk in chunks]) if embeddings is None else embeddings
        return self._unit_rows(raw, len(chunks))

    def _query_vector(self, query: str) -> np.ndarray:
        return self._unit_rows(self._embed_texts([query]), 1)[0]

    def _unit_rows(self, raw: Any, n_rows: int) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.float32)
        if self.dim is None and raw.ndim == 2:
            self.dim = raw.shape[1]
        return finish_embeddings(raw, n_rows, self.dim or -1, f"{type(self).__name__} vectors")


def _keep(score: float, score_threshold: float | None) -> bool:
    return score_threshold is None or score >= score_threshold


class ChromaVectorDatabase(VectorDatabaseBase):
    """An embedded, persistent Chroma collection in ``path`` (cosine space, explicit embeddings only).

    The collection is created with ``embedding_function=None``: Chroma's default embedding function
    downloads a model, so every vector, stored or queried, is computed by our embedder.
    Telemetry is off. Search returns ``StoredChunk`` objects whose ``metadata`` is a dict.
    """

    def __init__(self, embedder: Any, path: str | Path, collection_name: str = "zerda-chunks"):
        super().__init__(embedder)
        import chromadb
        from chromadb.config import Settings

        self.path = Path(path)
        self._client = chromadb.PersistentClient(path=str(self.path), settings=Settings(anonymized_telemetry=False))
        self._collection = self._client.get_or_create_collection(
            collection_name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )

    def add(self, chunks: Sequence[Any], embeddings: Any | None = None) -> None:
        if not chunks:
            return
        vectors = self._chunk_vectors(chunks, embeddings)
        start = len(self)
        self._collection.add(
            ids=[chunk_key(chunk, start + i) for i, chunk in enumerate(chunks)],
            embeddings=vectors,
            documents=[chunk_text(chunk) for chunk in chunks],
            metadatas=[flat_metadata(chunk) for chunk in chunks],
        )

    def search(
        self,
        query: str,
        top_k: int = 5,
        score_threshold: float | None = None,
        filters: dict[str, Any] | None = None,
    ) -> ScoredPairs:
        """Nearest chunks by cosine (score = 1 - Chroma's cosine distance), metadata ``filters`` applied."""
        if top_k <= 0 or len(self) == 0:
            return []
        result = self._collection.query(
            query_embeddings=[self._query_vector(query)],
            n_results=top_k,
            where=metadata_where(filters),
            include=["documents", "metadatas", "distances"],
        )
        pairs = []
        for key, text, metadata, distance in zip(
            result["ids"][0],
            result["documents"][0],
            result["metadatas"][0],
            result["distances"][0],
            strict=True,
        ):
            score = 1.0 - float(distance)
            if _keep(score, score_threshold):
                metadata = dict(metadata or {})
                pairs.append((StoredChunk(text or "", str(metadata.get("doc_id", "")), key, metadata), score))
        return pairs

    def __len__(self) -> int:
        return self._collection.count()


class FAISSVectorDatabase(VectorDatabaseBase):
    """FAISS inner product over unit vectors (= cosine): exact ``IndexFlatIP`` or ``index_type="hnsw"``.

    Chunks are kept in memory and returned as stored. The only filter is ``doc_id_filter`` (a doc id
    or a list of them); FAISS has no metadata filter, as the seed documents.
    """

    INDEX_TYPES = ("flat", "hnsw")

    def __init__(self, embedder: Any, index_type: str = "flat", hnsw_m: int = 32, ef_search: int = 64):
        if index_type not in self.INDEX_TYPES:
            raise ValueError(f"FAISSVectorDatabase index_type={index_type!r}; use one of {self.INDEX_TYPES}")
        super().__init__(embedder)
        self.index_type = index_type
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self._index = None
        self._chunks: list[Any] = []

    def add(self, chunks: Sequence[Any], embeddings: Any | None = None) -> None:
        if not chunks:
            return
        vectors = self._chunk_vectors(chunks, embeddings)
        if self._index is None:
            self._index = self._new_index(vectors.shape[1])
        self._index.add(vectors)
        self._chunks.extend(chunks)

    def _new_index(self, dim: int):
        import faiss

        if self.index_type == "flat":
            return faiss.IndexFlatIP(dim)
        return faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)

    def search(
        self,
        query: str,
        top_k: int = 5,
        score_threshold: float | None = None,
        doc_id_filter: str | Sequence[str] | None = None,
    ) -> ScoredPairs:
        """Nearest chunks by cosine; with ``doc_id_filter`` only chunks of those documents are searched."""
        if top_k <= 0 or not self._chunks:
            return []
        import faiss

        options: dict[str, Any] = {"efSearch": self.ef_search} if self.index_type == "hnsw" else {}
        if doc_id_filter is not None:
            wanted = {doc_id_filter} if isinstance(doc_id_filter, str) else set(doc_id_filter)
            positions = [i for i, chunk in enumerate(self._chunks) if chunk_doc_id(chunk) in wanted]
            if not positions:
                return []
            options["sel"] = faiss.IDSelectorBatch(np.asarray(positions, dtype=np.int64))
        params_class = faiss.SearchParametersHNSW if self.index_type == "hnsw" else faiss.SearchParameters
        params = params_class(**options) if options else None
        query_vector = self._query_vector(query)[None, :]
        scores, positions = self._index.search(query_vector, min(top_k, len(self._chunks)), params=params)
        return [
            (self._chunks[position], float(score))
            for score, position in zip(scores[0], positions[0], strict=True)
            if position >= 0 and _keep(float(score), score_threshold)
        ]

    def __len__(self) -> int:
        return len(self._chunks)


class PineconeVectorDatabase(VectorDatabaseBase):
    """A Pinecone index (cosine metric) through the official client, connected on first use.

    The API key comes from ``api_key`` or ``PINECONE_API_KEY``; ``client_options`` go to
    ``pinecone.Pinecone`` (e.g. ``retry_config``). Text is stored in the ``text`` metadata field, and
    search returns ``DocumentChunk`` objects with ``ChunkMetadata``.
    """

    UPSERT_BATCH = 100

    def __init__(
        self,
        embedder: Any,
        index_name: str = "",
        host: str = "",
        api_key: str | None = None,
        namespace: str = "",
        client_options: dict[str, Any] | None = None,
    ):
        if not index_name and not host:
            raise ValueError("PineconeVectorDatabase needs index_name= or host= to find the index")
        super().__init__(embedder)
        self.index_name = index_name
        self.host = host
        self.namespace = namespace
        self._api_key = api_key
        self._client_options = dict(client_options or {})
        self._index = None

    def _pinecone_index(self):
        if self._index is None:
            from pinecone import Pinecone

            api_key = self._api_key or os.environ.get("PINECONE_API_KEY")
            if not api_key:
                raise RuntimeError("PineconeVectorDatabase has no API key; pass api_key= or set PINECONE_API_KEY")
            client = Pinecone(api_key=api_key, **self._client_options)
            self._index = client.Index(name=self.index_name, host=self.host)
        return self._index

    def add(self, chunks: Sequence[Any], embeddings: Any | None = None) -> None:
        if not chunks:
            return
        vectors = self._chunk_vectors(chunks, embeddings)
        start = len(self)
        records = [
            {
                "id": chunk_key(chunk, start + i),
                "values": vector.tolist(),
                "metadata": {**flat_metadata(chunk), "text": chunk_text(chunk)},
            }
            for i, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
        ]
        index = self._pinecone_index()
        for begin in range(0, len(records), self.UPSERT_BATCH):
            index.upsert(vectors=records[begin : begin + self.UPSERT_BATCH], namespace=self.namespace)

    def search(
        self,
        query: str,
        top_k: int = 5,
        score_threshold: float | None = None,
        filter_dict: dict[str, Any] | None = None,
    ) -> ScoredPairs:
        """Nearest chunks by the index's cosine score, ``filter_dict`` translated by ``metadata_where``."""
        if top_k <= 0:
            return []
        query_vector = self._query_vector(query)
        response = self._pinecone_index().query(
            vector=query_vector.tolist(),
            top_k=top_k,
            filter=metadata_where(filter_dict),
            include_metadata=True,
            namespace=self.namespace,
        )
        return [
            (_document_chunk(match.id, match.metadata or {}), float(match.score))
            for match in response.matches
            if _keep(float(match.score), score_threshold)
        ]

    def __len__(self) -> int:
        namespaces = self._pinecone_index().describe_index_stats().namespaces or {}
        # Pinecone reports the default namespace as "" or, in newer API versions, "__default__".
        names = (self.namespace,) if self.namespace else ("", "__default__")
        return sum(int(namespaces[name].vector_count) for name in names if name in namespaces)


_CHUNK_METADATA_FIELDS = {f.name for f in fields(ChunkMetadata)} - {"extra"}


def _document_chunk(key: str, metadata: dict[str, Any]) -> DocumentChunk:
    """Rebuild a zerda ``DocumentChunk`` from Pinecone's flat metadata (unknown keys go to ``extra``)."""
    metadata = dict(metadata)
    text = str(metadata.pop("text", ""))
    known = {name: metadata.pop(name) for name in _CHUNK_METADATA_FIELDS if name in metadata}
    if "chunk_index" in known:
        known["chunk_index"] = int(known["chunk_index"])  # Pinecone returns numbers as floats
    chunk_metadata = ChunkMetadata(**known, extra=metadata)
    return DocumentChunk(text=text, doc_id=chunk_metadata.doc_id, chunk_id=key, metadata=chunk_metadata)
