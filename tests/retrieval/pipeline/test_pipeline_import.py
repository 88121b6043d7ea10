"""Both seed APIs import, and build their pure-Python parts, with every optional backend unavailable."""

import subprocess
import sys

OPTIONAL = (
    "rank_bm25",
    "flashrank",
    "faiss",
    "chromadb",
    "pinecone",
    "langchain_core",
    "sentence_transformers",
    "torch",
    "onnxruntime",
)


def test_both_apis_import_with_optional_backends_blocked():
    code = (
        "import sys\n"
        f"for name in {OPTIONAL!r}:\n"
        "    sys.modules[name] = None  # `import name` now raises ImportError\n"
        "import retrieval.pipeline as p\n"
        "import retrieval.zerda as z\n"
        "store = p.InMemoryEntryStore()\n"
        "memory = p.ScoredMemoryRetriever(store)\n"
        "memory.add_entry(p.MemoryEntry(id='m', content='solar wind'))\n"
        "print([e.id for e in memory.retrieve('wind')], p.rrf_fuse([[p.ContextItem(id='a', content='a')]])[0].score)\n"
        "keyword = z.KeywordRetriever(z.ContextEngineConfig(), chunks=[z.DocumentChunk('solar wind')])\n"
        "print(keyword.retrieve('wind', 1)[0].text)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["['m'] 1.0", "solar wind"]
