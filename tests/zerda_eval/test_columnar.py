"""The columnar run equals the dict run ``ranking.order_run`` builds, rankings, order and errors alike;
the TREC reader's pyarrow path reads what the line parser reads, and falls back to it where they differ."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import trec_order
from zerda_eval.columnar import DOC_TABLE, ColumnarRun, RunBuilder, assemble, from_run, gather, on_one_table
from zerda_eval.errors import DataFormatError, RunError
from zerda_eval.ranking import doc_key, order_run
from zerda_eval.store import run_files
from zerda_eval.store.run_dir import trec_columns, trec_table
from zerda_eval.store.run_files import read_run_columns

# Ids whose byte order is easy to get wrong: case, a prefix, NUL at the end, 2- and 4-byte UTF-8, Arabic.
ODD_IDS = ["d1", "D1", "d10", "d2", "b", "b\x00", "é", "z", "😀", "\uffff", "وثيقة", "A"]


def random_run(seed: int, n_queries: int = 30) -> dict[str, list[tuple[str, float]]]:
    """Shuffled rankings with many tied scores over ``ODD_IDS`` and plain ids (some queries empty)."""
    rng = np.random.default_rng(seed)
    ids = ODD_IDS + [f"doc{i}" for i in range(60)]
    run = {}
    for q in rng.permutation(n_queries).tolist():
        size = int(rng.integers(0, 40))
        docs = rng.choice(len(ids), size=size, replace=False).tolist()
        run[f"q{q}"] = [(ids[d], float(rng.integers(0, 5)) / 4 - 0.5) for d in docs]
    return run


@pytest.mark.parametrize("seed", range(5))
def test_columnar_run_equals_the_dict_run_in_trec_eval_order(seed):
    run = random_run(seed)
    columnar = from_run(run)
    assert list(columnar) == list(run)  # queries in the order given
    assert columnar.to_dict() == order_run(run)
    assert {qid: columnar[qid] for qid in columnar} == {qid: trec_order(ranking) for qid, ranking in run.items()}
    assert list(columnar.doc_ids) == sorted(set(columnar.doc_ids.tolist()), key=doc_key)
    assert columnar == order_run(run) and "missing" not in columnar and columnar.get("missing") is None


def test_dict_of_dicts_and_int_ids_read_as_the_dict_path():
    given = {1: {2: 1.5, "x": np.float32(0.5)}, "q": {}}
    assert from_run(given).to_dict() == {"1": [("2", 1.5), ("x", 0.5)], "q": []}


@pytest.mark.parametrize("duplicates", ["max", "first"])
def test_a_duplicates_policy_keeps_the_copy_the_dict_path_keeps(duplicates):
    run = {"q1": [("a", 1.0), ("b", 3.0), ("a", 5.0), ("a", 5.0), ("c", 2.0)], "q2": [("b", 1.0), ("b", 0.0)]}
    assert from_run(run, duplicates).to_dict() == order_run(run, duplicates)


def expected_error(run, duplicates=None) -> str:
    with pytest.raises(RunError) as caught:
        order_run(run, duplicates, "r.trec")
    return str(caught.value)


@pytest.mark.parametrize(
    "run",
    [
        {"q1": [("a", 1.0)], "q2": [("b", 1.0), ("b", 0.5), ("b", 0.2)]},  # a doc three times
        {"q1": [("a", float("nan"))], "q2": [("b", 1.0), ("b", 0.5)]},  # the first bad query is named
        {"q1": [("a", 1.0), ("a", 2.0)], "q2": [("b", float("inf"))]},
        {"q1": [("a", 1.0), ("a", float("-inf"))]},  # non-finite is checked before the copies
    ],
)
def test_errors_are_the_dict_paths_word_for_word(run):
    with pytest.raises(RunError) as caught:
        from_run(run, None, "r.trec")
    assert str(caught.value) == expected_error(run)


def test_a_policy_does_not_hide_a_non_finite_score():
    run = {"q1": [("a", 1.0), ("a", 2.0)], "q2": [("b", float("nan"))]}
    with pytest.raises(RunError, match=r"r.trec, query 'q2': non-finite score nan") as caught:
        from_run(run, "max", "r.trec")
    assert str(caught.value) == expected_error(run, "max")


@pytest.mark.parametrize("ranking", [[("a", "x")], [("a", 1.0, 2)], [("a", None)], [3]])
def test_a_ranking_that_is_not_doc_score_pairs_is_a_data_format_error(ranking):
    with pytest.raises(DataFormatError, match=r"^run: query 'q': expected \{doc_id: score\}"):
        from_run({"q": ranking})


def test_an_id_that_is_not_unicode_is_named():
    with pytest.raises(DataFormatError, match=r"doc id '\\ud800' is not valid Unicode"):
        from_run({"q": [("\ud800", 1.0)]})


@pytest.mark.parametrize("ids", ["odd", "short", "long"])  # NUL: pyarrow's sort; up to 16 bytes: integer keys
def test_runs_on_one_table_index_the_sorted_union_and_keep_their_rankings(ids):
    runs = [random_run(seed) for seed in (1, 2, 3)]
    if ids != "odd":  # no NUL byte: the integer keys, one word (short) or two; beyond 16 bytes pyarrow's sort
        suffix = "" if ids == "short" else "-a-long-suffix-é"
        runs = [
            {q: [(d.rstrip("\x00") + suffix, s) for d, s in r if d != "b\x00"] for q, r in run.items()} for run in runs
        ]
    first, second, third = (from_run(run) for run in runs)
    merged = on_one_table([first, second, third])
    union = set(first.doc_ids.tolist()) | set(second.doc_ids.tolist()) | set(third.doc_ids.tolist())
    assert merged[0].doc_ids.tolist() == sorted(union, key=doc_key)
    assert all(run.doc_ids is merged[0].doc_ids for run in merged)
    assert [run.to_dict() for run in merged] == [first.to_dict(), second.to_dict(), third.to_dict()]
    assert on_one_table(merged) == merged  # one table already: the runs themselves


def test_a_table_of_millions_of_ids_goes_on_one_table_too():
    """pyarrow hands a numpy string array of a few million ids back in chunks (about 2.5M ids a chunk here)."""
    big = np.sort(np.array([f"{i:07d}" for i in range(3_000_000)], dtype=DOC_TABLE))
    many = ColumnarRun(["q"], np.array([0, 2]), np.array([2_999_999, 5], dtype=np.int32), np.array([2.0, 1.0]), big)
    few = from_run({"q": [("0000005", 3.0), ("x", 1.0)]})
    merged = on_one_table([many, few])
    assert merged[0].doc_ids.size == 3_000_001 and merged[0].doc_ids[-1] == "x"
    assert [run.to_dict() for run in merged] == [many.to_dict(), few.to_dict()]


def test_gather_takes_each_query_from_its_run():
    first, second = from_run(random_run(1)), from_run(random_run(2))
    a, b = on_one_table([first, second])
    picked = gather([(a, "q3"), (b, "q1"), (b, "absent")], a.doc_ids)
    assert picked.to_dict() == {"q3": first["q3"], "q1": second["q1"], "absent": []}


def test_assemble_takes_each_query_from_runs_on_different_tables():
    first, second = from_run(random_run(1)), from_run({"q1": [("only-here", 2.0), ("d1", 1.0)]})
    assert "only-here" not in first.doc_ids.tolist()  # two tables, merged by assemble
    picked = assemble([(first, "q3"), (second, "q1"), (first, "q2"), (second, "absent")])
    assert list(picked) == ["q3", "q1", "q2", "absent"]
    assert picked.to_dict() == {"q3": first["q3"], "q1": second["q1"], "q2": first["q2"], "absent": []}
    assert assemble([]).to_dict() == {}


def write_trec(path, run, sep=" ", end="\n", extra="") -> None:
    """``run`` as TREC lines (fields joined by ``sep``, lines ended by ``end``), then ``extra``, as UTF-8 bytes."""
    lines = [
        sep.join([qid, "Q0", doc, str(rank), repr(score), "t"])
        for qid, ranking in run.items()
        for rank, (doc, score) in enumerate(ranking, 1)
    ]
    path.write_bytes((end.join(lines) + end + extra).encode("utf-8"))


def spaced_run(seed: int) -> dict[str, list[tuple[str, float]]]:
    return {q: [(d.replace(" ", "_"), s) for d, s in r if d.isprintable()] for q, r in random_run(seed).items() if r}


@pytest.mark.parametrize("width", [3, 8, 9, 16, 17, 40])  # one integer key, two, and pyarrow's sort beyond 16 bytes
def test_the_doc_table_is_every_distinct_id_sorted_by_bytes_and_the_codes_point_at_each_line_s_id(tmp_path, width):
    rng = np.random.default_rng(width)
    alphabet = ["a", "b", "Z", "0", "~", "\x7f", "é", "😀", "و", "\uffff"]
    ids = {"".join(rng.choice(alphabet, size=int(rng.integers(1, width + 1)))) for _ in range(300)}
    ids |= {"a", "aa", "a" * width, "é" * (width // 2) or "é"}  # prefixes of each other
    ids = [doc for doc in ids if len(doc.encode()) <= max(width, 2)]
    lines = [(f"q{int(rng.integers(0, 7))}", doc) for doc in rng.choice(ids, size=600).tolist()]
    path = tmp_path / "run.trec"
    path.write_text("".join(f"{q} Q0 {doc} 0 1.0 t\n" for q, doc in lines), encoding="utf-8")
    query_ids, query_codes, doc_ids, doc_codes, _ = trec_columns(path)
    assert doc_ids.tolist() == sorted({doc for _, doc in lines}, key=lambda doc: doc.encode())
    assert [(query_ids[q], doc_ids[d]) for q, d in zip(query_codes, doc_codes, strict=True)] == lines
    assert query_ids == list(dict.fromkeys(q for q, _ in lines))


@pytest.mark.parametrize("seed", range(3))
def test_trec_file_read_by_pyarrow_equals_the_line_parser(tmp_path, seed):
    path = tmp_path / "run.trec"
    write_trec(path, spaced_run(seed))
    assert trec_table(path) is not None  # the fast path is the one taken
    assert read_run_columns(path).to_dict() == run_files.read_run(path)


def test_blank_lines_are_skipped_by_both_parsers(tmp_path):
    path = tmp_path / "run.trec"
    write_trec(path, spaced_run(0), extra="\n\nq9 Q0 a 1 2.0 t\n\n")
    assert trec_table(path) is not None
    assert read_run_columns(path).to_dict() == run_files.read_run(path)


@pytest.mark.parametrize(
    ("sep", "end", "extra"),
    [
        ("\t", "\n", ""),
        ("  ", "\n", ""),
        (" ", "\r\n", ""),
        (" ", "\n", "q9 Q0 a\u2003b 1 2.0 t\n"),
        (" ", "\n", "q9 Q0 a\u2003b 2.0 t\n"),  # split by str.split into six fields: read, not refused
        (" ", "\n", "q9 Q0 a\x1fb 1 2.0 t\n"),  # \x1f: whitespace to str.split, not a line break: seven fields
        (" ", "\n", "q9 Q0 a  2.0 t\n"),  # an empty rank field (a column pyarrow does not keep): five fields
        (" ", "\n", "q9 Q0 a 1 2.0 \n"),  # a space at a line's end: an empty tag
        (" ", "\n", " q9 Q0 a 1 2.0\n"),  # and at its start
    ],
)
def test_files_pyarrow_would_read_differently_go_through_the_line_parser(tmp_path, sep, end, extra):
    path = tmp_path / "run.trec"
    write_trec(path, spaced_run(0), sep, end, extra)
    assert trec_table(path) is None
    assert_reads_as_the_line_parser(path)


@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 x t\n",  # a score that is not a number
        "q1 Q0 a 1 1_0 t\n",  # float() reads it, pyarrow does not: the line parser decides
        "q1 Q0 a 1 1.0\n",  # five fields
        "q1 Q0 a 1 1.0 t\nq1 Q0 a 2 0.5 t\n",  # a doc twice
        "q1 Q0 a 1 nan t\n",
    ],
)
def test_a_bad_trec_file_fails_as_the_line_parser_fails(tmp_path, text):
    path = tmp_path / "run.trec"
    path.write_text(text, encoding="utf-8")
    assert_reads_as_the_line_parser(path)


def assert_reads_as_the_line_parser(path) -> None:
    """``read_run_columns`` gives ``run_files.read_run``'s run, or its error word for word."""
    try:
        expected = run_files.read_run(path)
    except (DataFormatError, RunError) as error:
        with pytest.raises(type(error)) as caught:
            read_run_columns(path)
        assert str(caught.value) == str(error)
    else:
        assert read_run_columns(path).to_dict() == expected


def test_columnar_run_is_a_read_only_mapping():
    run = from_run({"q": [("a", 1.0)]})
    assert isinstance(run, ColumnarRun) and len(run) == 1 and dict(run) == {"q": [("a", 1.0)]}
    with pytest.raises(TypeError):
        run["q"] = []  # type: ignore[index]


@pytest.mark.parametrize("arrangement", ["trec_eval", "ties_ascending", "queries_interleaved", "scores_ascending"])
def test_every_row_arrangement_is_put_in_trec_eval_order(tmp_path, arrangement):
    """Rows already in order (kept), by score with ties the other way (only the ties sorted), and rows of
    queries interleaved or by score ascending (sorted whole) all give the dict path's run."""
    run = {qid: trec_order(ranking) for qid, ranking in spaced_run(4).items()}
    if arrangement == "ties_ascending":
        run = {q: sorted(sorted(r, key=lambda p: doc_key(p[0])), key=lambda p: -p[1]) for q, r in run.items()}
    elif arrangement == "scores_ascending":
        run = {q: r[::-1] for q, r in run.items()}
    lines = [(qid, doc, score) for qid, ranking in run.items() for doc, score in ranking]
    if arrangement == "queries_interleaved":
        lines = lines[1::2] + lines[::2]
    path = tmp_path / "run.trec"
    path.write_text("".join(f"{q} Q0 {d} 0 {s!r} t\n" for q, d, s in lines), encoding="utf-8")
    assert trec_table(path) is not None
    assert read_run_columns(path).to_dict() == run_files.read_run(path)
    assert from_run(run).to_dict() == order_run(run)


@pytest.mark.parametrize("seed", range(3))
def test_a_run_built_one_query_at_a_time_is_the_run_in_trec_eval_order(seed):
    run = random_run(seed)  # as the grid's search loop gives it: each query's ranking in any order
    builder = RunBuilder("cell 'x'")
    for qid, ranking in run.items():
        builder.add(qid, dict(ranking) if seed else ranking)
    assert builder.build().to_dict() == {qid: trec_order(ranking) for qid, ranking in run.items()}


def test_a_run_built_one_query_at_a_time_refuses_a_doc_twice_as_the_dict_path_does():
    builder = RunBuilder("cell 'x'")
    builder.add("q1", [("a", 1.0)])
    builder.add("q2", [("a", 1.0), ("b", 0.5), ("a", 0.2)])
    with pytest.raises(RunError) as dict_path:
        order_run({"q1": [("a", 1.0)], "q2": [("a", 1.0), ("b", 0.5), ("a", 0.2)]}, where="cell 'x'")
    with pytest.raises(RunError, match="cell 'x', query 'q2'") as built:
        builder.build()
    assert str(built.value) == str(dict_path.value)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [0, 1, 3, 100])
def test_top_and_keep_take_the_rows_the_lists_would(seed, k):
    run = random_run(seed)
    columnar = from_run(run)
    assert columnar.top(k).to_dict() == {qid: trec_order(ranking)[:k] for qid, ranking in run.items()}
    odd = np.array([doc in ODD_IDS for doc in columnar.doc_ids[columnar.docs].tolist()])
    kept = {qid: [pair for pair in trec_order(ranking) if pair[0] not in ODD_IDS] for qid, ranking in run.items()}
    assert columnar.keep(~odd).to_dict() == kept


@pytest.mark.parametrize("window", [1, 2, 3, 5, 64])
def test_an_empty_field_is_found_wherever_the_scan_windows_fall(monkeypatch, window):
    from zerda_eval.store import run_dir

    monkeypatch.setattr(run_dir, "SCAN_BYTES", window)
    clean = "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n"
    assert not run_dir._empty_field(clean.encode())
    for at in range(len(clean) + 1):  # a space inserted anywhere, by the plain definition of an empty field
        text = clean[:at] + " " + clean[at:]
        by_definition = "  " in text or " \n" in text or "\n " in text or text[0] == " " or text[-1] == " "
        assert run_dir._empty_field(text.encode()) == by_definition, (at, text)
