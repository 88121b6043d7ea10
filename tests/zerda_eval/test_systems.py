"""The systems registry: every family builds from a plain dict and retrieves like the seed code it wraps.

References are independent of the families: rank_bm25 / bm25s for BM25, a brute-force
``retrieval.core.cosine`` over an LSA embedder fitted here, the seeds' retrievers built directly on
the same chunks, ``MaxSimScorer`` on wordllama's raw token vectors, and hand-computed RRF.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.core import cosine, tokenize
from retrieval.embeddings import load_embedder
from retrieval.pipeline.late_interaction import MaxSimScorer
from retrieval.zerda import (
    ChunkMetadata,
    ContextEngineConfig,
    DocumentChunk,
    HybridRetriever,
    KeywordRetriever,
    RetrieverConfig,
    VectorRetriever,
)
from zerda_eval.datasets import load_collection
from zerda_eval.datasets.collection import NO_ANSWER_ID, Collection
from zerda_eval.errors import ConfigError
from zerda_eval.systems import SYSTEMS, build_system, resolve_params

# Families whose retrieval the harness implements; "python" and "run_file" need the user's object or
# file (required parameters) and are tested with toy ones in tests/zerda_eval/api/.
BUILT_IN = sorted(f for f, cls in SYSTEMS.items() if not any(spec.required for spec in cls.all_specs().values()))
FAST = {"embedder": "lsa", "dim": 64}  # corpus-fitted, no weights: the quick embedder for tests

ENGLISH_DOCS = {
    "d1": "The cat sat on the warm mat by the kitchen fire.",
    "d2": "Jet engines burn kerosene to produce thrust for aircraft.",
    "d3": "Photosynthesis converts sunlight, water and carbon dioxide into glucose in green plants.",
    "d4": "The stock market fell sharply as investors sold bank shares.",
    "d5": "Volcanoes erupt molten lava and ash when magma pressure builds.",
    "d6": "A recipe for bread needs flour, yeast, water and salt baked in an oven.",
    "d7": "Supersonic aircraft wings create shock waves and sonic booms.",
    "d8": "Honey bees pollinate flowers and produce honey in their hives.",
}
ENGLISH_QUERIES = {
    "q1": "how do plants turn sunlight into glucose",
    "q2": "molten lava and magma",
    "q3": "honey bees pollinate flowers",
}
ENGLISH_ANSWERS = {"q1": "d3", "q2": "d5", "q3": "d8"}

ARABIC_DOCS = {  # topic words recur in two documents each: LSA keeps only terms of >= 2 documents
    "a1": "الصلاة فرض على كل مسلم والصلاة عماد الدين",
    "a2": "أوقات الصلاة خمسة في اليوم والليلة",
    "a3": "الصيام في شهر رمضان فرض على كل مسلم",
    "a4": "يفطر الصائم في رمضان عند غروب الشمس",
    "a5": "الزكاة حق المال وتعطى للفقراء والمساكين",
    "a6": "يدفع المسلم الزكاة للفقراء مرة كل عام",
    "a7": "الحج إلى مكة فرض على المستطيع",
    "a8": "يطوف الحجاج حول الكعبة في مكة",
}
ARABIC_QUERIES = {"r1": "الصيام في شهر رمضان", "r2": "الزكاة للفقراء", "r3": "الحج إلى مكة"}
ARABIC_ANSWERS = {"r1": {"a3"}, "r2": {"a5", "a6"}, "r3": {"a7"}}


def make_collection(
    docs: dict[str, str], queries: dict[str, str], language: str = "en", cid: str = "tiny"
) -> Collection:
    """A hand-made collection (qrels: none needed by the systems)."""
    return Collection(
        id=cid,
        language=language,
        doc_ids=list(docs),
        texts=list(docs.values()),
        queries=dict(queries),
        qrels={qid: {} for qid in queries},
        options={"normalization": "none"},
    )


def fast_params(family: str) -> dict:
    """The quick embedder for every family that takes one (late interaction: the smallest wordllama)."""
    specs = SYSTEMS[family].all_specs()
    if "embedder" in specs:
        return dict(FAST)
    return {"dim": 64} if "dim" in specs else {}


def english_params(family: str) -> dict:
    """The pretrained English embedder (wordllama, 64 dimensions) for every family that embeds.

    LSA learns from the corpus it searches; on an 8-document corpus (min_df) it knows too few terms
    to judge answer quality, so the tiny English tests use wordllama.
    """
    return {"dim": 64} if "dim" in SYSTEMS[family].all_specs() else {}


def run(family: str, params: dict, collection: Collection, k: int, queries: dict | None = None) -> dict:
    system = build_system(family, params)
    system.index(collection)
    return system.search(queries if queries is not None else collection.queries, k)


def sorted_by_score(scores: list[float]) -> list[int]:
    """Indices by score descending, ties by lower index (the harness's tie-break for rows)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """LSA's SVD on a busy 2-core machine runs ~15x slower with a BLAS thread pool than with one thread."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def english() -> Collection:
    return make_collection(ENGLISH_DOCS, ENGLISH_QUERIES)


@pytest.fixture(scope="module")
def arabic() -> Collection:
    return make_collection(ARABIC_DOCS, ARABIC_QUERIES, language="ar", cid="tiny-ar")


@pytest.fixture(scope="module")
def cranfield() -> Collection:
    return load_collection("cranfield")


@pytest.fixture(scope="module")
def cranfield_small(cranfield: Collection) -> Collection:
    """The first 200 Cranfield documents, 10 queries, and three repeated texts (case / spacing changed).

    One corpus for every dense and hybrid test, so the families fit their LSA on it once.
    """
    docs = dict(zip(cranfield.doc_ids[:200], cranfield.texts[:200], strict=True))
    first, second = cranfield.texts[:2]
    docs.update({"dup1": first.upper(), "dup2": "  " + "   ".join(second.split()), "dup3": first})
    queries = dict(list(cranfield.queries.items())[:10])
    return make_collection(docs, queries, cid="cran200-dups")


@pytest.fixture(scope="module")
def lsa_small(cranfield_small: Collection):
    """An LSA embedder fitted here on the same texts the families fit theirs on."""
    return load_embedder("lsa", dim=64).fit(cranfield_small.texts)


# ---------------------------------------------------------------- registry: params, errors, contract


@pytest.mark.parametrize("family", BUILT_IN)
def test_builds_from_plain_dict_and_init_only_stores_params(family: str) -> None:
    given = fast_params(family)
    system = build_system(family, given)
    specs = SYSTEMS[family].all_specs()
    assert set(system.params) == set(specs)
    for name, spec in specs.items():
        assert system.params[name] == given.get(name, spec.default)
    assert build_system(family, system.params).params == system.params  # round-trip
    assert resolve_params(family, given) == system.params
    assert set(vars(system)) == {"params", "stats"} and system.stats == {}  # nothing built yet


@pytest.mark.parametrize("family", sorted(SYSTEMS))
def test_unknown_param_is_a_one_line_config_error(family: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_system(family, {"no_such_knob": 1})
    message = str(error.value)
    assert "\n" not in message
    assert "no_such_knob" in message and family in message


def test_misspelt_param_suggests_the_right_name() -> None:
    with pytest.raises(ConfigError, match=r"'k_1'.*did you mean.*'k1'"):
        build_system("zerda.keyword", {"k_1": 1.2})


@pytest.mark.parametrize(
    ("family", "params"),
    [
        ("zerda.keyword", {"b": 1.5}),
        ("zerda.keyword", {"k1": "1.2"}),
        ("zerda.keyword", {"engine": "turbo"}),
        ("zerda.vector", {"dim": 100}),
        ("zerda.keyword", {"stemmer": "klingon"}),
        ("zerda.keyword", {"stopwords": "french"}),
        ("zerda.vector", {"stemmer": "english"}),  # wordllama tokenizes itself: a stemmer would be ignored
        ("pipeline.dense", {"stopwords": "english"}),
        ("pipeline.hybrid", {"weights": [1.0, 1.0, 1.0]}),
        ("pipeline.routed", {"router": "keyword"}),
        ("zerda.keyword", {"no_answer_threshold": math.nan}),
    ],
)
def test_bad_values_are_one_line_config_errors(family: str, params: dict) -> None:
    with pytest.raises(ConfigError) as error:
        build_system(family, params)
    assert "\n" not in str(error.value)
    assert list(params)[-1] in str(error.value) or family in str(error.value)


def test_unknown_family_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'zerda.keyword'"):
        build_system("zerda.keywords", {})


# ---------------------------------------------------------------- every family on tiny collections


def check_run(run_: dict, collection: Collection, k: int) -> None:
    assert list(run_) == list(collection.queries)
    for results in run_.values():
        assert 0 < len(results) <= k
        ids = [doc_id for doc_id, _ in results]
        assert set(ids) <= set(collection.doc_ids) and len(set(ids)) == len(ids)
        scores = [score for _, score in results]
        assert all(math.isfinite(s) for s in scores)
        assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("family", BUILT_IN)
def test_every_family_finds_the_answer_on_a_tiny_english_collection(family: str, english: Collection) -> None:
    run_ = run(family, english_params(family), english, k=3)
    check_run(run_, english, 3)
    if family == "zerda.metadata":  # query unused: every document scores 1.0, corpus order
        assert all(r == [(d, 1.0) for d in english.doc_ids[:3]] for r in run_.values())
    else:
        assert {qid: r[0][0] for qid, r in run_.items()} == ENGLISH_ANSWERS


@pytest.mark.parametrize("family", BUILT_IN)
def test_every_family_runs_on_a_tiny_arabic_collection(family: str, arabic: Collection) -> None:
    """All families return valid runs; the lexical ones (Arabic query -> sparse when routed) find the answer.

    Dense families use LSA (wordllama is English-only), too thin on 6 documents to judge answers.
    """
    run_ = run(family, fast_params(family), arabic, k=3)
    check_run(run_, arabic, 3)
    if family in ("zerda.keyword", "pipeline.sparse", "pipeline.routed"):
        assert all(run_[qid][0][0] in answers for qid, answers in ARABIC_ANSWERS.items())


def test_light_normalization_reaches_the_fast_keyword_engine() -> None:
    docs = {"x1": "قال أحمد إن الكتاب مفيد", "x2": "ذهب الولد إلى المدرسة"}
    collection = make_collection(docs, {"q": "احمد"}, language="ar")
    light = run("zerda.keyword", {"engine": "fast", "normalization": "light"}, collection, k=2)
    assert light["q"][0] == ("x1", 1.0)
    plain = run("zerda.keyword", {"engine": "fast"}, collection, k=2)
    assert all(score == 0.0 for _, score in plain["q"])  # "احمد" != "أحمد" without normalisation


def test_metadata_filters_select_documents(english: Collection) -> None:
    run_ = run("zerda.metadata", {"filters": {"doc_id": ["d7", "d2", "d5"]}}, english, 2)
    assert all(results == [("d2", 1.0), ("d5", 1.0)] for results in run_.values())  # corpus order, k=2
    nothing = run("zerda.metadata", {"filters": {"category": "ar"}}, english, 5)
    assert all(results == [] for results in nothing.values())


@pytest.mark.parametrize("family", BUILT_IN)
def test_k_bounds_the_results(family: str, english: Collection) -> None:
    one = run(family, english_params(family), english, 1)
    assert all(len(results) == 1 for results in one.values())
    many = run(family, english_params(family), english, 50)
    assert all(len(results) <= len(english.doc_ids) for results in many.values())
    assert {qid: r[:1] for qid, r in many.items()} == one


def test_dense_index_writes_and_uses_the_embedding_cache(tmp_path, english: Collection) -> None:
    docs = {**ENGLISH_DOCS, "d9": "A cache-only document about lighthouses."}  # texts no other test uses
    collection = make_collection(docs, ENGLISH_QUERIES, cid="tiny-cached")
    system = build_system("pipeline.dense", FAST)
    system.index(collection, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npy"))) == 1
    embedder = load_embedder("lsa", dim=64).fit(collection.texts)
    for qid, text in collection.queries.items():
        ids, sims = brute_force(embedder, collection, text)
        results = system.search({qid: text}, 5)[qid]
        assert results[0][0] == ids[0]  # below the top, near-zero cosines tie up to float noise
        clipped = [min(1.0, max(0.0, sim)) for sim in sims[:5]]
        np.testing.assert_allclose([score for _, score in results], clipped, atol=1e-6)


# ---------------------------------------------------------------- zerda.keyword: engines, seed, bm25s


def seed_chunks(collection: Collection) -> list[DocumentChunk]:
    return [
        DocumentChunk(text=t, doc_id=d, metadata=ChunkMetadata(doc_id=d))
        for d, t in zip(collection.doc_ids, collection.texts, strict=True)
    ]


def test_keyword_engines_equal_the_seed_keyword_retriever_on_cranfield(cranfield: Collection) -> None:
    queries = dict(list(cranfield.queries.items())[:30])
    fast = run("zerda.keyword", {"engine": "fast"}, cranfield, 100, queries)
    reference = run("zerda.keyword", {"engine": "reference"}, cranfield, 100, queries)
    seed = KeywordRetriever(ContextEngineConfig(), seed_chunks(cranfield))
    for qid, text in queries.items():
        direct = [(hit.chunk.doc_id, hit.composite_score) for hit in seed.retrieve(text, 100)]
        for results in (fast[qid], reference[qid]):
            assert [d for d, _ in results] == [d for d, _ in direct]
            np.testing.assert_allclose([s for _, s in results], [s for _, s in direct], rtol=0, atol=1e-9)


@pytest.mark.parametrize("family", ["zerda.keyword", "zerda.hybrid"])
def test_fast_keyword_engine_records_each_querys_traversal(family: str, english: Collection) -> None:
    """``stats["bm25_traversals"]`` counts the queries each traversal answered: every query, once."""
    params = {"engine": "fast"} if family == "zerda.keyword" else {**FAST, "keyword_engine": "fast"}
    system = build_system(family, params)
    system.index(english)
    assert sum(system.stats["bm25_traversals"].values()) == 0
    queries = dict(list(english.queries.items())[:3])
    system.search(queries, 2)
    assert system.stats["bm25_traversals"] == {"exhaustive": len(queries)}  # a tiny index: every list walked
    reference = build_system(family, {} if family == "zerda.keyword" else FAST)
    reference.index(english)
    assert "bm25_traversals" not in reference.stats


def test_keyword_engines_agree_with_the_seed_when_nothing_matches(english: Collection) -> None:
    """No shared term (or no token at all): the seed keeps the zero-score hits; both engines must too."""
    queries = {"none": "quantum chromodynamics", "empty": "? !", "one": "honey"}
    seed = KeywordRetriever(ContextEngineConfig(), seed_chunks(english))
    for engine in ("fast", "reference"):
        run_ = run("zerda.keyword", {"engine": engine}, english, 3, queries)
        for qid, text in queries.items():
            assert run_[qid] == [(hit.chunk.doc_id, hit.composite_score) for hit in seed.retrieve(text, 3)]
    assert run_["none"] == [("d1", 0.0), ("d2", 0.0), ("d3", 0.0)]  # all tie at 0: corpus order


@pytest.mark.parametrize(
    ("family", "params"),
    [
        ("zerda.keyword", {"engine": "fast", "stemmer": "english"}),
        ("pipeline.sparse", {"stemmer": "english"}),
    ],
)
def test_stemmer_reaches_the_analyzer(family: str, params: dict, english: Collection) -> None:
    queries = {"q": "volcano eruption"}  # "Volcanoes erupt" only after Snowball stemming
    assert run(family, params, english, 3, queries)["q"][0] == ("d5", 1.0)
    unstemmed = run(family, {}, english, 3, queries)["q"]
    assert all(score == 0.0 for _, score in unstemmed)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_keyword_k1_b_match_bm25s_lucene(engine: str, cranfield: Collection) -> None:
    """bm25s's Lucene BM25 has the seed's idf and lacks the (k1+1) factor: equal after max-normalising.

    Both sum a repeated query word's score again (issue 18.1), so bm25s gets the tokens as they come.
    """
    import bm25s

    k1, b = 0.9, 0.4
    reference = bm25s.BM25(method="lucene", k1=k1, b=b)
    reference.index([tokenize(t) for t in cranfield.texts], show_progress=False)
    queries = dict(list(cranfield.queries.items())[:10])
    run_ = run("zerda.keyword", {"engine": engine, "k1": k1, "b": b}, cranfield, 20, queries)
    for qid, text in queries.items():
        terms = tokenize(text)
        expected = np.asarray(reference.get_scores(terms), dtype=np.float64)
        best = expected.max()
        row = {d: i for i, d in enumerate(cranfield.doc_ids)}
        returned = [row[d] for d, _ in run_[qid]]
        np.testing.assert_allclose([s for _, s in run_[qid]], expected[returned] / best, rtol=1e-5, atol=1e-6)
        rest = np.delete(expected, returned)
        assert rest.max() / best <= run_[qid][-1][1] + 1e-5  # nothing better was left out


# ---------------------------------------------------------------- dense: brute-force cosine


def brute_force(embedder, collection: Collection, text: str) -> tuple[list[str], list[float]]:
    """Every document by cosine (``retrieval.core.cosine``), best first, ties by corpus order."""
    doc_vectors = embedder.embed(collection.texts)
    query = embedder.embed([text])[0]
    sims = [cosine(query, v) for v in doc_vectors]
    order = sorted_by_score(sims)
    return [collection.doc_ids[i] for i in order], [sims[i] for i in order]


def test_zerda_vector_equals_brute_force_cosine(cranfield_small: Collection, lsa_small) -> None:
    run_ = run("zerda.vector", FAST, cranfield_small, 20)
    for qid, text in cranfield_small.queries.items():
        ids, sims = brute_force(lsa_small, cranfield_small, text)
        kept = [(d, s) for d, s in zip(ids, sims, strict=True) if s >= 0.0][:20]  # min_vector_score 0
        assert [d for d, _ in run_[qid]] == [d for d, _ in kept]
        np.testing.assert_allclose([s for _, s in run_[qid]], [s for _, s in kept], atol=1e-5)


def test_zerda_vector_min_score_drops_weak_hits(cranfield_small: Collection, lsa_small) -> None:
    run_ = run("zerda.vector", {**FAST, "min_vector_score": 0.3}, cranfield_small, 50)
    for qid, text in cranfield_small.queries.items():
        ids, sims = brute_force(lsa_small, cranfield_small, text)
        assert [d for d, _ in run_[qid]] == [d for d, s in zip(ids, sims, strict=True) if s >= 0.3][:50]


def test_pipeline_dense_equals_brute_force_cosine(cranfield_small: Collection, lsa_small) -> None:
    run_ = run("pipeline.dense", FAST, cranfield_small, 20)
    for qid, text in cranfield_small.queries.items():
        ids, sims = brute_force(lsa_small, cranfield_small, text)
        assert [d for d, _ in run_[qid]] == ids[:20]
        clipped = [min(1.0, max(0.0, s)) for s in sims[:20]]  # documented: similarity clipped to [0, 1]
        np.testing.assert_allclose([s for _, s in run_[qid]], clipped, atol=1e-5)


# ---------------------------------------------------------------- zerda.hybrid vs the seed HybridRetriever


@pytest.mark.parametrize("keyword_engine", ["reference", "fast"])
@pytest.mark.parametrize(("rrf_order", "weights"), [("as_documented", (0.6, 0.3)), ("fixed", (0.2, 0.9))])
def test_zerda_hybrid_equals_the_seed_hybrid_retriever(
    rrf_order: str, weights, keyword_engine: str, cranfield_small: Collection, lsa_small
) -> None:
    collection = cranfield_small
    distinct = {" ".join(t.lower().split()) for t in collection.texts}  # the merge key: case + whitespace
    expected_collapsed = len(collection.texts) - len(distinct)
    assert expected_collapsed >= 3
    vector_weight, keyword_weight = weights
    params = {
        **FAST,
        "rrf_order": rrf_order,
        "vector_weight": vector_weight,
        "keyword_weight": keyword_weight,
        "keyword_engine": keyword_engine,
    }
    system = build_system("zerda.hybrid", params)
    system.index(collection)
    run_ = system.search(collection.queries, 20)
    assert system.stats["duplicates_collapsed"] == expected_collapsed

    embedder = lsa_small
    config = ContextEngineConfig(
        RetrieverConfig(rrf_order=rrf_order, vector_weight=vector_weight, keyword_weight=keyword_weight)
    )
    vector = VectorRetriever(  # in-memory mode: one cosine per chunk, in Python
        config,
        chunks=seed_chunks(collection),
        embeddings=list(embedder.embed(collection.texts)),
        embed_fn=lambda text: embedder.embed([text])[0],
    )
    seed = HybridRetriever(config, vector, KeywordRetriever(config, seed_chunks(collection)))
    for qid, text in collection.queries.items():
        direct = seed.retrieve(text, 20)
        assert [d for d, _ in run_[qid]] == [hit.chunk.doc_id for hit in direct]
        np.testing.assert_allclose(
            [s for _, s in run_[qid]], [hit.composite_score for hit in direct], rtol=1e-5, atol=1e-6
        )
        row = {doc_id: i for i, doc_id in enumerate(collection.doc_ids)}
        texts = [" ".join(collection.texts[row[d]].lower().split()) for d, _ in run_[qid]]
        assert len(set(texts)) == len(texts)  # duplicates collapsed in the results too


@pytest.mark.parametrize("keyword_engine", ["reference", "fast"])
def test_zerda_hybrid_passes_k1_b_to_its_keyword_branch(keyword_engine: str, cranfield_small: Collection) -> None:
    """With the vector weight 0 and no RRF bonus, the hybrid's scores are the keyword family's (k1, b)."""
    bm25 = {"k1": 0.9, "b": 0.4}
    only_keyword = {**FAST, **bm25, "vector_weight": 0.0, "keyword_weight": 1.0, "keyword_engine": keyword_engine}
    hybrid = run("zerda.hybrid", only_keyword, cranfield_small, 10)
    keyword = run("zerda.keyword", bm25, cranfield_small, 10)
    default = run("zerda.keyword", {}, cranfield_small, 10)
    for qid in cranfield_small.queries:
        np.testing.assert_allclose([s for _, s in hybrid[qid]], [s for _, s in keyword[qid]], atol=1e-12)
    assert hybrid != default


def test_zerda_hybrid_fast_keyword_branch_reuses_the_stored_bm25_index(tmp_path, english: Collection) -> None:
    """``keyword_engine = "fast"`` reads the index ``zerda.keyword``'s fast engine stored: one build per corpus."""
    keyword = build_system("zerda.keyword", {"engine": "fast"})
    keyword.index(english, cache_dir=tmp_path)
    stored = sorted(path.name for path in (tmp_path / "bm25").iterdir() if path.is_dir())
    hybrid = build_system("zerda.hybrid", {**FAST, "keyword_engine": "fast", "vector_weight": 0.0})
    hybrid.index(english, cache_dir=tmp_path)
    assert sorted(path.name for path in (tmp_path / "bm25").iterdir() if path.is_dir()) == stored
    assert len(stored) == 1
    reference = run("zerda.hybrid", {**FAST, "vector_weight": 0.0}, english, 5)
    for qid, results in hybrid.search(english.queries, 5).items():
        assert [d for d, _ in results] == [d for d, _ in reference[qid]]
        np.testing.assert_allclose([s for _, s in results], [s for _, s in reference[qid]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("keyword_engine", ["reference", "fast"])
def test_zerda_hybrid_keyword_engine_is_applied(tmp_path, keyword_engine: str, english: Collection) -> None:
    """Only the fast keyword branch builds a SparseBM25 index (in the store): the option is not a no-op."""
    hybrid = build_system("zerda.hybrid", {**FAST, "keyword_engine": keyword_engine})
    hybrid.index(english, cache_dir=tmp_path)
    stored = [path for path in (tmp_path / "bm25").glob("*") if path.is_dir()] if (tmp_path / "bm25").exists() else []
    assert len(stored) == (keyword_engine == "fast")


def test_zerda_hybrid_top_k_caps_the_depth(english: Collection) -> None:
    capped = run("zerda.hybrid", {**FAST, "top_k": 2}, english, 5)
    assert capped == run("zerda.hybrid", FAST, english, 2)


def test_fixed_rrf_order_adds_the_bonus(cranfield_small: Collection) -> None:
    documented = run("zerda.hybrid", {**FAST, "rrf_order": "as_documented"}, cranfield_small, 10)
    fixed = run("zerda.hybrid", {**FAST, "rrf_order": "fixed"}, cranfield_small, 10)
    for qid in cranfield_small.queries:
        assert fixed[qid][0][1] > documented[qid][0][1]
        assert fixed[qid][0][1] <= documented[qid][0][1] + 0.2 + 1e-9  # bonus <= 0.20 * rrf / max_rrf


# ---------------------------------------------------------------- pipeline families vs hand references


def okapi_ranking(collection: Collection, text: str) -> list[tuple[str, float]]:
    """rank_bm25 BM25Okapi on the seed tokens: matching docs (score > 0), best first, ties by corpus order."""
    from rank_bm25 import BM25Okapi

    scores = list(BM25Okapi([tokenize(t) for t in collection.texts]).get_scores(tokenize(text)))
    return [(collection.doc_ids[i], float(scores[i])) for i in sorted_by_score(scores) if scores[i] > 0]


def test_pipeline_sparse_equals_rank_bm25(cranfield_small: Collection) -> None:
    run_ = run("pipeline.sparse", {}, cranfield_small, 20)
    for qid, text in cranfield_small.queries.items():
        expected = okapi_ranking(cranfield_small, text)[:20]
        assert [d for d, _ in run_[qid]] == [d for d, _ in expected]
        best = expected[0][1]
        np.testing.assert_allclose([s for _, s in run_[qid]], [s / best for _, s in expected], atol=1e-9)


def test_pipeline_hybrid_equals_hand_rrf(cranfield_small: Collection, lsa_small) -> None:
    k, weights = 10, [1.0, 0.5]
    run_ = run("pipeline.hybrid", {**FAST, "weights": weights, "rrf_k": 20}, cranfield_small, k)
    for qid, text in cranfield_small.queries.items():
        sparse = [d for d, _ in okapi_ranking(cranfield_small, text)[:k]]
        dense = brute_force(lsa_small, cranfield_small, text)[0][:k]
        sums: dict[str, float] = {}
        for ranked, weight in ((sparse, weights[0]), (dense, weights[1])):
            for rank, doc_id in enumerate(ranked, start=1):
                sums[doc_id] = sums.get(doc_id, 0.0) + weight / (20 + rank)
        order = sorted(sums, key=lambda d: -sums[d])[:k]  # stable: first seen (sparse list, then dense) wins ties
        best, last = sums[order[0]], sums[order[-1]]  # rrf_fuse: min-max over the k returned (seed 004, issue 18)
        assert [d for d, _ in run_[qid]] == order
        expected = [(sums[d] - last) / (best - last) for d in order]
        np.testing.assert_allclose([s for _, s in run_[qid]], expected, atol=1e-9)


def test_pipeline_rerank_reorders_the_bm25_top_n_by_embedding_cosine(cranfield_small: Collection, lsa_small) -> None:
    n = 5
    run_ = run("pipeline.rerank", {**FAST, "first_stage_k": n}, cranfield_small, 3)
    doc_vectors = dict(zip(cranfield_small.doc_ids, lsa_small.embed(cranfield_small.texts), strict=True))
    for qid, text in cranfield_small.queries.items():
        candidates = [d for d, _ in okapi_ranking(cranfield_small, text)[:n]]
        query = lsa_small.embed([text])[0]
        raw = [cosine(query, doc_vectors[d]) for d in candidates]
        order = sorted_by_score(raw)
        expected_ids = [candidates[i] for i in order][:3]
        assert [d for d, _ in run_[qid]] == expected_ids
        # The run records the reranker's raw score (metadata["raw_score"]), the key it ordered by: the
        # clamped item.score ties every negative cosine at 0.0, and the tie-break by doc id would reorder them.
        expected_scores = [raw[i] for i in order][:3]
        np.testing.assert_allclose([s for _, s in run_[qid]], expected_scores, atol=1e-5)


def test_pipeline_routed_language_router() -> None:
    mixed = make_collection({**ENGLISH_DOCS, **ARABIC_DOCS}, {"en": "molten lava", "ar": "الزكاة للفقراء"})
    routed = run("pipeline.routed", FAST, mixed, 5)
    dense = run("pipeline.dense", FAST, mixed, 5)
    sparse = run("pipeline.sparse", {}, mixed, 5)
    assert routed["ar"] == sparse["ar"]  # Arabic letters -> sparse
    assert routed["en"] == dense["en"]
    assert routed["en"] != sparse["en"]  # the two routes really differ here


def test_pipeline_routed_keyword_router(english: Collection) -> None:
    params = {**FAST, "router": "keyword", "keywords": ["LAVA"]}
    routed = run("pipeline.routed", params, english, 5)
    dense = run("pipeline.dense", FAST, english, 5)
    sparse = run("pipeline.sparse", {}, english, 5)
    assert routed["q2"] == sparse["q2"]  # contains "lava" (case-insensitive) -> sparse
    assert routed["q1"] == dense["q1"] and routed["q3"] == dense["q3"]
    assert sparse["q2"] != dense["q2"]


def test_late_interaction_equals_maxsim_on_wordllama_token_vectors(english: Collection) -> None:
    """First stage rank_bm25, re-scored by ``MaxSimScorer`` on wordllama's raw (unnormalised) token rows."""
    from retrieval.embeddings.wordllama import _load_model

    model = _load_model(64)
    table = np.asarray(model.embedding, dtype=np.float64)

    def tokens(text: str) -> np.ndarray:
        return table[model.tokenizer.encode(text, add_special_tokens=False).ids]

    queries = {**ENGLISH_QUERIES, "q4": "aircraft produce thrust and sonic booms"}
    first_stage_k, k = 4, 3
    run_ = run("pipeline.late_interaction", {"dim": 64, "first_stage_k": first_stage_k}, english, k, queries)
    texts = dict(zip(english.doc_ids, english.texts, strict=True))
    for qid, text in queries.items():
        candidates = [d for d, _ in okapi_ranking(english, text)[:first_stage_k]]
        raw = [MaxSimScorer().score(tokens(text), tokens(texts[d])) for d in candidates]
        order = sorted_by_score(raw)
        assert [d for d, _ in run_[qid]] == [candidates[i] for i in order][:k]
        expected = [raw[i] for i in order][:k]  # the raw MaxSim sum: the clamped score would tie them at 1.0
        np.testing.assert_allclose([s for _, s in run_[qid]], expected, atol=1e-6)


# ---------------------------------------------------------------- Qur'an QA: no-answer threshold


@pytest.mark.parametrize("family", ["zerda.keyword", "pipeline.sparse", "pipeline.dense"])
def test_no_answer_threshold(family: str, english: Collection) -> None:
    queries = {"hit": "honey bees pollinate flowers", "miss": "quantum chromodynamics gluon"}
    params = {**english_params(family), "no_answer_threshold": 0.5}
    answered = run(family, params, english, 3, queries)
    plain = run(family, english_params(family), english, 3, queries)
    assert answered["hit"] == plain["hit"] and answered["hit"][0][0] == "d8"
    assert not plain["miss"] or plain["miss"][0][1] < 0.5
    assert answered["miss"] == [(NO_ANSWER_ID, 1.0)]


def test_no_answer_threshold_on_quran_qa() -> None:
    collection = load_collection("quranqa23/taskA/dev")
    plain = run("pipeline.dense", FAST, collection, 10)
    threshold = float(np.median([r[0][1] for r in plain.values() if r]))  # splits the questions in two
    answered = run("pipeline.dense", {**FAST, "no_answer_threshold": threshold}, collection, 10)
    for qid in collection.queries:
        if plain[qid] and plain[qid][0][1] >= threshold:
            assert answered[qid] == plain[qid]
        else:
            assert answered[qid] == [(NO_ANSWER_ID, 1.0)]
    assert any(r == [(NO_ANSWER_ID, 1.0)] for r in answered.values())
    assert any(r != [(NO_ANSWER_ID, 1.0)] for r in answered.values())


# ---------------------------------------------------------------- zerda.vector: VectorRetriever modes as backends


@pytest.mark.parametrize("backend", ["in_memory", "faiss", "chroma"])
def test_zerda_vector_backends_equal_the_adapter(backend: str, cranfield_small: Collection, lsa_small) -> None:
    adapter = run("zerda.vector", FAST, cranfield_small, 20)
    other = run("zerda.vector", {**FAST, "backend": backend}, cranfield_small, 20)
    for qid, text in cranfield_small.queries.items():
        ids, _ = brute_force(lsa_small, cranfield_small, text)
        assert [d for d, _ in adapter[qid]] == ids[:20]  # the reference itself matches brute force
        assert [d for d, _ in other[qid]] == [d for d, _ in adapter[qid]]
        np.testing.assert_allclose([s for _, s in other[qid]], [s for _, s in adapter[qid]], atol=1e-5)


def test_zerda_vector_chroma_persists_in_the_cache_dir_and_reuses_it(tmp_path, english: Collection) -> None:
    params = {**FAST, "backend": "chroma"}
    first = build_system("zerda.vector", params)
    first.index(english, cache_dir=tmp_path)
    assert (tmp_path / "chroma").is_dir()
    again = build_system("zerda.vector", params)
    again.index(english, cache_dir=tmp_path)  # same corpus and embedder: the stored collection, not a second copy
    assert len(again._retriever._vector_db) == len(english.doc_ids)
    assert again.search(english.queries, 5) == first.search(english.queries, 5)


def test_zerda_vector_chroma_without_cache_dir_leaves_no_folder(tmp_path, monkeypatch, english: Collection) -> None:
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    system = build_system("zerda.vector", {**FAST, "backend": "chroma"})
    system.index(english)
    assert [p.name[:13] for p in tmp_path.iterdir()] == ["zerda-chroma-"]
    assert system.search(english.queries, 3)
    del system
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_zerda_vector_db_backends_keep_the_seed_zero_threshold_quirk(cranfield_small: Collection, lsa_small) -> None:
    """vector_db mode passes ``min_vector_score or None``: at 0.0 negative cosines are kept (adapter drops them)."""
    depth = len(cranfield_small.doc_ids)
    text = next(iter(cranfield_small.queries.values()))
    _, sims = brute_force(lsa_small, cranfield_small, text)
    faiss_run = run("zerda.vector", {**FAST, "backend": "faiss"}, cranfield_small, depth, {"q": text})["q"]
    adapter_run = run("zerda.vector", FAST, cranfield_small, depth, {"q": text})["q"]
    assert len(faiss_run) == depth and len(adapter_run) == sum(s >= 0.0 for s in sims) < depth


def test_zerda_vector_unknown_backend_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        build_system("zerda.vector", {"backend": "pinecone"})
    assert "\n" not in str(error.value) and "backend" in str(error.value)


# ---------------------------------------------------------------- no-answer threshold on the raw score


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_no_answer_threshold_compares_the_raw_bm25_of_the_top_hit(engine: str, english: Collection) -> None:
    """The shown score of a BM25 top hit is always 1.0 (max-normalised); the threshold must see the raw one.

    Raw reference: bm25s's Lucene BM25 (the seed's idf) times (k1 + 1), the factor Lucene drops.
    """
    import bm25s

    reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    reference.index([tokenize(t) for t in english.texts], show_progress=False)
    queries = {"weak": "kitchen"}  # one rare-ish term of one document: a small raw score, shown as 1.0
    raw = float(np.max(reference.get_scores(tokenize(queries["weak"])))) * (1.5 + 1)
    plain = run("zerda.keyword", {"engine": engine}, english, 3, queries)
    assert plain["weak"][0] == ("d1", 1.0)
    above = run("zerda.keyword", {"engine": engine, "no_answer_threshold": raw + 0.01}, english, 3, queries)
    below = run("zerda.keyword", {"engine": engine, "no_answer_threshold": raw - 0.01}, english, 3, queries)
    assert above["weak"] == [(NO_ANSWER_ID, 1.0)]  # fires although the shown top score is 1.0
    assert below["weak"] == plain["weak"]


def test_no_answer_threshold_on_rank_bm25_raw_score(english: Collection) -> None:
    from rank_bm25 import BM25Okapi

    queries = {"weak": "kitchen"}
    raw = float(np.max(BM25Okapi([tokenize(t) for t in english.texts]).get_scores(tokenize(queries["weak"]))))
    above = run("pipeline.sparse", {"no_answer_threshold": raw + 0.01}, english, 3, queries)
    below = run("pipeline.sparse", {"no_answer_threshold": raw - 0.01}, english, 3, queries)
    assert above["weak"] == [(NO_ANSWER_ID, 1.0)]
    assert below["weak"][0] == ("d1", 1.0)
