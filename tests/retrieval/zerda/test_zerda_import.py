"""The seed's TYPE_CHECKING rule: importing retrieval.zerda pulls in no optional vector backend."""

import subprocess
import sys

HEAVY = ("chromadb", "faiss", "pinecone", "langchain_core", "sentence_transformers", "torch")


def test_import_does_not_load_optional_backends():
    code = (
        "import sys\n"
        "from retrieval.zerda import BM25Scorer, VectorRetriever, KeywordRetriever, MetadataRetriever, "
        "HybridRetriever, HybridRetrieverStrategy, ContextEngineConfig, RetrieverConfig, ScoredChunk, "
        "chunk_metadata_dict\n"
        "from retrieval.zerda.retriever import _cosine, _resolve_vector_db_filter_kwargs\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in heavy or m == 'retrieval.zerda.backends']\n"
        "print(sorted(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_seed_private_cosine_is_the_core_cosine():
    from retrieval.core import cosine
    from retrieval.zerda.retriever import _cosine

    assert _cosine is cosine
    assert _cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
