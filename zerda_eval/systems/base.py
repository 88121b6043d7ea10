"""What every system family shares: declarative parameter specs, the System base class, doc-id mapping.

A family is a ``System`` subclass with a ``family`` name and ``param_specs``. Like a scikit-learn
estimator, ``__init__`` only stores parameters; ``index(collection)`` builds the index and
``search(queries, k)`` returns ``{qid: [(doc_id, score), ...]}`` with the collection's doc ids, best
first. Parameters are checked against their ``ParamSpec`` when the experiment file is read, so a bad
value fails before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from zerda_eval.checks import check_keys
from zerda_eval.datasets.collection import NO_ANSWER_ID
from zerda_eval.errors import ConfigError, RunError
from zerda_eval.ranking import Ranking
from zerda_eval.systems.params import ParamSpec

COMMON_PARAMS = {
    "no_answer_threshold": ParamSpec(
        None,
        "float",
        "Qur'an QA: answer only the no-answer id '-1' when the top hit's raw score is below this "
        "(BM25 families: the BM25 score before max-normalisation; dense: the cosine; others: the ranking score)",
        optional=True,
    ),
}


class System:
    """Base of every family. Subclasses set ``family``, ``param_specs`` and implement ``_index``/``_search``."""

    family: ClassVar[str]
    description: ClassVar[str]
    param_specs: ClassVar[dict[str, ParamSpec]]
    timed: ClassVar[bool] = True  # False: its rankings come from elsewhere (a run file); latency not measured
    objects: Mapping[str, Any] = {}  # systems given to the Python API by name (family "python" reads them)
    content: Mapping[str, Any] = {}  # this cell's ``content_key`` (a run file's path and hash, an OpenVINO precision)
    label: str = ""  # the label of the grid cell it runs in (what messages about it name)

    def __init__(self, **params: Any):
        self.params = params
        self.stats: dict[str, Any] = {}

    @classmethod
    def all_specs(cls) -> dict[str, ParamSpec]:
        """The family's parameters plus the ones every family takes."""
        return {**cls.param_specs, **COMMON_PARAMS}

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Defaults filled in and every value checked; unknown names get a "did you mean"."""
        specs = cls.all_specs()
        check_keys(params, specs, where, f"parameter of {cls.family}")
        for name, spec in specs.items():
            if spec.required and name not in params:
                raise ConfigError(f"{where}.{name}: required by family {cls.family!r} ({spec.help})")
        resolved = {
            name: spec.check(params[name], f"{where}.{name}") if name in params else spec.default
            for name, spec in specs.items()
        }
        cls.check_combination(resolved, where)
        if "embedder" in resolved:
            from zerda_eval.systems.encoders import check_embedder_options

            check_embedder_options(resolved, where)
        return resolved

    @classmethod
    def check_combination(cls, params: dict[str, Any], where: str) -> None:
        """Cross-parameter rules (none by default); raise ``ConfigError``."""

    @classmethod
    def content_key(cls, params: Mapping[str, Any], dataset: str, where: str) -> dict[str, Any]:
        """What the cell's numbers depend on besides params and code, on ``dataset`` (a run file's hash; an encoder
        on OpenVINO, the precision this CPU runs it in: ``encoders.machine_precision``)."""
        if "embedder" not in params:
            return {}
        from zerda_eval.systems.encoders import machine_precision

        return machine_precision(params)

    def index(self, collection: Any, cache_dir: Path | None = None) -> None:
        """Build the index over ``collection`` (a ``zerda_eval.datasets.Collection``).

        A family with an ``embedder`` records the model that ran in ``stats["embedder"]`` (``neural``
        names one by the corpus's language) and the device it ran
        on in ``stats["embedder_device"]``.
        """
        from zerda_eval.systems.encoders import embedders_that_ran

        self.collection = collection
        with embedders_that_ran() as embedders:
            self._index(collection, cache_dir)
        for embedder in embedders[:1]:  # a family encodes its corpus with one embedder
            self.stats["embedder"] = embedder.name
            self.stats["embedder_device"] = embedder.params.get("device", "cpu")
            self._record_runtime(embedder.params)

    def _record_runtime(self, params: Mapping[str, Any]) -> None:
        """``stats["embedder_onnx"]``: the exported file and how its engine ran it (OpenVINO's precision last); a
        precision other than the one the cell id was resolved for (``content_key``) is a ``RunError``."""
        onnx = params.get("onnx")
        if onnx is None:
            return
        self.stats["embedder_onnx"] = onnx
        expected = self.content.get("openvino_precision")
        if expected is not None and "-openvino-" in onnx and not onnx.endswith(f"-{expected}"):
            raise RunError(
                f"the encoder ran OpenVINO as {onnx.rsplit('-', 1)[-1]}, the cell was resolved for {expected} "
                "($ZERDA_OPENVINO_PRECISION differs between the validation and this process); run with one setting"
            )

    def analysis(self, collection: Any) -> Any:
        """The resolved analysis options on ``collection`` (recorded in ``stats["analysis"]``)."""
        from zerda_eval.systems.analysis import resolve_analysis

        analysis = resolve_analysis(self.params, collection)
        self.stats["analysis"] = analysis.describe()
        return analysis

    def search(self, queries: Mapping[str, str], k: int) -> dict[str, Ranking]:
        """``{qid: [(doc_id, score), ...]}`` best first, at most ``k`` per query.

        With ``no_answer_threshold``, a query whose top hit's raw score (``_scored``) is below it, or
        that has no hit, is answered with the no-answer id alone.
        """
        run = {}
        for qid, text in queries.items():
            results, top = self._scored(text, k)
            run[qid] = self.answer(results, top)
        return run

    def after_search(self) -> None:
        """Called once after the timed queries: work that is no query's latency, e.g. an approximate index's
        recall against exact search, recorded in ``stats``. Nothing by default."""

    def answer(self, results: Ranking, top: float | None) -> Ranking:
        """``results``, or the no-answer id alone when ``no_answer_threshold`` is set and ``top`` is below it."""
        threshold = self.params.get("no_answer_threshold")
        if threshold is not None and (top is None or top < threshold):
            return [(NO_ANSWER_ID, 1.0)]
        return results

    def _index(self, collection: Any, cache_dir: Path | None) -> None:
        raise NotImplementedError

    def _scored(self, text: str, k: int) -> tuple[Ranking, float | None]:
        """The results and the raw score of the top hit (None without a hit); families that rescale
        their scores (BM25's max-normalisation) override this to return the score before rescaling."""
        results = self._search(text, k)
        return results, (results[0][1] if results else None)

    def _search(self, text: str, k: int) -> Ranking:
        raise NotImplementedError
