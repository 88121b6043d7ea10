"""Records the seed-004 API passes around: ``ContextItem``, ``QueryBundle``, ``MemoryEntry``, ``SourceType``.

All three are frozen pydantic models: change one with ``item.model_copy(update={...})``. Validation
failures raise ``pydantic.ValidationError``, a ``ValueError`` subclass.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
    """One stored memory; ``importance`` in [0, 1]; ``created_at`` drives the recency decay."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=_new_id)
    content: str
    user_id: str | None = None
    memory_type: str | None = None
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    created_at: datetime = Field(default_factory=_now)
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: list[float] | None = None
