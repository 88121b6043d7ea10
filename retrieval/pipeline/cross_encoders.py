"""A real cross-encoder behind seed 004's ``CrossEncoderReranker``: a local sentence-transformers folder.

No wheel on the package index ships a cross-encoder's weights, so the model is one the user brings: a
folder saved by ``CrossEncoder.save_pretrained`` (or a Hugging Face sequence-classification model with one
label), read strictly offline (``local_files_only``; no hub is reachable). A folder that is missing, or
whose ``config.json`` is not a sequence-classification model with one label (a two-label pair classifier
gives no single score), is a one-line ``RetrieverError`` naming it.

Scores are ``CrossEncoder.predict``'s, as the model gives them (its own activation, if its config names
one): the reranker orders by them, and ``metadata["raw_score"]`` keeps them (the item's ``score`` is
clamped to [0, 1], the seed's rule). The pairs of one query are scored in one ``predict`` call, in
batches of ``batch_size``; ``CrossEncoderReranker`` then reads each item's score from that call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from retrieval.pipeline.errors import RetrieverError
from retrieval.pipeline.models import ContextItem, QueryBundle
from retrieval.pipeline.rerankers import CrossEncoderReranker

DEFAULT_BATCH_SIZE = 32


def cross_encoder_folder(folder: str | Path) -> Path:
    """``folder`` if it holds a sequence-classification model (``config.json`` says so), else ``RetrieverError``."""
    path = Path(folder).expanduser()
    config_file = path / "config.json"
    if not path.is_dir():
        raise RetrieverError(f"cross-encoder folder {str(path)!r} not found; give the folder of a saved CrossEncoder")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise RetrieverError(
            f"{str(path)!r} holds no readable config.json, so it is not a cross-encoder; give the folder of a saved "
            "CrossEncoder (CrossEncoder.save_pretrained)"
        ) from None
    architectures = config.get("architectures") or [] if isinstance(config, dict) else []
    if not any(str(name).endswith("ForSequenceClassification") for name in architectures):
        raise RetrieverError(
            f"{str(path)!r} is not a cross-encoder (config.json architectures {architectures!r}, expected a "
            "...ForSequenceClassification model); give the folder of a saved CrossEncoder"
        )
    labels = _labels(config)
    if labels != 1:
        raise RetrieverError(
            f"{str(path)!r} is not a one-label cross-encoder (config.json gives its head {labels} labels: a pair "
            "classifier, with no single relevance score to rank by); give the folder of a one-label CrossEncoder"
        )
    return path


def _labels(config: dict) -> int:
    """The outputs of a sequence-classification head as transformers reads ``config.json``: one per ``id2label``
    entry, else ``num_labels``, else transformers' default of 2."""
    id2label = config.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return len(id2label)
    labels = config.get("num_labels", 2)
    return labels if isinstance(labels, int) else 2


def cross_encoder_class() -> type:
    """sentence-transformers' ``CrossEncoder`` (imported on first use: a timer can leave the import out)."""
    try:
        from sentence_transformers import CrossEncoder
    except ImportError:
        raise RetrieverError(
            "the cross-encoder reranker needs sentence-transformers; pip install zerda-eval[torch]"
        ) from None
    return CrossEncoder


@contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers' weight-loading progress bar off while a model loads (the harness prints its own), then
    back as it was."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


class LocalCrossEncoder:
    """A sentence-transformers ``CrossEncoder`` loaded from a local folder on the CPU, never from a hub."""

    def __init__(self, folder: str | Path, batch_size: int = DEFAULT_BATCH_SIZE):
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise RetrieverError(f"cross-encoder batch_size must be an integer >= 1, got {batch_size!r}")
        self.path = cross_encoder_folder(folder)
        self.batch_size = batch_size
        cross_encoder = cross_encoder_class()
        try:
            with _quiet_loading():
                self._model = cross_encoder(str(self.path), device="cpu", local_files_only=True)
        except Exception as exc:  # a broken or partial folder: what the library said, on one line
            message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise RetrieverError(
                f"sentence-transformers cannot load the cross-encoder {str(self.path)!r}: {message}"
            ) from exc

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """``CrossEncoder.predict`` of the ``(query, passage)`` pairs, in batches of ``batch_size``."""
        if not pairs:
            return []
        scores = self._model.predict(
            [list(pair) for pair in pairs], batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(score) for score in scores]

    def rerank(self, query: QueryBundle, items: list[ContextItem], top_k: int) -> list[ContextItem]:
        """seed 004's ``CrossEncoderReranker`` over ``items`` with this model's scores, best first, ``top_k`` kept."""
        scores = self.predict([(query.query_str, item.content) for item in items])
        by_content = dict(zip((item.content for item in items), scores, strict=True))
        reranker = CrossEncoderReranker(lambda _query, content: by_content[content], top_k=top_k)
        return reranker.rerank(query, items, top_k)
