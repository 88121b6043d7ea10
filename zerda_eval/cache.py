"""The run directory on disk: atomic writes, verified finished cells, and safe concurrent runs.

A cell lives in ``cells/<cell_id>/`` (``run.trec``, ``per_query.csv``, then ``result.json`` LAST).
Every file is written to a temporary name in the same directory and moved into place with
``os.replace`` (atomic on POSIX), so a killed run leaves either a whole file or none. Temporary names
carry the writer's pid (``.tmp-<pid>-<host>-...``): a clean-up removes only those of dead processes
on this host, so concurrent runs never delete each other's files. Written files get the mode the
user's umask gives (0644 by default), not ``mkstemp``'s 0600.

A cell counts as done only when its ``result.json`` verifies: it names the cell id, its own checksum
(``content_hash`` of the rest of the document) matches, and so does the SHA-256 of each file it lists.
One process at a time computes a cell (``cell_lock``); the others wait and then reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from retrieval.embeddings.packaged import file_sha256 as sha256_of_file
from zerda_eval.errors import RunError

TMP_PREFIX = ".tmp-"
_TMP_NAME = re.compile(r"^\.tmp-(\d+)-(.*)-[^-]*$")
RESULT_FILE = "result.json"
CHECKSUM_KEY = "checksum"


def current_umask() -> int:
    """The process's umask: from ``/proc/self/status`` (Linux), else set and restored (not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(directory: bool = False) -> int:
    """The mode ``open`` / ``mkdir`` would give under the user's umask (0644 / 0755 by default)."""
    return (0o777 if directory else 0o666) & ~current_umask()


def temp_prefix() -> str:
    """Prefix of this process's temporary files: ``.tmp-<pid>-<host>-`` (a clean-up checks the pid)."""
    return f"{TMP_PREFIX}{os.getpid()}-{socket.gethostname()}-"


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` to write; synced and renamed over ``path`` if the block succeeds.

    On any failure (an exception, Ctrl-C) the temporary file is removed: ``path`` is whole or absent. A
    file-system error (disk full, permissions) is a one-line ``RunError`` naming ``path``.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=temp_prefix(), dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        tmp.chmod(file_mode())
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


def cell_lock(output_dir: Path, cell_id: str) -> FileLock:
    """The lock one process holds while it checks, computes or writes the cell (``locks/<cell_id>.lock``)."""
    return build_lock(output_dir / "locks" / cell_id)


_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 hex of a file's bytes: hashed once per process and file version.

    Memoised by (path, size, mtime, inode, ctime): any write changes one of them (ours replace files,
    so the inode changes; an edit in place changes the ctime even when ``cp -p`` / ``rsync -t`` /
    ``touch -d`` put the mtime back), and then the file is hashed again.
    """
    info = os.stat(path)
    key = (str(Path(path).absolute()), info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = _DIGESTS[key] = sha256_of_file(Path(path))
    return digest


def seal(result: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
    """``result`` with the SHA-256 of each file's content (``files``: name -> bytes) and its own checksum."""
    from zerda_eval.config import content_hash

    sealed = {k: v for k, v in result.items() if k != CHECKSUM_KEY}
    sealed["files"] = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    sealed[CHECKSUM_KEY] = content_hash(sealed)
    return sealed


def verified_result(output_dir: Path, cell_id: str) -> tuple[dict[str, Any] | None, str]:
    """The finished cell's ``result.json`` and ``""`` if it verifies, else ``None`` and what is wrong.

    "what is wrong" is empty when the cell was never finished (no ``result.json``): nothing to warn about.
    """
    from zerda_eval.config import content_hash

    directory = cell_dir(output_dir, cell_id)
    path = directory / RESULT_FILE
    if not path.is_file():
        return None, ""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{RESULT_FILE} is unreadable ({type(exc).__name__})"
    if not isinstance(result, dict) or result.get("cell_id") != cell_id:
        return None, f"{RESULT_FILE} does not describe this cell"
    body = {k: v for k, v in result.items() if k != CHECKSUM_KEY}
    try:
        intact = result.get(CHECKSUM_KEY) == content_hash(body)
    except (TypeError, ValueError):
        intact = False
    files = result.get("files")
    if not intact or not isinstance(files, dict) or not files:
        return None, f"{RESULT_FILE} does not match its checksum (edited or damaged)"
    for name, digest in files.items():
        try:
            if file_sha256(directory / name) != digest:
                return None, f"{name} does not match its checksum (edited or truncated)"
        except OSError:
            return None, f"{name} is missing"
    return result, ""


def load_result(output_dir: Path, cell_id: str) -> dict[str, Any] | None:
    """The finished cell's ``result.json`` if it verifies (``verified_result``), else None."""
    return verified_result(output_dir, cell_id)[0]


def _owner_alive(name: str) -> bool:
    """True when the temporary file ``name`` belongs to a live process, or to another host (unknowable)."""
    match = _TMP_NAME.match(name)
    if match is None:
        return False  # an old-style name: its writer is long gone
    pid, host = int(match.group(1)), match.group(2)
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, under another user
    return True


def remove_temp_files(output_dir: Path) -> None:
    """Delete temp files a killed run left behind; those of live processes (concurrent runs) are kept."""
    for tmp in output_dir.rglob(f"{TMP_PREFIX}*"):
        if not _owner_alive(tmp.name):
            tmp.unlink(missing_ok=True)


def check_writable(directory: Path, key: str = "output_dir") -> None:
    """``RunError`` naming the directory and its ``[experiment]`` key when files cannot be written there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f"{temp_prefix()}probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        what = key.replace("_dir", "").replace("_", " ")
        raise RunError(
            f"cannot write to {what} directory {str(directory)!r} ({exc.strerror}); choose another [experiment].{key}"
        ) from None


# --- shared cache entries (indexes, embeddings): build costs and forced rebuilds -------------------

T = TypeVar("T")


@dataclass
class BuildCosts:
    """The cache entries a cell read or built: their from-scratch seconds, and this run's seconds in them."""

    build_s: float = 0.0
    spent_s: float = 0.0


_COSTS: ContextVar[BuildCosts | None] = ContextVar("zerda_eval_build_costs", default=None)
_REBUILD: ContextVar[bool] = ContextVar("zerda_eval_rebuild_caches", default=False)
_REBUILT: set[str] = set()  # entries rebuilt by this process under --force: once each, not once per cell


@contextmanager
def counting_builds() -> Iterator[BuildCosts]:
    """Collect ``record_build`` calls made inside the block (a cell's indexing)."""
    costs = BuildCosts()
    token = _COSTS.set(costs)
    try:
        yield costs
    finally:
        _COSTS.reset(token)


def record_build(build_s: float, spent_s: float) -> None:
    """A cache entry was used: it cost ``build_s`` from scratch (recorded with it) and ``spent_s`` now."""
    costs = _COSTS.get()
    if costs is not None:
        costs.build_s += build_s
        costs.spent_s += spent_s


def costed(make: Callable[[], T]) -> tuple[T, float]:
    """``make()`` and its from-scratch cost (wall time, minus time in cache entries, plus their build time).

    The cost is also recorded for the enclosing ``counting_builds``; an in-process memo of the value
    replays it with ``record_build(cost, 0.0)`` on reuse.
    """
    start = time.perf_counter()
    with counting_builds() as inner:
        value = make()
    wall = time.perf_counter() - start
    scratch = wall - inner.spent_s + inner.build_s
    record_build(scratch, wall)
    return value, scratch


@contextmanager
def rebuilding_caches(active: bool) -> Iterator[None]:
    """Inside the block (``--force``), each cache entry used is rebuilt once by this process."""
    token = _REBUILD.set(active)
    try:
        yield
    finally:
        _REBUILD.reset(token)


def forget_rebuilt() -> None:
    """A new run starts: under ``--force`` every entry it uses is rebuilt again (once)."""
    _REBUILT.clear()


def must_rebuild(entry: Path) -> bool:
    """True the first time a forced cell of this process uses ``entry`` (then it is rebuilt)."""
    if not _REBUILD.get() or str(entry) in _REBUILT:
        return False
    _REBUILT.add(str(entry))
    return True
