"""Records the seed-004 API passes around: ``ContextItem``, ``QueryBundle``, ``MemoryEntry``, ``SourceType``.

All three are frozen pydantic models: change one with ``item.model_copy(update={...})``. Validation
failures raise ``pydantic.ValidationError``, a ``ValueError`` subclass.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval.core.hashing import memory_md5


def _new_id() -> str:
    return str(uuid.uuid4())


def _now() -> datetime:
    return datetime.now(UTC)


class SourceType(StrEnum):
    """Where a piece of context came from."""

    RETRIEVAL = "retrieval"
    MEMORY = "memory"
    SYSTEM = "system"
    USER = "user"
    TOOL = "tool"
    CONVERSATION = "conversation"


class ContextItem(BaseModel):
    """One retrieved piece of context; immutable, score in [0, 1], priority in 1..10."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=_new_id)
    content: str
    source: SourceType = SourceType.RETRIEVAL
    score: float = Field(default=0.0, ge=0.0, le=1.0)
    priority: int = Field(default=5, ge=1, le=10)
    token_count: int = Field(default=0, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=_now)


class QueryBundle(BaseModel):
    """A query: its text, an optional precomputed embedding, free metadata (routing keys, filters)."""

    model_config = ConfigDict(frozen=True)

    query_str: str
    embedding: list[float] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryEntry(BaseModel):
    """One stored memory, with the documented library's fields (seed 004 names the class only; issue 18).

    ``relevance_score`` (0-1, default 0.5) is the importance signal of ``ScoredMemoryRetriever``;
    ``last_accessed`` drives its recency; ``content_hash`` is computed from ``content`` when not given
    (``retrieval.core.hashing.memory_md5``; ``model_copy`` does not recompute it, as pydantic does not validate copies).
    An unknown field (e.g. the former ``importance``) is a ``ValidationError``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=_new_id)
    content: str
    relevance_score: float = Field(default=0.5, ge=0.0, le=1.0)
    access_count: int = Field(default=0, ge=0)
    last_accessed: datetime = Field(default_factory=_now)
    created_at: datetime = Field(default_factory=_now)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    memory_type: str = "semantic"
    user_id: str | None = None
    session_id: str | None = None
    expires_at: datetime | None = None
    updated_at: datetime = Field(default_factory=_now)
    content_hash: str = ""

    @model_validator(mode="after")
    def _fill_content_hash(self) -> MemoryEntry:
        if not self.content_hash:
            object.__setattr__(self, "content_hash", memory_md5(self.content))  # frozen model
        return self
