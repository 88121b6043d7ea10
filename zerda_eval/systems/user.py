"""Your own retriever in the grid (``family = "python"``).

The contract, duck-typed: an object with ``search(query_text, k) -> [(doc_id, score), ...]`` (best
first, doc ids of the collection) and, optionally, ``index(collection)``, called once per cell before
any query; or a plain callable ``f(query_text, k)``. ``index`` gets a ``Documents`` view: ``id``,
``language``, ``doc_ids``, ``texts`` and the protocol ``options``, and nothing else: no queries, no
judgements (a system that could read them could score nDCG 1.0). The view is the cell's own copy, its
ids and texts tuples and its options a read-only mapping, so a system that writes into what it is
given cannot change another system's numbers (collections are cached and shared per process).

From TOML, ``object = "package.module:factory"`` names a factory (a class or function) called with
``options`` as keyword arguments, once per cell. From the Python API,
``Experiment.from_dict(..., systems={"mine": obj})`` puts ``obj`` itself in the grid
(``object = "mine"``). Either way ``version`` is required: the cell id covers object, version and
options, not your code, so change ``version`` when your code's results change; finished cells are
reused otherwise. The grid times each query and applies the tie-break, depth, fusion and
comparisons as for every built-in family.
"""

from __future__ import annotations

import copy
import importlib
import math
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from zerda_eval.datasets.streamed import StreamedTexts
from zerda_eval.errors import ConfigError, RunError, UserCodeError
from zerda_eval.ranking import Ranking, sort_ranking
from zerda_eval.systems.base import System
from zerda_eval.systems.params import DUPLICATES, ParamSpec

FACTORY_SEPARATOR = ":"


def is_factory_path(value: str) -> bool:
    """``"package.module:factory"`` (imported) rather than the name of an object given to the Python API."""
    return FACTORY_SEPARATOR in value


def import_factory(path: str, where: str) -> Callable[..., Any]:
    """The factory ``package.module:name`` names; a one-line ``ConfigError`` when it cannot be imported."""
    module_name, _, attribute = path.partition(FACTORY_SEPARATOR)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ConfigError(
            f"{where}: cannot import {module_name!r} ({type(exc).__name__}: {exc}); "
            "put its folder on PYTHONPATH or install it"
        ) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ConfigError(f"{where}: {module_name!r} has no callable {attribute!r}; give 'package.module:factory'")
    return factory


@dataclass(frozen=True)
class Documents:
    """What a user's ``index(collection)`` receives: the documents of the cell's dataset, never its queries or qrels."""

    id: str
    language: str
    doc_ids: tuple[str, ...]
    texts: Sequence[str]  # a tuple, or a private ``StreamedTexts`` (read on demand) for a very large corpus
    options: Mapping[str, Any]


def documents_of(collection: Any) -> Documents:
    """A private, read-only view of ``collection``'s documents for one user system."""
    doc_ids, texts = tuple(collection.doc_ids), collection.texts
    if isinstance(texts, StreamedTexts):  # read on demand, listed by the view's own (immutable) ids
        private_texts: Sequence[str] = StreamedTexts(texts.dataset_id, doc_ids, texts.title)
    else:
        private_texts = tuple(texts)
    options = MappingProxyType(copy.deepcopy(dict(collection.options)))
    return Documents(collection.id, collection.language, doc_ids, private_texts, options)


class PythonSystem(System):
    """A user's retriever: ``index(collection)`` (optional) and ``search(query_text, k)``, or a callable."""

    family = "python"
    description = "your own retriever: an object with index(collection) / search(query_text, k), or a callable"
    param_specs: ClassVar[dict[str, ParamSpec]] = {
        "object": ParamSpec(
            None,
            "str",
            "'package.module:factory' (called with options), or the name of a system given to the Python API",
            required=True,
        ),
        "version": ParamSpec(
            None, "str", "your system's version: part of the cell id, change it when its results change", required=True
        ),
        "options": ParamSpec({}, "table", "keyword arguments of the factory"),
        "duplicates": DUPLICATES,
    }

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        if not params["version"]:
            raise ConfigError(f"{where}.version: give a non-empty version string")
        if is_factory_path(params["object"]):
            import_factory(params["object"], f"{where}.object")
        elif params["options"]:
            raise ConfigError(f"{where}.options: only a factory ('package.module:factory') takes options")

    @property
    def name(self) -> str:
        """What messages call this system: the grid cell's label, else its object."""
        return self.label or self.params["object"]

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        self._object = self._resolve()
        self._doc_ids = frozenset(collection.doc_ids)
        index = getattr(self._object, "index", None)
        if callable(index):
            _call_user(index, (documents_of(collection),), f"system {self.name!r}: index(collection)")
        self.stats["python"] = {"object": self.params["object"], "version": self.params["version"]}

    def _resolve(self) -> Any:
        name = self.params["object"]
        if is_factory_path(name):
            factory = import_factory(name, f"system object {name!r}")
            return _call_user(factory, (), f"system {self.name!r}: {name}(...)", self.params["options"])
        objects: Mapping[str, Any] = getattr(self, "objects", None) or {}
        if name not in objects:
            raise RunError(
                f"system object {name!r} was not given: pass it as "
                f"Experiment.from_dict(..., systems={{{name!r}: obj}}), or name a factory 'package.module:factory'"
            )
        return objects[name]

    def search(self, queries: Mapping[str, str], k: int) -> dict[str, Ranking]:
        """The base class's search, one query at a time, so a failure names its query id."""
        run = {}
        for qid, text in queries.items():
            self._qid = qid
            run.update(super().search({qid: text}, k))
        return run

    def _search(self, text: str, k: int) -> Ranking:
        search = getattr(self._object, "search", self._object)
        where = f"system {self.name!r}: search on query {self._qid!r}"
        if not callable(search):
            raise RunError(f"system {self.name!r}: its object has no search(query_text, k) and is not callable")
        hits = _call_user(search, (text, k), where)
        if isinstance(hits, (str, bytes, Mapping)) or not isinstance(hits, Iterable):
            raise UserCodeError(f"{where} returned {hits!r}; return a list of (doc_id, score) pairs, best first")
        ranking = []
        for hit in _call_user(list, (hits,), where):  # a generator runs the user's code while it is listed
            try:
                doc_id, score = hit
                ranking.append((str(doc_id), float(score)))
            except (TypeError, ValueError):
                raise UserCodeError(
                    f"{where} returned {hit!r} among its hits; return a list of (doc_id, score) pairs"
                ) from None
            if math.isnan(ranking[-1][1]):
                raise UserCodeError(f"{where} returned score nan for doc {doc_id!r}; scores must be numbers")
            if ranking[-1][0] not in self._doc_ids:
                raise RunError(f"{where} returned doc id {doc_id!r}, which is not in dataset {self.collection.id!r}")
        return sort_ranking(ranking, None, self.params["duplicates"], where) if self.params["duplicates"] else ranking


def _call_user(function: Callable[..., Any], args: tuple, where: str, kwargs: Mapping[str, Any] | None = None) -> Any:
    """``function(*args, **kwargs)``; an exception of the user's code is a ``UserCodeError`` that names
    ``where`` and carries the user's own traceback (without this module's frame)."""
    try:
        return function(*args, **(kwargs or {}))
    except Exception as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        raise UserCodeError(f"{where} raised {type(exc).__name__}: {exc}", "".join(frames)) from None
