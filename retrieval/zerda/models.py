"""Chunk shapes and the scored-chunk wrapper shared by every zerda retriever (seed 000).

``ScoredChunk`` wraps any chunk object: zerda's own ``DocumentChunk`` (metadata is a ``ChunkMetadata``
dataclass), a LangChain ``Document`` (``page_content``, ``id``, dict metadata) or a hand-built object.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from retrieval.core.hashing import normalized_text_sha256


@dataclass
class ChunkMetadata:
    """Metadata of a zerda chunk (the ``zerda.chunks`` shape): a dataclass, not a dict."""

    doc_id: str = ""
    source: str = ""
    category: str | None = None
    chunk_index: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def chunk_metadata_dict(metadata: Any) -> dict[str, Any]:
    """Chunk metadata as a dict: a dict as is, a dataclass instance via ``asdict``, anything else ``{}``."""
    if isinstance(metadata, dict):
        return metadata
    if is_dataclass(metadata) and not isinstance(metadata, type):
        return asdict(metadata)
    return {}


def chunk_text(chunk: Any) -> str:
    """``chunk.text`` when non-empty, else ``chunk.page_content`` (LangChain), else ``""``.

    An empty ``text`` falls back too, as zerda does: seed 000 says only that both chunk shapes are
    understood ("in addition to any plain duck-typed chunk object"), not which field wins (issue 18).
    """
    return getattr(chunk, "text", None) or getattr(chunk, "page_content", None) or ""


@dataclass(frozen=True)
class DocumentChunk:
    """A piece of a document as zerda's chunkers produce it.

    Frozen, so its ``content_hash`` (the hybrid merge key) is computed once, when the chunk is made,
    and can never go stale; it takes no part in equality (it follows from ``text``).
    """

    text: str
    doc_id: str = ""
    chunk_id: str = ""
    metadata: ChunkMetadata = field(default_factory=ChunkMetadata)
    content_hash: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_hash", normalized_text_sha256(chunk_text(self)))


@dataclass
class ScoredChunk:
    """A chunk with the per-method scores the retrievers and ``HybridRetriever`` assign.

    ``rrf_score`` records the raw accumulated RRF score of the last hybrid fusion (0.0 before one),
    so the bonus stays observable even when ``rrf_order="as_documented"`` discards it.
    """

    chunk: Any
    vector_score: float = 0.0
    keyword_score: float = 0.0
    metadata_score: float = 0.0
    composite_score: float = 0.0
    rrf_score: float = 0.0

    @property
    def text(self) -> str:
        return chunk_text(self.chunk)

    @property
    def doc_id(self) -> Any:
        """``chunk.doc_id`` unless it is falsy (``""``, ``None``), else ``chunk.id``, else ``""`` (a chunk
        with neither attribute): upstream zerda 0.1.0's ``or`` (the seed is silent on it)."""
        return getattr(self.chunk, "doc_id", None) or getattr(self.chunk, "id", "")

    @property
    def metadata(self) -> dict[str, Any]:
        return chunk_metadata_dict(getattr(self.chunk, "metadata", None))

    @property
    def content_hash(self) -> str:
        """The chunk's merge key: a ``DocumentChunk`` carries it (computed once); any other chunk, which
        may be mutable, is hashed from its current text (memoised by text), so a stale hash is impossible."""
        chunk = self.chunk
        if type(chunk) is DocumentChunk:
            return chunk.content_hash
        return normalized_text_sha256(chunk_text(chunk))
