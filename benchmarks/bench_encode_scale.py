"""A corpus users care about: 100,000 passages of real English sentences encoded by minilm on ``local:2``.

Passages are two SciFact sentences each (real text, drawn with a fixed seed from the bundled corpus's
abstracts; about 60 tokens), written as a BEIR folder with 50 queries (SciFact test queries) judged
against passages that contain a sentence of a relevant abstract. The grid is one ``pipeline.dense``
cell with ``embedder = "minilm"`` (``--precision int8`` for the int8 path), run through the CLI with
``--scheduler local:2`` in a fresh run and cache directory: the workers encode the corpus's stored chunks,
the cell assembles them. Reported: wall time of the whole command, the encode's passages/s, and the peak
RSS of every process of the run sampled every 0.5 s (the encode's memory is bounded by a chunk, not by
the corpus: the figure beside a 10,000-passage run shows it).

    python benchmarks/bench_encode_scale.py                      # 100,000 passages, fp32
    python benchmarks/bench_encode_scale.py --passages 10000 --precision int8
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "beir-scifact"
SEED = 20261205
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def write_corpus(folder: Path, n_passages: int) -> None:
    """A BEIR folder of ``n_passages`` two-sentence passages and 50 judged SciFact queries."""
    with (SHARED / "corpus.jsonl").open(encoding="utf-8") as lines:
        abstracts = {r["_id"]: SENTENCE.split(r["text"]) for r in map(json.loads, lines)}
    ids = list(abstracts)
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(ids), size=(n_passages, 2))
    source: dict[str, list[int]] = {}
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for row, (a, b) in enumerate(picks):
            first, second = abstracts[ids[a]], abstracts[ids[b]]
            text = f"{first[rng.integers(len(first))]} {second[rng.integers(len(second))]}"
            out.write(json.dumps({"_id": f"p{row}", "title": "", "text": text}) + "\n")
            source.setdefault(ids[a], []).append(row)
    qrels = [line.split("\t") for line in (SHARED / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    with (SHARED / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = {r["_id"]: r["text"] for r in map(json.loads, lines)}
    judged = [(q, d) for q, d, _ in qrels if d in source][:50]
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\tp{row}\t1\n" for q, d in judged for row in source[d])
    )
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for q in dict.fromkeys(q for q, _ in judged):
            out.write(json.dumps({"_id": q, "text": queries[q]}) + "\n")


def peak_rss(process: subprocess.Popen, peaks: dict[int, float]) -> None:
    """Sample the RSS of ``process`` and its children (Dask's nanny and workers) until it exits."""
    root = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            for proc in [root, *root.children(recursive=True)]:
                peaks[proc.pid] = max(peaks.get(proc.pid, 0.0), proc.memory_info().rss / 2**20)
        except psutil.Error:
            pass
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    parser.add_argument("--scheduler", default="local:2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zerda-encode-scale-") as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        write_corpus(root / "data", args.passages)
        (root / "scale.toml").write_text(
            f"""[experiment]
name = "encode-scale"
depth = 100
measures = ["ndcg@10", "recall@100"]
cache_dir = "{root / "cache"}"
output_dir = "{root / "runs"}"

[[datasets]]
name = "scifact-sentences"
path = "{root / "data"}"
format = "beir"

[[systems]]
name = "dense"
family = "pipeline.dense"
params = {{ embedder = "minilm", precision = "{args.precision}" }}
"""
        )
        command = [sys.executable, "-m", "zerda_eval", "run", str(root / "scale.toml"), "--no-report"]
        command += ["--scheduler", args.scheduler]
        peaks: dict[int, float] = {}
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=root)
        sampler = threading.Thread(target=peak_rss, args=(process, peaks), daemon=True)
        sampler.start()
        process.wait()
        wall = time.perf_counter() - start
        sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"zerda-eval exited {process.returncode}")
        [result] = (root / "runs").glob("cells/*/result.json")
        efficiency = json.loads(result.read_text())["efficiency"]
        print(
            f"{args.passages:,} passages, minilm {args.precision}, {args.scheduler}: {wall:.0f} s for the command, "
            f"encode {efficiency['index_build_s']:.0f} s of worker time "
            f"({args.passages / efficiency['index_build_s']:.1f} passages/s per worker-second), "
            f"peak RSS per process {sorted(round(p) for p in peaks.values())[-3:]} MB"
        )


if __name__ == "__main__":
    main()
