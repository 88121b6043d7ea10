"""What a dataset's numbers depend on, by content: the SHA-256 of each file it is read from.

The cell id covers these hashes (``config``), so an edited qrels, queries or corpus file can never
reuse a cell computed from the old one, whatever its size or modification time. Hashes come from
``hashing.file_sha256``: once per process and file version (memoised by path, size, mtime, inode and ctime).
A user's folder is fingerprinted by the three files it is read from (also when a file option names a
file outside the folder); a bundled dataset by the bundled files its id reads (``BUNDLED[id].files``).
Any other ir_datasets id is identified by its id and the ir_datasets version recorded with every
result (ir_datasets checks each download's MD5).

A file edited after its hash was taken (while a grid runs, or while it is read) must not be read
under the old hash: the loader checks the files again after reading them (``changed_files``) and a
cell loads its data only while they still hold the content its id records.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zerda_eval.datasets.bundled import BUNDLED
from zerda_eval.datasets.paths import source_file
from zerda_eval.datasets.user import source_files
from zerda_eval.hashing import file_sha256


def fingerprint_files(dataset_id: str, options: Mapping[str, Any]) -> dict[str, Path]:
    """``{file role or name: path}`` of the files ``dataset_id`` (under ``options``) is read from."""
    if "path" in options:
        return source_files(dataset_id, {**options, "path": str(options["path"])})
    if dataset_id in BUNDLED:
        spec = BUNDLED[dataset_id]
        return {name: source_file(spec.folder, name) for name in spec.files}
    return {}


def content_fingerprint(dataset_id: str, options: Mapping[str, Any]) -> dict[str, str]:
    """``{file role or name: SHA-256}`` of the files ``dataset_id`` (under ``options``) is read from."""
    return {what: file_sha256(path) for what, path in fingerprint_files(dataset_id, options).items()}


def changed_files(dataset_id: str, options: Mapping[str, Any], recorded: Mapping[str, str]) -> list[Path]:
    """The files of ``dataset_id`` whose content is no longer ``recorded`` (a ``content_fingerprint``)."""
    files = fingerprint_files(dataset_id, options)
    changed = [path for what, path in files.items() if recorded.get(what) != file_sha256(path)]
    return changed + [Path(what) for what in recorded if what not in files]
