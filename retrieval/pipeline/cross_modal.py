"""Cross-modal retrieval: encoders per modality into one shared vector space."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.scoring import cut, rescored
from retrieval.pipeline.stores import InMemoryVectorStore, SimilarityFn


class CrossModalEncoder:
    """Named encoders (``"text"``, ``"image"``, ...) that map content into one shared space."""

    def __init__(self, encoders: dict[str, Callable[[Any], list[float]]]) -> None:
        self.encoders = dict(encoders)

    @property
    def modalities(self) -> list[str]:
        """Registered modality names, sorted."""
        return sorted(self.encoders)

    def encode(self, content: Any, modality: str) -> list[float]:
        """Encode ``content`` with the ``modality`` encoder; unknown modality -> ``ValueError``."""
        if modality not in self.encoders:
            raise ValueError(f"unknown modality {modality!r}; known modalities: {', '.join(self.modalities)}")
        return self.encoders[modality](content)


class SharedSpaceRetriever:
    """Indexes items of any modality and retrieves them for a query of ``query_modality``.

    ``index``: each item's content is encoded with ``modality``, or when that is ``None`` with its
    ``metadata["modality"]`` (default ``"text"``). ``retrieve``: ``query.embedding`` if set, else the
    query text encoded with ``query_modality``. Similarity (default ``retrieval.core.cosine``) is
    clipped to [0, 1] as ``score``; raw value in ``metadata["similarity"]``, modality in
    ``metadata["modality"]``.
    """

    def __init__(
        self,
        encoder: CrossModalEncoder,
        query_modality: str = "text",
        similarity_fn: SimilarityFn | None = None,
    ) -> None:
        self.encoder = encoder
        self.query_modality = query_modality
        self.similarity_fn = similarity_fn
        self._vectors = InMemoryVectorStore(similarity_fn)
        self._items: dict[str, ContextItem] = {}

    def index(self, items: list[ContextItem], modality: str | None = None) -> None:
        for item in items:
            item_modality = modality or item.metadata.get("modality", "text")
            self._vectors.add_embedding(item.id, self.encoder.encode(item.content, item_modality))
            self._items[item.id] = rescored(item, item.score, modality=item_modality)

    def retrieve(self, query: QueryBundle, top_k: int = 10) -> list[ContextItem]:
        embedding = query.embedding
        if embedding is None:
            embedding = self.encoder.encode(query.query_str, self.query_modality)
        return cut(
            [
                rescored(self._items[i], s, similarity=s, retrieval_method="shared_space")
                for i, s in self._vectors.search(embedding, top_k)
            ],
            top_k,
        )
