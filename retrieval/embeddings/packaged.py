"""Model files shipped inside wheels: find them without importing the package, hash them, unpack them once.

Some model wheels run code on import (``all_minilm_l6_v2`` prints a line and pulls pandas and
matplotlib), so their files are located with ``importlib.util.find_spec``, which reads the package's
location and imports nothing. Unpacked folders are keyed by the archive's SHA-256, written atomically
under a file lock, and checked against the archive's member sizes on every load, so a half-written or
tampered folder is replaced instead of silently used.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType

from retrieval.embeddings.base import EmbedderError, EmbedderUnavailable

INSTALL_HINT = 'pip install "zerda-eval[neural]"'
CACHE_ENV = "ZERDA_MODEL_CACHE"


def import_neural(module: str, distribution: str) -> ModuleType:
    """Import ``module`` of the ``neural`` extra, or raise a one-line ``EmbedderUnavailable`` naming the install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbedderUnavailable(f"{distribution} is not installed; {INSTALL_HINT}") from exc


def package_file(package: str, relative: str, distribution: str) -> Path:
    """The file ``relative`` inside the installed ``package`` (not imported), or ``EmbedderUnavailable``."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"{distribution} is not installed; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise EmbedderUnavailable(f"{path} is missing from the installed {distribution}; reinstall it ({INSTALL_HINT})")
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
    archive's member sizes is removed and unpacked again.
    """
    from filelock import FileLock

    root = model_cache_root()
    target = root / f"{name}-{sha256[:16]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as bundle, FileLock(str(target) + ".lock"):
            members = [info for info in bundle.infolist() if not info.is_dir()]
            if target.is_dir() and _matches(target, members):
                return target
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


def _matches(folder: Path, members: list[zipfile.ZipInfo]) -> bool:
    """True when every archive member is in ``folder`` with its size."""
    for info in members:
        path = folder / info.filename
        if not path.is_file() or path.stat().st_size != info.file_size:
            return False
    return True
