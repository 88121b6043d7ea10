"""Seed ir_datasets' cache from the bundled source files, so its own loaders work offline.

ir_datasets uses a file found at its cache path as is (no hash check), so placing the files it would
have downloaded (or extracted) there is enough:

- ``beir/scifact/*``: ``<home>/beir/scifact/source.zip`` holding ``scifact/{corpus,queries}.jsonl`` and
  ``scifact/qrels/{test,train}.tsv``, the layout of BEIR's own zip;
- ``cranfield``: ``<home>/cranfield/{docs,queries,qrels}.txt``, the SMART files byte for byte;
- ``vaswani``: ``<home>/vaswani/{docs,queries,qrels}.txt`` in the Glasgow NPL layout ir_datasets parses
  (records closed by ``   /`` or ``/`` lines). The bundled copy is the TREC-format NPL (SGML docs and
  topics, 4-column qrels), so it is rewritten into that layout: same ids, same text lines, same pairs.

Each seeded folder holds ``zerda-eval-seed.json``, the SHA-256 of every source file it was made from,
and ``zerda-eval-cache.json``, that of every file of the folder once ir_datasets has built its
docstore and extracts from the seeded files (both under the same lock, so concurrent runs never read a
half-built docstore; a folder seeded by a version without the second file gets it recorded as it is).
Before each use the folder is checked against both: when a source file changed (an edited copy under
``ZERDA_EVAL_DATA``), or a cached file no longer matches its recorded hash (damaged, edited), the
folder is emptied, with what ir_datasets derived, and seeded again, so a stale or damaged copy is never
read; a damaged one is said (one ``ZerdaEvalWarning`` naming the file). Files are written through a
temporary file and an atomic rename, with the mode the umask gives; nothing is written into the
repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from zerda_eval.datasets.paths import ir_datasets_home, source_file
from zerda_eval.errors import DataFormatError, ZerdaEvalWarning
from zerda_eval.hashing import file_sha256
from zerda_eval.store.files import build_lock, file_mode

MARKER = "zerda-eval-seed.json"  # {source file: SHA-256}
CACHE_MARKER = "zerda-eval-cache.json"  # {file of the seeded folder: SHA-256}

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
    ids: tuple[str, ...]  # the ids read from the folder: their docstore and extracts are built on seeding


SEEDERS: dict[str, Seeder] = {
    "beir/scifact": Seeder(
        "beir/scifact", "beir-scifact", _SCIFACT_FILES, seed_scifact, ("beir/scifact/test", "beir/scifact/train")
    ),
    "cranfield": Seeder("cranfield", "cranfield", tuple(_CRANFIELD_FILES.values()), seed_cranfield, ("cranfield",)),
    "vaswani": Seeder("vaswani", "vaswani", ("doc-text.trec", "query-text.trec", "qrels"), seed_vaswani, ("vaswani",)),
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
    if _state(target, sources) == "ok":
        return
    with build_lock(target):  # concurrent runs: one reseeds, the others then find the markers
        state = _state(target, sources)
        if state == "ok":
            return
        if state == "unrecorded":  # seeded by a version that did not record the cache's hashes
            _record(target, CACHE_MARKER, _cache_hashes(target))
            return
        if state not in ("absent", "sources changed"):
            warnings.warn(
                f"{seeder.ids[0].split('/')[0]}: ir_datasets' cached copy {state}; rebuilt {target} from the "
                f"bundled files ({seeder.folder})",
                ZerdaEvalWarning,
                stacklevel=4,
            )
        shutil.rmtree(target, ignore_errors=True)  # with what ir_datasets derived from the old files
        seeder.write(home)
        if home == ir_datasets_home():  # its docstore and extracts too, under the lock: never half of one
            _derive(seeder)
        _record(target, CACHE_MARKER, _cache_hashes(target))
        _record(target, MARKER, sources)


def _record(target: Path, name: str, hashes: dict[str, str]) -> None:
    text = json.dumps(hashes, indent=2, sort_keys=True)
    atomic_write(target / name, lambda handle: handle.write(text.encode("utf-8")))


def _derive(seeder: Seeder) -> None:
    """Have ir_datasets build what it derives from the seeded files (docstore, extracts) for every id."""
    import ir_datasets

    for dataset_id in seeder.ids:
        dataset = ir_datasets.load(dataset_id)
        store = dataset.docs_store()
        if hasattr(store, "build"):
            store.build()
        for _ in dataset.queries_iter():
            pass
        for _ in dataset.qrels_iter():
            pass


def _cache_hashes(target: Path) -> dict[str, str]:
    """``{path relative to target: SHA-256}`` of every file of a seeded folder (the markers left out)."""
    skip = (MARKER, CACHE_MARKER)
    files = (p for p in target.rglob("*") if p.is_file() and p.name not in skip and not p.name.endswith(".tmp"))
    return {str(p.relative_to(target)): file_sha256(p) for p in sorted(files)}


def _state(target: Path, sources: dict[str, str]) -> str:
    """ "ok" when the folder was seeded from ``sources`` and every recorded file still has its hash; else
    what is wrong: "absent", "sources changed", "unrecorded" (no cache hashes yet), or the damaged file."""
    if _read(target / MARKER) != sources:
        return "absent" if not (target / MARKER).exists() else "sources changed"
    cache = _read(target / CACHE_MARKER)
    if cache is None:
        return "unrecorded"
    for name, digest in cache.items():
        try:
            if file_sha256(target / name) != digest:
                return f"{name} does not match its recorded hash (damaged or edited)"
        except OSError:
            return f"{name} is missing"
    return "ok"


def _read(path: Path) -> dict[str, str] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
