"""Every analysis option reaches every family that tokenizes or embeds, and analysed BM25 equals outside libraries.

The first group runs EVERY registered family with and without each analysis option it declares (and
with the dataset-level ``normalization``) on a small mixed English/Arabic collection built so that each
option changes the tokens or texts a system indexes and searches: a family that records an option but
ignores it returns the same run twice and fails. The second group checks the analysed scores against
bm25s and rank_bm25 given tokens made independently (a regex, PyStemmer and the same stopword list).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from retrieval.core.stopwords import stopword_list
from retrieval.core.tokenize import stopword_set
from zerda_eval.datasets.collection import Collection
from zerda_eval.errors import ConfigError
from zerda_eval.systems import SYSTEMS, build_system, resolve_params

# option -> a value that must change what a system sees (off: "none" / False / the dataset's). Arabic lists
# and stemmer: the routed family sends Arabic queries to BM25 and the others to the embedder.
ANALYSIS_OPTIONS = {
    "normalization": "light",
    "stemmer": "arabic",
    "stopwords": "arabic",
    "lowercase": True,
}
TEXT_FREE_FAMILIES = {"zerda.metadata"}  # families that read no text: they take no analysis option
EXTERNAL_FAMILIES = {"python", "run_file"}  # rankings made by the user's code or elsewhere: nothing to analyse

DOCS = {
    "e1": "Volcanoes erupted and the lava flows destroyed villages.",
    "e2": "The volcano erupts when MAGMA pressure builds under the crust.",
    "e3": "Honey bees pollinate FLOWERS in the spring and summer.",
    "e4": "And then the bees returned to the hive.",
    "e5": "Jet engines burn kerosene; the thrust lifts aircraft.",
    "a1": "قال أحمد إن الكتاب مفيد للطلاب",
    "a2": "ذهب الولد إلى المدرسة في الصباح",
    "a3": "احمد يقرأ الكتاب في المكتبة",
    "a4": "الطلاب في المدرسه يدرسون العلوم",
    "a5": "سافر إلى دمشق",  # shares only a stopword with the query
    "a6": "بالمدرسة مكتبة كبيرة",  # shares only a stem with the query
}
QUERIES = {
    "en": "THE VOLCANO ERUPTED AND THE LAVA FLOWED",
    "ar": "أحمد إلى المدرسة",
}


def collection(normalization: str = "none") -> Collection:
    return Collection(
        id="mixed-analysis",
        language="en",
        doc_ids=list(DOCS),
        texts=list(DOCS.values()),
        queries=dict(QUERIES),
        qrels={qid: {} for qid in QUERIES},
        options={"normalization": normalization},
    )


def variants() -> list[tuple[str, dict]]:
    """Every family once (zerda.keyword and zerda.hybrid's keyword branch once per engine), quickest settings."""
    cases = []
    for family, cls in sorted(SYSTEMS.items()):
        specs = cls.all_specs()
        base = {"dim": 64} if "dim" in specs else {}
        if family == "zerda.keyword":
            cases += [(family, {"engine": "reference"}), (family, {"engine": "fast"})]
        elif family == "zerda.hybrid":
            cases += [(family, {**base, "keyword_engine": engine}) for engine in ("reference", "fast")]
        else:
            cases.append((family, base))
    return cases


def embedders_for(family: str, option: str) -> list[dict]:
    """The embedders an option must reach: lowercase is for text (wordllama); the rest also for LSA tokens."""
    if "embedder" not in SYSTEMS[family].all_specs():
        return [{}]
    if option == "lowercase":
        return [{"embedder": "wordllama"}]
    if option in ("stemmer", "stopwords") and family in ("zerda.vector", "pipeline.dense", "dense"):
        return [{"embedder": "lsa"}]  # their only tokenizer; with wordllama these options are refused
    return [{"embedder": "lsa"}, {"embedder": "wordllama"}]


def search(family: str, params: dict, data: Collection) -> dict:
    system = build_system(family, params)
    system.index(data)
    return system.search(data.queries, len(DOCS))


CASES = [
    (family, params, option, extra)
    for family, params in variants()
    for option in ANALYSIS_OPTIONS
    if option in SYSTEMS[family].all_specs()
    for extra in embedders_for(family, option)
]


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.mark.parametrize(("family", "params", "option", "extra"), CASES)
def test_every_analysis_option_changes_what_every_family_returns(
    family: str, params: dict, option: str, extra: dict
) -> None:
    data = collection()
    off = search(family, {**params, **extra}, data)
    on = search(family, {**params, **extra, option: ANALYSIS_OPTIONS[option]}, data)
    assert on != off, f"{family} {extra} ignores {option}"


@pytest.mark.parametrize(
    ("family", "params", "extra"),
    [
        (family, params, extra)
        for family, params in variants()
        if "normalization" in SYSTEMS[family].all_specs()
        for extra in embedders_for(family, "normalization")
    ],
)
def test_dataset_level_normalization_reaches_every_family(family: str, params: dict, extra: dict) -> None:
    plain = search(family, {**params, **extra}, collection("none"))
    light = search(family, {**params, **extra}, collection("light"))
    assert light != plain, f"{family} {extra} ignores the dataset's normalization"
    # the family's own option overrides the dataset's, both ways
    assert search(family, {**params, **extra, "normalization": "none"}, collection("light")) == plain
    assert search(family, {**params, **extra, "normalization": "light"}, collection("none")) == light


def test_families_that_take_no_analysis_option_read_no_text() -> None:
    for family, cls in SYSTEMS.items():
        if not set(ANALYSIS_OPTIONS) & set(cls.all_specs()):
            reads_no_text = TEXT_FREE_FAMILIES | EXTERNAL_FAMILIES
            assert family in reads_no_text, f"{family} takes no analysis option: does it read text?"


def test_none_is_writable_for_stemmer_and_stopwords_and_means_off() -> None:
    data = collection()
    assert search("zerda.keyword", {"stemmer": "none", "stopwords": "none"}, data) == search("zerda.keyword", {}, data)
    resolved = resolve_params("pipeline.sparse", {"stemmer": "arabic", "stopwords": "arabic"})
    assert (resolved["stemmer"], resolved["stopwords"]) == ("arabic", "arabic")
    assert resolve_params("zerda.keyword", {"stemmer": "porter"})["stemmer"] == "porter"  # any PyStemmer language


def test_token_options_with_an_embedder_that_does_not_tokenize_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"stemmer.*lsa"):
        resolve_params("zerda.vector", {"embedder": "wordllama", "stemmer": "english"}, "systems[0].params")


def test_the_analysis_is_recorded_in_the_stats() -> None:
    system = build_system("zerda.hybrid", {"dim": 64, "embedder": "lsa", "stopwords": "english", "lowercase": True})
    system.index(collection("light"))
    assert system.stats["analysis"] == {
        "normalization": "light",
        "stemmer": "none",
        "stopwords": "english",
        "lowercase": True,
    }


# ---------------------------------------------------------------- analysed BM25 against bm25s / rank_bm25


def independent_tokens(text: str, stemmer) -> list[str]:
    """Tokens made without ``retrieval.core``: a word regex, the English stopword list, PyStemmer."""
    stop = set(stopword_list("english"))
    return stemmer.stemWords([t for t in re.findall(r"\w{2,}", text.lower()) if t not in stop])


@pytest.fixture(scope="module")
def cranfield():
    from zerda_eval.datasets import load_collection

    return load_collection("cranfield")


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_analysed_keyword_engines_match_bm25s_with_the_same_stemmer_and_stopwords(engine: str, cranfield) -> None:
    """bm25s tokenizes itself (lower-case, its word pattern, our stopword list, PyStemmer): same scores.

    bm25s's Lucene BM25 lacks the (k1 + 1) factor, so scores agree after max-normalising; a repeated query
    word counts each time in both (issue 18.1).
    """
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    k1, b = 1.2, 0.6
    reference = bm25s.BM25(method="lucene", k1=k1, b=b)
    stop = sorted(stopword_list("english"))
    corpus = bm25s.tokenize(
        list(cranfield.texts), stopwords=stop, stemmer=stemmer.stemWords, return_ids=False, show_progress=False
    )
    reference.index(corpus, show_progress=False)
    queries = dict(list(cranfield.queries.items())[:10])
    params = {"engine": engine, "k1": k1, "b": b, "stemmer": "english", "stopwords": "english"}
    system = build_system("zerda.keyword", params)
    system.index(cranfield)
    run = system.search(queries, 20)
    row = {d: i for i, d in enumerate(cranfield.doc_ids)}
    for qid, text in queries.items():
        terms = independent_tokens(text, stemmer)
        expected = np.asarray(reference.get_scores(terms), dtype=np.float64)
        returned = [row[d] for d, _ in run[qid]]
        np.testing.assert_allclose([s for _, s in run[qid]], expected[returned] / expected.max(), rtol=1e-5, atol=1e-6)


def test_analysed_pipeline_sparse_matches_rank_bm25_with_k1_b(cranfield) -> None:
    import Stemmer
    from rank_bm25 import BM25Okapi

    stemmer = Stemmer.Stemmer("english")
    k1, b = 0.9, 0.4
    texts = list(cranfield.texts[:300])
    data = dataclasses.replace(cranfield, doc_ids=cranfield.doc_ids[:300], texts=texts)
    reference = BM25Okapi([independent_tokens(t, stemmer) for t in texts], k1=k1, b=b)
    queries = dict(list(cranfield.queries.items())[:10])
    system = build_system("pipeline.sparse", {"k1": k1, "b": b, "stemmer": "english", "stopwords": "english"})
    system.index(data)
    run = system.search(queries, 300)
    for qid, text in queries.items():
        raw = reference.get_scores(independent_tokens(text, stemmer))
        positive = [i for i in np.argsort(-raw, kind="stable") if raw[i] > 0]
        assert [d for d, _ in run[qid]] == [data.doc_ids[i] for i in positive]
        np.testing.assert_allclose([s for _, s in run[qid]], raw[positive] / raw[positive[0]], rtol=1e-9)


def test_stopword_sets_hold_both_arabic_spellings() -> None:
    arabic = stopword_set("arabic")
    assert {"إلى", "الى", "في", "هذه"} <= arabic
    assert {"the", "and", "of"} <= stopword_set("english")
