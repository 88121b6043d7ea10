"""The harness's exception hierarchy: every user mistake is one of these, with a one-line message.

A message says what was wrong, where (file, key, line, id) and what would fix it. Only ``cli.py``
turns these into exit codes; library code never prints or calls ``sys.exit``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ZerdaEvalError(Exception):
    """Base class of every error the harness raises for a user mistake or an unusable input."""


class ConfigError(ZerdaEvalError):
    """An experiment file is malformed, or names an unknown key, system, dataset, measure or value."""


class DatasetError(ZerdaEvalError):
    """A dataset id is unknown, or its files are missing or unavailable offline."""


class DataFormatError(ZerdaEvalError):
    """A data file (corpus, queries, qrels, run) cannot be parsed; the message names file and line."""


class RunError(ZerdaEvalError):
    """A grid cell failed for a reason the user can act on (bad embedder output, unwritable output dir)."""


class UserCodeError(RunError):
    """A user's system (``family = "python"``) raised or returned something unusable.

    ``user_traceback`` holds the user's own frames (their code, theirs to read); the CLI prints it
    above the one-line message. Empty when the user's code returned a wrong value without raising.
    """

    def __init__(self, message: str, user_traceback: str = ""):
        super().__init__(message)
        self.user_traceback = user_traceback

    def __reduce__(self):  # pickled across Dask workers with its traceback text
        return type(self), (str(self), self.user_traceback)


class ZerdaEvalWarning(UserWarning):
    """Something the harness repaired on its own (a damaged cell recomputed, a corrupt cache entry rebuilt).

    The CLI shows each as one ``zerda-eval: warning:`` line; library code never prints.
    """


def did_you_mean(value: str, allowed: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest allowed value, or an empty string."""
    matches = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def unknown_value_message(kind: str, value: str, allowed: Iterable[str], where: str = "") -> str:
    """One-line message for an unknown name: what, where, the closest match, and the allowed values."""
    allowed = sorted(allowed)
    location = f"{where}: " if where else ""
    return f"{location}unknown {kind} {value!r}{did_you_mean(value, allowed)}; allowed: {', '.join(allowed)}"
