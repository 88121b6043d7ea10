"""The README's promise: a mistake in an experiment file is one line naming the file and the key path.

Each case writes an experiment whose second dataset entry (``datasets[1]``) holds one mistake and runs
``zerda-eval run`` on it; the message must start with ``<file>: <key path>:``.
"""

from __future__ import annotations

import pytest

from zerda_eval import cli

HEADER = '[experiment]\nname = "x"\n\n[[datasets]]\nid = "cranfield"\n\n[[datasets]]\n'
SYSTEM = '\n[[systems]]\nname = "b"\nfamily = "zerda.keyword"\n'

CASES = [
    ('path = "cisi"\nformat = "jsonl"', "datasets[1].format: format='jsonl' is invalid; use one of beir, trec"),
    ('path = "nowhere"', "datasets[1].path: folder experiments/nowhere does not exist; fix path"),
    ('path = "cisi"\nformat = "trec"', "datasets[1].path: no corpus file (looked for corpus.jsonl, corpus.tsv) in"),
    (
        'path = "cisi"\ncorpus = "docs.jsonl"',
        "datasets[1].corpus: no corpus file (looked for docs.jsonl) in experiments/cisi",
    ),
    ('id = "beir/scifact/test"\nnormalization = "heavy"', "datasets[1].normalization: normalization='heavy' is"),
    ('id = "beir/scifact/test"\nstemmer = "porter"', "datasets[1].stemmer: unknown option 'stemmer'"),
    ('id = "quranqa23/taskA/dev"\nno_answer = "skip"', "datasets[1].no_answer: no_answer='skip' is invalid"),
    ('id = "quranqa23/taskA/dev"', "datasets[1].measures: measure recall@100 is deeper than the run depth 10"),
]


@pytest.mark.parametrize(("entry", "expected"), CASES, ids=[c[1].split(":")[0] + str(i) for i, c in enumerate(CASES)])
def test_a_dataset_mistake_names_file_and_key_path(entry, expected, tmp_path, monkeypatch, capsys):
    (tmp_path / "experiments" / "cisi").mkdir(parents=True)  # a relative path is read from the file's folder
    config = tmp_path / "experiments" / "x.toml"
    config.write_text(HEADER + entry + "\n" + SYSTEM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "experiments/x.toml", "--no-report"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"zerda-eval: error: experiments/x.toml: {expected}")


def test_a_collection_loaded_directly_names_the_dataset(tmp_path):
    from zerda_eval.datasets import load_collection
    from zerda_eval.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^dataset 'mine': format='csv' is invalid; use one of beir, trec$"):
        load_collection("mine", path=tmp_path, format="csv")
