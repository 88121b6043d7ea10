"""What a dataset's numbers depend on, by content: the SHA-256 of each file it is read from.

The cell id covers these hashes (``config``), so an edited qrels, queries or corpus file can never
reuse a cell computed from the old one, whatever its size or modification time. Hashes come from
``hashing.file_sha256``: once per process and file version (memoised by path, size, mtime, inode and ctime).
A user's folder is fingerprinted by the three files it is read from (also when a file option names a
file outside the folder); a bundled dataset by the bundled files its id reads (``BUNDLED[id].files``).
Any other ir_datasets id is identified by its id and the ir_datasets version recorded with every
result (ir_datasets checks each download's MD5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zerda_eval.datasets.bundled import BUNDLED
from zerda_eval.datasets.paths import source_file
from zerda_eval.datasets.user import source_files
from zerda_eval.hashing import file_sha256


def content_fingerprint(dataset_id: str, options: Mapping[str, Any]) -> dict[str, str]:
    """``{file role or name: SHA-256}`` of the files ``dataset_id`` (under ``options``) is read from."""
    if "path" in options:
        files = source_files(dataset_id, {**options, "path": str(options["path"])})
    elif dataset_id in BUNDLED:
        spec = BUNDLED[dataset_id]
        files = {name: source_file(spec.folder, name) for name in spec.files}
    else:
        return {}
    return {what: file_sha256(path) for what, path in files.items()}
