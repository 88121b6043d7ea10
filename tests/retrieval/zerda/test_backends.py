"""Real vector backends (Chroma, FAISS, Pinecone) behind zerda's vector_db mode, and the LangChain mode.

Scores are checked against ``retrieval.core.cosine_matrix`` brute force on the same vectors; filters
against the seed's documented semantics (Chroma filters metadata, FAISS only doc ids, a category
filter on FAISS is silently ignored).
"""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from retrieval.core import cosine_matrix
from retrieval.embeddings import EmbedderError
from retrieval.zerda import ChunkMetadata, ContextEngineConfig, DocumentChunk, VectorRetriever
from retrieval.zerda.backends import (
    ChromaVectorDatabase,
    FAISSVectorDatabase,
    PineconeVectorDatabase,
    StoredChunk,
    flat_metadata,
    metadata_where,
)
from retrieval.zerda.retriever import _resolve_vector_db_filter_kwargs

DIM = 16
N_DOCS = 60
CATEGORIES = ("legal", "finance", "medical")


class TableEmbedder:
    """A substitute model: each text maps to a fixed random vector (stands in for a real embedder)."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.calls = 0

    def __call__(self, text: str) -> np.ndarray:
        self.calls += 1
        return self.table[text]


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(7)
    doc_vectors = rng.normal(size=(N_DOCS, DIM)).astype(np.float32)
    query_vectors = rng.normal(size=(5, DIM)).astype(np.float32)
    chunks = [
        DocumentChunk(
            text=f"document number {i}",
            doc_id=f"d{i}",
            chunk_id=f"d{i}-c0",
            metadata=ChunkMetadata(doc_id=f"d{i}", category=CATEGORIES[i % 3], extra={"year": 2020 + i % 5}),
        )
        for i in range(N_DOCS)
    ]
    queries = [f"query number {j}" for j in range(5)]
    table = {c.text: v for c, v in zip(chunks, doc_vectors, strict=True)}
    table.update(zip(queries, query_vectors, strict=True))
    return {
        "chunks": chunks,
        "doc_vectors": doc_vectors,
        "queries": queries,
        "query_vectors": query_vectors,
        "table": table,
    }


def brute_force(corpus, query_index: int, k: int, keep=lambda i: True) -> list[tuple[str, float]]:
    """Reference ranking: the project's cosine over the same vectors, restricted to ``keep``."""
    sims = cosine_matrix(corpus["query_vectors"][query_index], corpus["doc_vectors"])[0]
    order = [i for i in np.argsort(-sims, kind="stable") if keep(i)]
    return [(f"d{i}", float(sims[i])) for i in order[:k]]


def assert_same_ranking(pairs, expected, atol=1e-5):
    assert [chunk.doc_id for chunk, _ in pairs] == [doc_id for doc_id, _ in expected]
    np.testing.assert_allclose([s for _, s in pairs], [s for _, s in expected], atol=atol)


# ---------------------------------------------------------------------------------------------- FAISS


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_faiss_matches_brute_force_cosine(corpus, index_type):
    db = FAISSVectorDatabase(TableEmbedder(corpus["table"]), index_type=index_type)
    db.add(corpus["chunks"], embeddings=corpus["doc_vectors"])
    assert len(db) == N_DOCS
    for q, query in enumerate(corpus["queries"]):
        pairs = db.search(query, top_k=10)
        assert_same_ranking(pairs, brute_force(corpus, q, 10))
        assert pairs[0][0] is corpus["chunks"][int(pairs[0][0].doc_id[1:])]  # the stored chunk itself


def test_faiss_embeds_with_its_embedder_when_no_vectors_given(corpus):
    embedder = TableEmbedder(corpus["table"])
    db = FAISSVectorDatabase(embedder)
    db.add(corpus["chunks"][:30])
    db.add(corpus["chunks"][30:])
    assert embedder.calls == N_DOCS
    assert_same_ranking(db.search(corpus["queries"][0], top_k=5), brute_force(corpus, 0, 5))


def test_faiss_doc_id_filter_and_threshold(corpus):
    db = FAISSVectorDatabase(TableEmbedder(corpus["table"]))
    db.add(corpus["chunks"], embeddings=corpus["doc_vectors"])
    query = corpus["queries"][1]
    assert [c.doc_id for c, _ in db.search(query, top_k=5, doc_id_filter="d7")] == ["d7"]
    wanted = {"d3", "d10", "d44"}
    pairs = db.search(query, top_k=5, doc_id_filter=sorted(wanted))
    assert_same_ranking(pairs, brute_force(corpus, 1, 5, keep=lambda i: f"d{i}" in wanted))
    assert db.search(query, top_k=5, doc_id_filter="missing") == []
    expected = [(d, s) for d, s in brute_force(corpus, 1, N_DOCS) if s >= 0.2]
    assert_same_ranking(db.search(query, top_k=N_DOCS, score_threshold=0.2), expected)


def test_faiss_through_vector_retriever_category_filter_is_silently_ignored(corpus):
    db = FAISSVectorDatabase(TableEmbedder(corpus["table"]))
    retriever = VectorRetriever(ContextEngineConfig())
    retriever.index_vector_db(corpus["chunks"], db, embeddings=corpus["doc_vectors"])
    query = corpus["queries"][2]
    unfiltered = [sc.doc_id for sc in retriever.retrieve(query, top_k=8)]
    by_category = [sc.doc_id for sc in retriever.retrieve(query, top_k=8, filters={"category": "legal"})]
    assert by_category == unfiltered  # seed: resolves to {} and searches everything
    assert {CATEGORIES[int(d[1:]) % 3] for d in by_category} != {"legal"}
    by_doc = retriever.retrieve(query, top_k=8, filters={"doc_id": "d5"})
    assert [sc.doc_id for sc in by_doc] == ["d5"]


def test_faiss_rejects_wrong_dimension_and_unknown_index_type(corpus):
    db = FAISSVectorDatabase(TableEmbedder(corpus["table"]))
    db.add(corpus["chunks"][:2], embeddings=corpus["doc_vectors"][:2])
    with pytest.raises(EmbedderError, match=r"shape \(1, 8\).*expected \(1, 16\)"):
        db.add(corpus["chunks"][2:3], embeddings=np.ones((1, 8)))
    with pytest.raises(EmbedderError, match="NaN"):
        db.add(corpus["chunks"][2:3], embeddings=np.full((1, DIM), np.nan))
    with pytest.raises(ValueError, match="index_type"):
        FAISSVectorDatabase(TableEmbedder({}), index_type="ivf")


# --------------------------------------------------------------------------------------------- Chroma


@pytest.fixture()
def chroma(corpus, tmp_path):
    db = ChromaVectorDatabase(TableEmbedder(corpus["table"]), tmp_path / "chroma")
    db.add(corpus["chunks"], embeddings=corpus["doc_vectors"])
    return db


def test_chroma_matches_brute_force_cosine(corpus, chroma):
    assert len(chroma) == N_DOCS
    for q, query in enumerate(corpus["queries"]):
        assert_same_ranking(chroma.search(query, top_k=10), brute_force(corpus, q, 10))
    chunk, _ = chroma.search(corpus["queries"][0], top_k=1)[0]
    assert isinstance(chunk, StoredChunk) and isinstance(chunk.metadata, dict)
    i = int(chunk.doc_id[1:])
    assert chunk.text == f"document number {i}" and chunk.chunk_id == f"d{i}-c0"
    assert chunk.metadata == {
        "doc_id": f"d{i}",
        "source": "",
        "category": CATEGORIES[i % 3],
        "chunk_index": 0,
        "year": 2020 + i % 5,
    }


def test_chroma_metadata_filters_really_filter(corpus, chroma):
    query = corpus["queries"][3]
    pairs = chroma.search(query, top_k=5, filters={"category": "legal"})
    assert_same_ranking(pairs, brute_force(corpus, 3, 5, keep=lambda i: i % 3 == 0))
    pairs = chroma.search(query, top_k=50, filters={"category": ["legal", "medical"], "year": 2021})
    keep = lambda i: CATEGORIES[i % 3] in ("legal", "medical") and 2020 + i % 5 == 2021  # noqa: E731
    expected = brute_force(corpus, 3, 50, keep=keep)
    assert 0 < len(expected) < 50
    assert_same_ranking(pairs, expected)
    assert chroma.search(query, top_k=5, filters={"category": "sports"}) == []


def test_chroma_through_vector_retriever_with_filters(corpus, chroma):
    retriever = VectorRetriever(ContextEngineConfig(), vector_db=chroma)
    hits = retriever.retrieve(corpus["queries"][4], top_k=6, filters={"category": "finance"})
    expected = brute_force(corpus, 4, 6, keep=lambda i: i % 3 == 1)
    assert [sc.doc_id for sc in hits] == [d for d, _ in expected]
    assert all(sc.metadata["category"] == "finance" for sc in hits)
    np.testing.assert_allclose([sc.vector_score for sc in hits], [s for _, s in expected], atol=1e-5)


def test_chroma_persists_across_reopen(corpus, chroma, tmp_path):
    before = chroma.search(corpus["queries"][0], top_k=7, filters={"category": "medical"})
    embedder = TableEmbedder(corpus["table"])
    reopened = ChromaVectorDatabase(embedder, tmp_path / "chroma")
    assert len(reopened) == N_DOCS
    after = reopened.search(corpus["queries"][0], top_k=7, filters={"category": "medical"})
    assert [(c.chunk_id, c.text, c.metadata) for c, _ in after] == [(c.chunk_id, c.text, c.metadata) for c, _ in before]
    np.testing.assert_allclose([s for _, s in after], [s for _, s in before], atol=1e-6)
    assert embedder.calls == 1  # only the query was embedded: the stored vectors came from disk


def test_chroma_reads_what_another_process_wrote(corpus, tmp_path):
    # Same-process clients share Chroma's in-memory system; a writer process proves the data is on disk.
    np.save(tmp_path / "vectors.npy", corpus["doc_vectors"])
    writer = (
        "import sys, numpy as np\n"
        "from retrieval.zerda import ChunkMetadata, DocumentChunk\n"
        "from retrieval.zerda.backends import ChromaVectorDatabase\n"
        "vectors = np.load(sys.argv[1] + '/vectors.npy')\n"
        "chunks = [DocumentChunk(f'document number {i}', f'd{i}', f'd{i}-c0',\n"
        "          ChunkMetadata(category=('legal', 'finance', 'medical')[i % 3]))\n"
        "          for i in range(len(vectors))]\n"
        "ChromaVectorDatabase(lambda text: None, sys.argv[1] + '/db').add(chunks, embeddings=vectors)\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path)], check=True, capture_output=True)
    reader = ChromaVectorDatabase(TableEmbedder(corpus["table"]), tmp_path / "db")
    assert len(reader) == N_DOCS
    pairs = reader.search(corpus["queries"][2], top_k=5, filters={"category": "finance"})
    assert_same_ranking(pairs, brute_force(corpus, 2, 5, keep=lambda i: i % 3 == 1))


def test_chroma_embeds_with_our_embedder_never_its_default(corpus, tmp_path):
    embedder = TableEmbedder(corpus["table"])
    db = ChromaVectorDatabase(embedder, tmp_path / "fresh")
    db.add(corpus["chunks"][:20])  # no vectors given: our embedder, not Chroma's downloading default
    assert embedder.calls == 20
    assert db._collection._embedding_function is None
    keep = lambda i: i < 20  # noqa: E731
    assert_same_ranking(db.search(corpus["queries"][0], top_k=5), brute_force(corpus, 0, 5, keep=keep))
    assert ChromaVectorDatabase(embedder, tmp_path / "empty").search("query number 0") == []


def test_chroma_with_real_embedder_round_trip(tmp_path):
    from retrieval.embeddings import load_embedder

    texts = [
        "The cat sat on the warm mat.",
        "Interest rates rose sharply this quarter.",
        "The striker scored twice in the final.",
    ]
    chunks = [DocumentChunk(text=t, doc_id=f"t{i}") for i, t in enumerate(texts)]
    db = ChromaVectorDatabase(load_embedder("wordllama", dim=64), tmp_path / "real")
    db.add(chunks)
    assert db.search("central bank raises interest rates", top_k=1)[0][0].doc_id == "t1"
    assert db.search("football match goals", top_k=1)[0][0].doc_id == "t2"


# ------------------------------------------------------------------------------------------- Pinecone


def test_metadata_where_translates_zerda_filters():
    assert metadata_where(None) is None and metadata_where({}) is None
    assert metadata_where({"category": "legal"}) == {"category": {"$eq": "legal"}}
    assert metadata_where({"category": ["a", "b"], "year": {"$gte": 2021}}) == {
        "$and": [{"category": {"$in": ["a", "b"]}}, {"year": {"$gte": 2021}}]
    }
    raw = {"$or": [{"a": {"$eq": 1}}, {"b": {"$eq": 2}}]}
    assert metadata_where(raw) is raw


def test_flat_metadata_flattens_dataclass_and_drops_none():
    chunk = DocumentChunk(text="x", doc_id="d1", metadata=ChunkMetadata(category=None, extra={"tags": ["a"]}))
    assert flat_metadata(chunk) == {"doc_id": "d1", "source": "", "chunk_index": 0, "tags": '["a"]'}


def _unreachable_pinecone(table) -> PineconeVectorDatabase:
    # Nothing listens on the discard port: connection refused (after the client's own retries, ~3 s).
    return PineconeVectorDatabase(
        TableEmbedder(table), host="http://127.0.0.1:9", api_key="test-key", client_options={"timeout": 5}
    )


def test_pinecone_filter_kwarg_resolution(corpus):
    db = _unreachable_pinecone(corpus["table"])
    filters = {"category": ["legal", "finance"]}
    assert _resolve_vector_db_filter_kwargs(db, filters) == {"filter_dict": filters}
    assert _resolve_vector_db_filter_kwargs(db, None) == {}
    assert db._index is None  # building the backend and resolving filters contacted nothing


def test_pinecone_search_sends_translated_filter_to_the_client(corpus, monkeypatch):
    from pinecone.index import Index

    seen = {}

    def record_query(self, **kwargs):
        seen.update(kwargs)
        raise ConnectionError("recorded")

    monkeypatch.setattr(Index, "query", record_query)
    db = _unreachable_pinecone(corpus["table"])
    with pytest.raises(ConnectionError):
        db.search(corpus["queries"][0], top_k=3, filter_dict={"category": "legal"})
    assert seen["filter"] == {"category": {"$eq": "legal"}} and seen["top_k"] == 3
    np.testing.assert_allclose(np.linalg.norm(seen["vector"]), 1.0, rtol=1e-6)


def test_pinecone_connection_error_fails_safe_in_vector_retriever(corpus, caplog):
    db = _unreachable_pinecone(corpus["table"])
    retriever = VectorRetriever(ContextEngineConfig(), vector_db=db)
    with caplog.at_level(logging.ERROR, logger="retrieval.zerda.retriever"):
        hits = retriever.retrieve(corpus["queries"][0], top_k=5, filters={"category": "legal"})
    assert hits == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "PineconeVectorDatabase" in errors[0].getMessage()


def test_pinecone_needs_an_index_and_a_key(corpus, monkeypatch):
    with pytest.raises(ValueError, match="index_name= or host="):
        PineconeVectorDatabase(TableEmbedder({}))
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    db = PineconeVectorDatabase(TableEmbedder(corpus["table"]), index_name="zerda")
    with pytest.raises(RuntimeError, match="PINECONE_API_KEY"):
        db.search(corpus["queries"][0])


# ------------------------------------------------------------------------------------ LangChain adapter


def test_langchain_in_memory_store_as_adapter(corpus):
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    table = corpus["table"]

    class TableEmbeddings(Embeddings):
        def embed_documents(self, texts):
            return [table[t].tolist() for t in texts]

        def embed_query(self, text):
            return table[text].tolist()

    store = InMemoryVectorStore(embedding=TableEmbeddings())
    store.add_texts(
        [c.text for c in corpus["chunks"]],
        metadatas=[{"doc_id": c.doc_id, "category": c.metadata.category} for c in corpus["chunks"]],
    )
    retriever = VectorRetriever(ContextEngineConfig(), vector_store_adapter=store)
    hits = retriever.retrieve(corpus["queries"][0], top_k=5)
    expected = brute_force(corpus, 0, 5)
    assert [sc.chunk.metadata["doc_id"] for sc in hits] == [d for d, _ in expected]
    np.testing.assert_allclose([sc.vector_score for sc in hits], [s for _, s in expected], atol=1e-5)
    # The adapter receives filters unchanged; this store's filter is a Document -> bool callable.
    hits = retriever.retrieve(corpus["queries"][0], top_k=5, filters=lambda d: d.metadata["category"] == "legal")
    assert [sc.chunk.metadata["doc_id"] for sc in hits] == [
        d for d, _ in brute_force(corpus, 0, 5, keep=lambda i: i % 3 == 0)
    ]


# ---------------------------------------------------------------------------------------- lazy imports


def test_importing_the_packages_loads_no_heavy_backend():
    code = (
        "import sys, retrieval.zerda, retrieval.zerda.backends, retrieval.embeddings\n"
        "heavy = ['chromadb', 'faiss', 'pinecone', 'wordllama', 'sklearn', 'torch', 'model2vec',\n"
        "         'sentence_transformers', 'fastembed']\n"
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
