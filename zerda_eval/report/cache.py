"""Skip rebuilding a report whose inputs did not change.

The key hashes everything a report is made of: the resolved config (and ``experiment.json``'s config
hash), the run folder it names, the contents of the results and per-query tables, the source of every
module the report code runs (``config.code_fingerprint.modules_of``), matplotlib's version and the formats
asked for. It is stored in ``INPUTS_FILE`` in the report directory, written after every other file, with the SHA-256 of
every file of the report directory. A report whose key matches and whose files are all there as
written is left as it is, so rerunning a cached grid costs nothing for its report; a deleted or
edited file (a plot, a table, the page) makes the next report write everything again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from zerda_eval.config.code_fingerprint import module_source, modules_of
from zerda_eval.hashing import bytes_sha256, content_hash, file_sha256
from zerda_eval.report.tables import RunData
from zerda_eval.store.files import atomic_write_text

INPUTS_FILE = "report-inputs.json"
REPORT_CODE = "zerda_eval.report.writer"  # the module that writes a report, and all it imports


def report_code_version() -> str:
    """SHA-256 over the source of every module the report code imports (analysis, studies, tables ...)."""
    return content_hash({name: bytes_sha256(module_source(name)) for name in sorted(modules_of(REPORT_CODE))})


def frame_hash(frame: pd.DataFrame) -> str:
    """A table's contents as one hash: column names and types, then every row's values."""
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
    return content_hash({"columns": [[str(c), str(t)] for c, t in frame.dtypes.items()], "rows": bytes_sha256(rows)})


def report_key(data: RunData, formats: Iterable[str]) -> str:
    """The hash of every input of the report of ``data`` in ``formats``."""
    import matplotlib

    return content_hash(
        {
            "config_hash": data.config_hash,
            "config": content_hash(data.config),
            "run_dir": str(data.run_dir),  # the report names the folder it was made from
            "results": frame_hash(data.results),
            "per_query": frame_hash(data.per_query),
            "code": report_code_version(),
            "matplotlib": matplotlib.__version__,
            "formats": sorted(formats),
        }
    )


def is_current(report_dir: Path, key: str) -> bool:
    """True when ``report_dir`` was built from inputs hashing to ``key`` and every file it holds then is
    still there, unchanged."""
    try:
        stored = json.loads((report_dir / INPUTS_FILE).read_text(encoding="utf-8"))
        files = stored["files"]
        if stored.get("key") != key or not isinstance(files, dict) or not files:
            return False
        return all(file_sha256(report_dir / name) == digest for name, digest in files.items())
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return False


def record(report_dir: Path, key: str) -> None:
    """Remember the inputs' key and each file's SHA-256 (after the report's files are written)."""
    files = sorted(p for p in report_dir.rglob("*") if p.is_file() and p.name != INPUTS_FILE)
    hashes = {str(p.relative_to(report_dir)): file_sha256(p) for p in files}
    atomic_write_text(report_dir / INPUTS_FILE, json.dumps({"key": key, "files": hashes}, indent=2) + "\n")
