"""Where the data lives: the shared folder of bundled source files, and ir_datasets' cache folder."""

from __future__ import annotations

import os
from pathlib import Path

from zerda_eval.errors import DatasetError

DATA_ENV = "ZERDA_EVAL_DATA"


def shared_data_dir() -> Path:
    """The folder of bundled source files: ``$ZERDA_EVAL_DATA``, else ``<repo root>/../shared/datasets``."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    return Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def source_file(folder: str, name: str) -> Path:
    """Path of one bundled source file; a one-line ``DatasetError`` naming it when it is missing."""
    path = shared_data_dir() / folder / name
    if not path.is_file():
        raise DatasetError(
            f"bundled data file {path} is missing: put the original files of {folder!r} there, "
            f"or set {DATA_ENV} to the folder that holds {folder}/"
        )
    return path


def check_ir_datasets_home() -> None:
    """A one-line ``DatasetError`` when ir_datasets' cache folder cannot be used (call before importing it).

    ir_datasets creates ``$IR_DATASETS_HOME`` (else ``~/.ir_datasets``) when it is imported and
    crashes there, with a traceback, when that path is a file or cannot be created or written.
    """
    home = Path(os.environ.get("IR_DATASETS_HOME") or Path.home() / ".ir_datasets").expanduser()
    where = f"ir_datasets' cache folder {home} (IR_DATASETS_HOME)"
    fix = "set IR_DATASETS_HOME to a writable folder"
    if home.exists() and not home.is_dir():
        raise DatasetError(f"{where} is a file, not a folder; {fix}")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"{where} cannot be created ({exc.strerror}); {fix}") from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise DatasetError(f"{where} is not writable; {fix}")


def ir_datasets_home() -> Path:
    """The cache folder ir_datasets reads from (``$IR_DATASETS_HOME``, else ``~/.ir_datasets``).

    ir_datasets fixes each dataset's folder when it is imported, so we ask it (through the public
    ``docs_path(force=False)`` of its ``cranfield`` entry, which never downloads) instead of re-reading
    the environment: the seeded files then land exactly where ir_datasets will look.
    """
    import ir_datasets

    return Path(ir_datasets.registry["cranfield"].docs_handler().docs_path(force=False)).parents[1]
