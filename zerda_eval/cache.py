"""The run directory on disk: atomic writes, and which cells are already done.

A cell lives in ``cells/<cell_id>/`` (``run.trec``, ``per_query.csv``, then ``result.json`` LAST).
Every file is written to a temporary name in the same directory and moved into place with
``os.replace`` (atomic on POSIX), so a killed run leaves either a whole file or none; a cell counts
as done only when its ``result.json`` exists and names the same config hash. The cell id is the
content hash of the resolved cell config, so a changed config can never pick up a stale run.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from zerda_eval.errors import RunError

TMP_PREFIX = ".tmp-"


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` to write; synced and renamed over ``path`` if the block succeeds.

    On any failure (an exception, Ctrl-C) the temporary file is removed: ``path`` is whole or absent. A
    file-system error (disk full, permissions) is a one-line ``RunError`` naming ``path``.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=TMP_PREFIX, dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        yield tmp
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_error(str(path), exc) from exc
        raise


def write_error(target: str, error: OSError) -> RunError:
    """The one-line ``RunError`` for a file-system error (disk full, permissions) while writing ``target``."""
    return RunError(
        f"cannot write {target} ({error.strerror or error}); free space or fix permissions, "
        "then rerun the same command to resume"
    )


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through ``replaced_atomically`` (errors: one-line ``RunError``)."""
    with replaced_atomically(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text version of ``atomic_write_bytes``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def build_lock(path: Path) -> FileLock:
    """An exclusive lock on ``<path>.lock`` (``filelock``, any OS): one process builds a shared cache entry.

    Dask workers of one grid share the cache directory; the others wait, then read what was built.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(f"{path}.lock")


def cell_dir(output_dir: Path, cell_id: str) -> Path:
    return output_dir / "cells" / cell_id


def load_result(output_dir: Path, cell_id: str) -> dict[str, Any] | None:
    """The finished cell's ``result.json`` if it exists and belongs to ``cell_id``, else None."""
    path = cell_dir(output_dir, cell_id) / "result.json"
    if not path.is_file():
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return result if result.get("cell_id") == cell_id else None


def remove_temp_files(output_dir: Path) -> None:
    """Delete temp files an interrupted run left behind (they never replaced a real file)."""
    for tmp in output_dir.rglob(f"{TMP_PREFIX}*"):
        tmp.unlink(missing_ok=True)


def check_writable(directory: Path, key: str = "output_dir") -> None:
    """``RunError`` naming the directory and its ``[experiment]`` key when files cannot be written there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f"{TMP_PREFIX}probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        what = key.replace("_dir", "").replace("_", " ")
        raise RunError(
            f"cannot write to {what} directory {str(directory)!r} ({exc.strerror}); choose another [experiment].{key}"
        ) from None
