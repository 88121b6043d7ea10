"""Issue 46's scale benchmark: every stage of a hybrid grid at MS MARCO-like sizes, wall time and peak RSS each.

Corpus: ``--passages`` passages of real sentences: the documents of the three bundled English collections
(SciFact, Cranfield, Vaswani) split into sentences, two or three drawn per passage with a seeded generator.
Queries (``--queries``, 5,000 by default): the bundled queries (SciFact 1,109, Cranfield 225, Vaswani 93), then
word windows of 5-12 words cut from random sentences. Judgements follow from the construction: a bundled
query's relevant passages are those holding a sentence of a document judged relevant to it (its grade), a
sentence query's those holding its sentence (grade 1).

Stages, each timed and its peak RSS measured (Linux's ``VmHWM``, reset before the stage through
``/proc/self/clear_refs``): build the corpus; BM25 (``SparseBM25``) fit and search for each grid point; the
dense system (wordllama 256-d static vectors, written to a ``.npy`` file and searched exactly, memory-mapped, by
``exact_top_k``; ``--ivf`` adds FAISS IVF with its recall against exact search); runs as the harness's dicts;
RRF and wsum fusion (ours ``zerda_eval.fuse`` beside ranx ``fuse``, same numbers asserted); RRF and wsum tuned
(``zerda_eval.optimize_fusion``, held out over 5 folds); evaluation (ours beside ranx and ``pytrec_eval``, the
same means asserted). One JSON line per stage, then a markdown table.

    python benchmarks/bench_scale.py --passages 1000000 --depth 100
    python benchmarks/bench_scale.py --passages 1000000 --depth 1000 --ivf
    ZERDA_BENCH_QUICK=1 python -m pytest benchmarks/test_bench_scale.py      # 2,000 passages, a minute
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core import tokenize
from retrieval.core.bm25_fast import SparseBM25
from retrieval.core.dense import ApproximateIndex, exact_top_k

SEED = 20261205
DATASETS = ("beir/scifact/test", "cranfield", "vaswani")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
BM25_GRID = ((0.9, 0.4), (1.2, 0.75))  # (k1, b): Anserini's MS MARCO setting and the textbook one
MEASURES = ("ndcg@10", "recall@100", "map@100")
PYTREC = {"ndcg@10": "ndcg_cut.10", "recall@100": "recall.100", "map@100": "map_cut.100"}  # keys: "." -> "_"
EMBED_DIM = 256
ENCODE_CHUNK = 50_000
QUERY_WORDS = (5, 12)


@dataclass
class Stage:
    name: str
    wall_s: float
    peak_rss_mb: float
    rss_after_mb: float
    note: str = ""


@dataclass
class Bench:
    stages: list[Stage] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str, note: str = "") -> Iterator[dict[str, Any]]:
        """Time the block and read its peak RSS (``VmHWM`` reset first); ``extra["note"]`` may be set inside."""
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        extra: dict[str, Any] = {"note": note}
        start = time.perf_counter()
        yield extra
        wall = time.perf_counter() - start
        memory = memory_mb()
        stage = Stage(name, round(wall, 2), memory["VmHWM"], memory["VmRSS"], extra["note"])
        self.stages.append(stage)
        print(json.dumps(stage.__dict__), flush=True)


def memory_mb() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return fields


@dataclass
class Corpus:
    """Passages as sentence ids (``-1`` pads a two-sentence passage), queries and qrels."""

    sentences: list[str]
    passages: np.ndarray  # (n, 3) int32
    qids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]

    @property
    def doc_ids(self) -> list[str]:
        return [f"p{i}" for i in range(len(self.passages))]

    def texts(self, start: int = 0, stop: int | None = None) -> Iterator[str]:
        for row in self.passages[start:stop]:
            yield " ".join(self.sentences[s] for s in row if s >= 0)


def build_corpus(n_passages: int, n_queries: int, seed: int = SEED) -> Corpus:
    """The corpus, queries and judgements described in the module docstring."""
    from zerda_eval.datasets import load_collection

    rng = np.random.default_rng(seed)
    sentences: list[str] = []
    sentence_doc: list[tuple[str, str]] = []
    qids, queries, judged_docs = [], [], []
    for dataset in DATASETS:
        collection = load_collection(dataset)
        for doc_id, text in zip(collection.doc_ids, collection.texts, strict=True):
            for sentence in SENTENCE_END.split(text):
                if tokenize(sentence):
                    sentences.append(sentence.strip())
                    sentence_doc.append((dataset, doc_id))
        for qid, text in collection.queries.items():
            relevant = {doc: grade for doc, grade in collection.qrels.get(qid, {}).items() if grade > 0}
            if relevant:
                qids.append(f"{dataset}:{qid}")
                queries.append(text)
                judged_docs.append((dataset, relevant))
    sizes = rng.integers(2, 4, size=n_passages)
    passages = rng.integers(0, len(sentences), size=(n_passages, 3)).astype(np.int32)
    passages[sizes == 2, 2] = -1
    # sentence -> passages holding it (one sort of the flattened ids)
    flat = passages.ravel()
    order = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[order], np.arange(len(sentences) + 1))
    holders = order // 3

    def passages_of(sentence: int) -> np.ndarray:
        return holders[starts[sentence] : starts[sentence + 1]]

    sentences_of_doc: dict[tuple[str, str], list[int]] = {}
    for index, key in enumerate(sentence_doc):
        sentences_of_doc.setdefault(key, []).append(index)
    qrels: dict[str, dict[str, int]] = {}
    kept_qids, kept_queries = [], []
    for qid, text, (dataset, relevant) in zip(qids, queries, judged_docs, strict=True):
        judged: dict[str, int] = {}
        for doc, grade in relevant.items():
            for sentence in sentences_of_doc.get((dataset, doc), []):
                for passage in passages_of(sentence).tolist():
                    judged[f"p{passage}"] = max(grade, judged.get(f"p{passage}", 0))
        if judged:
            qrels[qid] = judged
            kept_qids.append(qid)
            kept_queries.append(text)
    kept_qids, kept_queries = kept_qids[:n_queries], kept_queries[:n_queries]
    while len(kept_qids) < n_queries:
        sentence = int(rng.integers(0, len(sentences)))
        holding = passages_of(sentence)
        words = sentences[sentence].split()
        if len(holding) == 0 or len(words) < QUERY_WORDS[0]:
            continue
        width = int(rng.integers(QUERY_WORDS[0], min(QUERY_WORDS[1], len(words)) + 1))
        first = int(rng.integers(0, len(words) - width + 1))
        qid = f"s{len(kept_qids)}"
        kept_qids.append(qid)
        kept_queries.append(" ".join(words[first : first + width]))
        qrels[qid] = {f"p{p}": 1 for p in holding.tolist()}
    qrels = {qid: qrels[qid] for qid in kept_qids}
    return Corpus(sentences, passages, kept_qids, kept_queries, qrels)


def as_run(qids: list[str], rows: np.ndarray, scores: np.ndarray) -> dict[str, list[tuple[str, float]]]:
    """The harness's run shape ``{qid: [(doc_id, score), ...]}`` (rows < 0, an index's padding, dropped)."""
    return {
        qid: [(f"p{r}", float(s)) for r, s in zip(rows[i].tolist(), scores[i].tolist(), strict=True) if r >= 0]
        for i, qid in enumerate(qids)
    }


def encode(corpus: Corpus, path: Path) -> Any:
    """wordllama vectors of every passage into a ``.npy`` file, a chunk at a time; returns the embedder."""
    from retrieval.embeddings import load_embedder

    embedder = load_embedder("wordllama", dim=EMBED_DIM)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(len(corpus.passages), EMBED_DIM))
    for start in range(0, len(corpus.passages), ENCODE_CHUNK):
        stop = min(start + ENCODE_CHUNK, len(corpus.passages))
        out[start:stop] = embedder.embed(list(corpus.texts(start, stop)))
    out.flush()
    del out
    return embedder


def ranx_fuse(runs: list[dict], method: str, params: dict) -> dict[str, dict[str, float]]:
    import warnings

    from numba.core.errors import NumbaTypeSafetyWarning
    from ranx import Run, fuse

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        ranx_runs = [Run({q: dict(hits) for q, hits in run.items()}) for run in runs]
        return fuse(ranx_runs, norm="min-max" if method == "wsum" else None, method=method, params=params).to_dict()


def agreement(ours: dict[str, dict[str, float]], trec: dict, keys: dict[str, str], run: dict) -> bool:
    """Per query, ours equal to trec_eval's (pytrec_eval) values to 1e-9 on every query, tied scores included:
    the run type orders ties as trec_eval does (doc id descending)."""
    return all(
        abs(ours[measure].get(qid, 0.0) - trec.get(qid, {}).get(key, 0.0)) < 1e-9
        for qid in run
        for measure, key in keys.items()
    )


def untied(runs: list[dict[str, list[tuple[str, float]]]]) -> list[str]:
    """The queries on which no input run ties two scores: there a rank (RRF's input) means one thing.

    On a tie, ranx ranks in its sort's order and we in trec_eval's (doc id descending), so their RRF scores
    differ there by design; score-based fusion (wsum) does not depend on it.
    """
    return [q for q in runs[0] if all(len({s for _, s in run[q]}) == len(run[q]) for run in runs)]


def same_fused(ours: dict[str, list[tuple[str, float]]], peer: dict[str, dict[str, float]], qids: list[str]) -> bool:
    """Same documents and scores (1e-9) for every query of ``qids``, whatever order ties take."""
    for qid in qids:
        hits, theirs = ours.get(qid, []), peer.get(qid, {})
        if len(hits) != len(theirs) or any(abs(theirs.get(doc, np.inf) - score) > 1e-9 for doc, score in hits):
            return False
    return True


def main(argv: list[str] | None = None) -> Outcome:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--ivf", action="store_true", help="also FAISS IVF (nlist 1024, nprobe 16) and its recall")
    parser.add_argument("--no-tuning", action="store_true", help="skip the tuned RRF / wsum stages")
    parser.add_argument("--bm25-only", action="store_true", help="stop after the BM25 stages (MS MARCO's 8.8M)")
    args = parser.parse_args(argv)
    import pytrec_eval
    import ranx

    import zerda_eval as ze

    print(json.dumps({"cpu": cpu_model(), "cores": os.cpu_count(), "load_average": os.getloadavg(), **vars(args)}))
    bench = Bench()
    with bench.stage("build corpus", f"{args.passages:,} passages, {args.queries:,} queries") as extra:
        corpus = build_corpus(args.passages, args.queries)
        extra["note"] += f", {len(corpus.sentences):,} sentences, {sum(map(len, corpus.qrels.values())):,} qrels"
    query_tokens = [tokenize(q) for q in corpus.queries]
    arrays = {}
    for k1, b in BM25_GRID:
        with bench.stage(f"BM25 fit k1={k1} b={b}", "tokenize + SparseBM25.fit, streamed"):
            index = SparseBM25(k1=k1, b=b).fit(tokenize(text) for text in corpus.texts())
        with bench.stage(f"BM25 search k1={k1} b={b}", f"top-{args.depth} of every query, batched"):
            arrays[f"bm25 {k1}/{b}"] = index.top_k_batch(query_tokens, args.depth)
        del index
    if args.bm25_only:
        print(table(bench.stages))
        return Outcome(bench.stages, {})
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        path = Path(tmp) / "vectors.npy"
        with bench.stage("dense encode", f"wordllama {EMBED_DIM}-d, to a .npy file in chunks"):
            embedder = encode(corpus, path)
            query_vectors = np.asarray(embedder.embed(corpus.queries), dtype=np.float32)
        vectors = np.load(path, mmap_mode="r")
        with bench.stage("dense exact search", f"exact_top_k over the memory map, {vectors.nbytes / 2**20:,.0f} MB"):
            arrays["dense"] = exact_top_k(vectors, query_vectors, args.depth)
        if args.ivf:
            with bench.stage("dense IVF build", "FAISS IVF-Flat, nlist 1024, rows added by block") as extra:
                ivf = ApproximateIndex("ivf", nlist=min(1024, len(vectors)), nprobe=16).build(vectors)
            with bench.stage("dense IVF search", "nprobe 16") as extra:
                found = ivf.search(query_vectors, args.depth)
                exact = arrays["dense"][0]
                recall = np.mean(
                    [len(set(f) & set(e)) / len(e) for f, e in zip(found[0].tolist(), exact.tolist(), strict=True)]
                )
                extra["note"] += f", recall@{args.depth} vs exact {recall:.4f}"
            del ivf
        del vectors
    with bench.stage("runs as dicts", "{qid: [(doc_id, score)]}, the harness's run shape, 3 runs"):
        runs = {name: as_run(corpus.qids, *pair) for name, pair in arrays.items()}
    del arrays
    pair = [runs[f"bm25 {BM25_GRID[0][0]}/{BM25_GRID[0][1]}"], runs["dense"]]
    checks: dict[str, bool] = {}
    for method, params, peer_params in (
        ("rrf", {"k": 60}, {"k": 60}),
        ("wsum", {"weights": [0.5, 0.5], "score_norm": "min-max"}, {"weights": [0.5, 0.5]}),
    ):
        first = [{q: run[q] for q in corpus.qids[:2]} for run in pair]
        ze.fuse(first, method=method, **params), ranx_fuse(first, method, peer_params)  # warm-up: numba compiles
        with bench.stage(f"fuse {method} ours", "zerda_eval.fuse, BM25 + dense"):
            fused = ze.fuse(pair, method=method, **params)
        with bench.stage(f"fuse {method} ranx", "ranx.fuse (min-max for wsum)") as extra:
            peer = ranx_fuse(pair, method, peer_params)
        compared = untied(pair) if method == "rrf" else corpus.qids
        checks[f"fuse {method}"] = same_fused(fused, peer, compared)
        extra["note"] += f"; same scores as ours on {len(compared):,} queries: {checks[f'fuse {method}']}"
        runs[method] = fused
        del peer
    if not args.no_tuning:
        for method, grid in (
            ("rrf", {"k": [10, 60, 100]}),
            ("wsum", {"weights": [[w, 1 - w] for w in (0.3, 0.5, 0.7)]}),
        ):
            params = {"score_norm": "min-max"} if method == "wsum" else {}
            with bench.stage(f"tune {method} ours", f"optimize_fusion, 5 folds, grid {grid}, ndcg@10") as extra:
                choice = ze.optimize_fusion(corpus.qrels, pair, method=method, measure="ndcg@10", grid=grid, **params)
                extra["note"] += f"; best {choice.best_params}"
    evaluated = {name: runs[name] for name in ("bm25 0.9/0.4", "dense", "rrf")}
    first = {q: runs["dense"][q] for q in corpus.qids[:2]}
    ze.evaluate(corpus.qrels, first, list(MEASURES))  # warm-up: numba loads its kernels
    ranx.evaluate(
        ranx.Qrels({q: corpus.qrels[q] for q in first}), ranx.Run({q: dict(h) for q, h in first.items()}), MEASURES
    )
    for name, run in evaluated.items():
        with bench.stage(f"evaluate {name} ours", "zerda_eval.evaluate, " + ", ".join(MEASURES)) as extra:
            ours = ze.evaluate(corpus.qrels, run, list(MEASURES))
            extra["note"] += " " + json.dumps({m: round(ours[m], 4) for m in MEASURES})
        with bench.stage(f"evaluate {name} pytrec_eval", "RelevanceEvaluator from dicts") as extra:
            evaluator = pytrec_eval.RelevanceEvaluator(corpus.qrels, set(PYTREC.values()))
            per_query = evaluator.evaluate({q: dict(hits) for q, hits in run.items()})
            keys = {m: PYTREC[m].replace(".", "_") for m in MEASURES}
        ours_per_query = ze.evaluate(corpus.qrels, run, list(MEASURES), per_query=True)  # untimed
        checks[f"evaluate {name}"] = agreement(ours_per_query, per_query, keys, run)
        bench.stages[-1].note += f"; equal to ours (1e-9) on all {len(run):,} queries: {checks[f'evaluate {name}']}"
        with bench.stage(f"evaluate {name} ranx", "ranx.evaluate from dicts (Qrels + Run built)") as extra:
            values = ranx.evaluate(ranx.Qrels(corpus.qrels), ranx.Run({q: dict(h) for q, h in run.items()}), MEASURES)
            extra["note"] += "; max abs(ranx - ours) " + f"{max(abs(values[m] - ours[m]) for m in MEASURES):.2e}"
    print(table(bench.stages))
    print(json.dumps({"same answers": checks, "load_average": os.getloadavg()}))
    return Outcome(bench.stages, checks)


@dataclass
class Outcome:
    stages: list[Stage]
    checks: dict[str, bool]  # ours vs the peer computed the same answer (fusion: ranx; evaluation: pytrec_eval)


def table(stages: list[Stage]) -> str:
    lines = ["| stage | wall (s) | peak RSS (MB) | RSS after (MB) | note |", "|---|---:|---:|---:|---|"]
    lines += [
        f"| {s.name} | {s.wall_s:.2f} | {s.peak_rss_mb:,.0f} | {s.rss_after_mb:,.0f} | {s.note} |" for s in stages
    ]
    return "\n".join(lines)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    sys.exit(0 if all(main().checks.values()) else 1)
