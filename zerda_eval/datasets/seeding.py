"""Seed ir_datasets' cache from the bundled source files, so its own loaders work offline.

ir_datasets uses a file found at its cache path as is (no hash check), so placing the files it would
have downloaded (or extracted) there is enough:

- ``beir/scifact/*``: ``<home>/beir/scifact/source.zip`` holding ``scifact/{corpus,queries}.jsonl`` and
  ``scifact/qrels/{test,train}.tsv``, the layout of BEIR's own zip;
- ``cranfield``: ``<home>/cranfield/{docs,queries,qrels}.txt``, the SMART files byte for byte;
- ``vaswani``: ``<home>/vaswani/{docs,queries,qrels}.txt`` in the Glasgow NPL layout ir_datasets parses
  (records closed by ``   /`` or ``/`` lines). The bundled copy is the TREC-format NPL (SGML docs and
  topics, 4-column qrels), so it is rewritten into that layout: same ids, same text lines, same pairs.

Each seeded folder holds ``zerda-eval-seed.json``, the SHA-256 of every source file it was made
from, written after ir_datasets' docstore is built from the seeded files (under the same lock, so
concurrent runs never read a half-built docstore). When a source file changes (an edited copy under
``ZERDA_EVAL_DATA``), the folder is emptied, with the extracts and docstore ir_datasets derived from
the old files, and seeded again, so a stale copy is never read. Files are written through a
temporary file and an atomic rename, with the mode the umask gives; nothing is written into the
repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from zerda_eval.datasets.paths import ir_datasets_home, source_file
from zerda_eval.errors import DataFormatError
from zerda_eval.hashing import file_sha256
from zerda_eval.store.files import build_lock, file_mode

MARKER = "zerda-eval-seed.json"

_SCIFACT_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/train.tsv")
_CRANFIELD_FILES = {"docs.txt": "cran.all.1400", "queries.txt": "cran.qry", "qrels.txt": "cranqrel"}
_TREC_DOC = re.compile(r"<DOC>\s*<DOCNO>\s*(\S+?)\s*</DOCNO>\n?(.*?)</DOC>", re.DOTALL)
_TREC_TOPIC = re.compile(r"<top>\s*<num>\s*(\S+?)\s*</num>\s*<title>\n?(.*?)</title>\s*</top>", re.DOTALL)


def atomic_write(target: Path, write: Callable[[BinaryIO], None]) -> bool:
    """Create ``target`` with ``write(file)`` unless it exists; True when it was written."""
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, file_mode())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def _copy_of(path: Path) -> Callable[[BinaryIO], None]:
    return lambda handle: handle.write(path.read_bytes())


def seed_scifact(home: Path) -> None:
    """Build ``beir/scifact/source.zip`` (uncompressed) from the bundled BEIR files."""

    def write_zip(handle: BinaryIO) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
            for name in _SCIFACT_FILES:
                archive.write(source_file("beir-scifact", name), f"scifact/{name}")

    atomic_write(home / "beir" / "scifact" / "source.zip", write_zip)


def seed_cranfield(home: Path) -> None:
    """Place the three SMART files where ir_datasets caches its extracts of ``cran.tar.gz``."""
    for cached, original in _CRANFIELD_FILES.items():
        atomic_write(home / "cranfield" / cached, _copy_of(source_file("cranfield", original)))


def _records(pattern: re.Pattern[str], path: Path, kind: str) -> list[tuple[str, str]]:
    records = pattern.findall(path.read_text(encoding="utf-8"))
    if not records:
        raise DataFormatError(f"{path}: no {kind} records found; expected TREC SGML (the NPL TREC files)")
    return records


def _npl_docs(path: Path) -> bytes:
    return "".join(f"{doc_id}\n{text}   /\n" for doc_id, text in _records(_TREC_DOC, path, "<DOC>")).encode()


def _npl_queries(path: Path) -> bytes:
    return "".join(f"{qid}\n{text}/\n" for qid, text in _records(_TREC_TOPIC, path, "<top>")).encode()


def _npl_qrels(path: Path) -> bytes:
    relevant: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        cols = line.split()
        if len(cols) != 4 or not cols[3].lstrip("-").isdigit():
            raise DataFormatError(f"{path}:{number}: expected 'qid iter docid relevance', got {line!r}")
        if int(cols[3]) > 0:
            relevant.setdefault(cols[0], []).append(cols[2])
    return "".join(f"{qid}\n {' '.join(docs)}\n   /\n" for qid, docs in relevant.items()).encode()


def seed_vaswani(home: Path) -> None:
    """Write the TREC-format NPL files in the Glasgow layout ir_datasets' ``vaswani`` parses."""
    converters = {"docs.txt": ("doc-text.trec", _npl_docs), "queries.txt": ("query-text.trec", _npl_queries)}
    converters["qrels.txt"] = ("qrels", _npl_qrels)
    for cached, (original, convert) in converters.items():
        target = home / "vaswani" / cached
        if not target.exists():
            data = convert(source_file("vaswani", original))
            atomic_write(target, lambda handle, data=data: handle.write(data))


@dataclass(frozen=True)
class Seeder:
    """How one ir_datasets cache folder is made from bundled files: ``write(home)`` from ``folder/names``."""

    target: str  # the folder under ir_datasets' home
    folder: str  # the bundled folder
    names: tuple[str, ...]
    write: Callable[[Path], None]


SEEDERS: dict[str, Seeder] = {
    "beir/scifact": Seeder("beir/scifact", "beir-scifact", _SCIFACT_FILES, seed_scifact),
    "cranfield": Seeder("cranfield", "cranfield", tuple(_CRANFIELD_FILES.values()), seed_cranfield),
    "vaswani": Seeder("vaswani", "vaswani", ("doc-text.trec", "query-text.trec", "qrels"), seed_vaswani),
}


def seed_cache(dataset_id: str, home: Path | None = None) -> bool:
    """Seed the cache folder ``dataset_id`` reads, if it is one we bundle; True when it is.

    A folder seeded from other contents of the source files (or by a version without the marker) is
    emptied and seeded again.
    """
    for prefix, seeder in SEEDERS.items():
        if dataset_id == prefix or dataset_id.startswith(prefix + "/"):
            _seed(seeder, dataset_id, home or ir_datasets_home())
            return True
    return False


def _seed(seeder: Seeder, dataset_id: str, home: Path) -> None:
    target = home / seeder.target
    sources = {name: file_sha256(source_file(seeder.folder, name)) for name in seeder.names}
    if _marker(target) == sources:
        return
    with build_lock(target):  # concurrent runs: one reseeds, the others then find the marker
        if _marker(target) == sources:
            return
        shutil.rmtree(target, ignore_errors=True)  # with what ir_datasets derived from the old files
        seeder.write(home)
        if home == ir_datasets_home():  # its docstore too, under the lock: a reader never sees half of one
            import ir_datasets

            store = ir_datasets.load(dataset_id).docs_store()
            if hasattr(store, "build"):
                store.build()
        text = json.dumps(sources, indent=2, sort_keys=True)
        atomic_write(target / MARKER, lambda handle: handle.write(text.encode("utf-8")))


def _marker(target: Path) -> dict[str, str] | None:
    try:
        return json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
