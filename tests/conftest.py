"""Shared fixtures: the read-only data folder ``../shared`` beside the repository, and small loaders.

Also the run's preconditions. Under CI (``CI=true``) a missing ``../shared``, a missing declared
dependency (``pip install -e ".[dev]"``) or a missing Chromium stops the run at collection with one
line; off CI, tests that need ``../shared`` or Chromium skip with the reason, and a missing declared
dependency still fails (each test imports it plainly). Hypothesis draws the same examples every time
under CI (profile ``ci``: derandomised, no deadline).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = ROOT / ".." / "shared"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ON_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if ON_CI:
    settings.load_profile("ci")


def declared_distributions(extra: str = "dev") -> list[str]:
    """Every distribution ``pip install -e ".[<extra>]"`` installs, read from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras, names, pending = project["optional-dependencies"], list(project["dependencies"]), [extra]
    while pending:
        for requirement in extras[pending.pop()]:
            name, _, nested = re.match(r"([A-Za-z0-9_.-]+)(\[([^\]]*)\])?", requirement).groups()
            if name == project["name"]:
                pending += [e.strip() for e in nested.split(",")]
            else:
                names.append(requirement)
    return sorted({re.match(r"[A-Za-z0-9_.-]+", name).group() for name in names})


def missing_preconditions() -> list[str]:
    """What a CI run needs and this machine lacks, one phrase each (empty: all present)."""
    missing = [] if SHARED_DIR.is_dir() else [f"the data folder {SHARED_DIR.resolve()} (check it out beside the repo)"]
    absent = []
    for name in declared_distributions():
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    if absent:
        missing.append(f'declared dependencies {", ".join(absent)} (pip install -e ".[dev]")')
    if CHROMIUM is None:
        missing.append("a chromium binary (apt-get install -y chromium)")
    return missing


def pytest_configure(config: pytest.Config) -> None:
    """Under CI, stop before collecting anything when a precondition is missing: one line, exit code 4."""
    if ON_CI and (missing := missing_preconditions()):
        raise pytest.UsageError(f"CI=true and this machine lacks {'; '.join(missing)}")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``<repo>/../shared``; off CI, tests that need it skip with a clear message when it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DIR.resolve()} (put it beside the repository)")
    return SHARED_DIR


@dataclass(frozen=True)
class BeirCorpus:
    """A BEIR collection read straight from its jsonl files (title + " " + text, as BEIR does)."""

    doc_ids: list[str]
    texts: list[str]
    queries: dict[str, str]
    test_query_ids: list[str]


def read_beir(folder: Path) -> BeirCorpus:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and the query ids of ``qrels/test.tsv`` of a BEIR folder."""
    doc_ids, texts = [], []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            doc_ids.append(record["_id"])
            texts.append(f"{record.get('title', '')} {record['text']}".strip())
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = {record["_id"]: record["text"] for record in map(json.loads, lines)}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        next(lines)  # header
        test_query_ids = list(dict.fromkeys(line.split("\t")[0] for line in lines if line.strip()))
    return BeirCorpus(doc_ids, texts, queries, test_query_ids)


@pytest.fixture(scope="session")
def scifact(shared_dir: Path) -> BeirCorpus:
    """BEIR SciFact (5,183 documents, 1,109 queries, 300 of them test) from ``datasets/beir-scifact``."""
    folder = shared_dir / "datasets" / "beir-scifact"
    if not (folder / "corpus.jsonl").is_file():
        pytest.fail(f"SciFact not found under {folder.resolve()}: ../shared is incomplete", pytrace=False)
    return read_beir(folder)


def squad_texts(path: Path) -> tuple[list[str], list[str]]:
    """Unique contexts and all questions of a SQuAD-format file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    paragraphs = [p for article in data["data"] for p in article["paragraphs"]]
    contexts = list(dict.fromkeys(p["context"] for p in paragraphs))
    return contexts, [qa["question"] for p in paragraphs for qa in p["qas"]]


def write_trec_folder(
    folder: Path, docs: dict[str, str], queries: dict[str, str], qrels: list[tuple[str, str, int]]
) -> Path:
    """A toy user collection in the TREC format (``corpus.tsv``, ``queries.tsv``, 4-column ``qrels.txt``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in docs.items()), encoding="utf-8")
    (folder / "queries.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in queries.items()), encoding="utf-8")
    (folder / "qrels.txt").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels), encoding="utf-8")
    return folder


def experiment_header(tmp_path: Path, name: str, measures: str = '["ndcg@10"]') -> str:
    """The ``[experiment]`` table of a test grid: runs and caches under ``tmp_path``, depth 10."""
    return f"""
[experiment]
name = "{name}"
output_dir = "{tmp_path / "runs"}"
cache_dir = "{tmp_path / "cache"}"
depth = 10
measures = {measures}
"""


def trec_dataset(name: str, folder: Path) -> str:
    """A ``[[datasets]]`` entry for a toy TREC folder written by ``write_trec_folder``."""
    return f'\n[[datasets]]\nname = "{name}"\npath = "{folder}"\nformat = "trec"\n'


def trec_order(ranking) -> list[tuple[str, float]]:
    """trec_eval's order by its plain definition (``trec_format.h``, ``comp_sim_docno``): each score held in
    a C ``float``, descending, then doc id descending by bytes (``strcmp``), by two stable sorts.
    ``ranking``: (doc_id, score) pairs, or a ``{doc_id: score}`` dict."""
    import numpy as np

    pairs = list(ranking.items()) if isinstance(ranking, dict) else list(ranking)
    by_id = sorted(pairs, key=lambda pair: pair[0].encode("utf-8"), reverse=True)
    return sorted(by_id, key=lambda pair: -np.float32(pair[1]))
