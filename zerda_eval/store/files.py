"""Files the harness writes, written safely: atomically, with the user's umask, under locks.

Every file is written to a temporary name in the same directory and moved into place with
``os.replace`` (atomic on POSIX), so a killed run leaves either a whole file or none. Temporary names
carry the writer's pid (``.tmp-<pid>-<host>-...``): a clean-up removes only those of dead processes
on this host, so concurrent runs never delete each other's files. Written files get the mode the
user's umask gives (0644 by default), not ``mkstemp``'s 0600. ``build_lock`` is the one file lock.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from zerda_eval.errors import RunError

TMP_PREFIX = ".tmp-"
_TMP_NAME = re.compile(r"^\.tmp-(\d+)-(.*)-[^-]*$")


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
