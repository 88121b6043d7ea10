"""The experiment files of the README and docs/ are real: every ```toml block validates as an experiment.

A block that is a fragment on purpose is marked with ``<!-- toml-fragment -->`` on the line before its
fence (keep that rare). The guide's example retriever (``my_package.overlap:WordOverlap``, named by its
notebook block) is written to a temporary package from the guide's Python example, so the "python" family
entry is validated against the code the guide shows.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.docs.doc_blocks import blocks, fenced, marked_python
from zerda_eval.config.experiment import resolve_experiment


def readme_example_package(root: Path) -> None:
    """``my_package/overlap.py`` holding the imports and class of the guide's Python API example."""
    example = marked_python("readme-api-example")
    (root / "my_package").mkdir()
    (root / "my_package" / "__init__.py").write_text("", encoding="utf-8")
    (root / "my_package" / "overlap.py").write_text(example.split("\nexperiment = ", 1)[0], encoding="utf-8")


BLOCKS = blocks("toml")


def test_the_pages_have_experiment_blocks_and_few_fragments():
    assert sum(not b.fragment for b in BLOCKS) >= 3
    assert sum(b.fragment for b in BLOCKS) <= 2  # the [[reranks]] entry and ARCHITECTURE.md's annotated schema


EXPERIMENTS = [b for b in BLOCKS if not b.fragment]


@pytest.mark.parametrize("block", EXPERIMENTS, ids=[b.where for b in EXPERIMENTS])
def test_every_toml_block_is_a_valid_experiment(block, tmp_path, monkeypatch):
    readme_example_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = resolve_experiment(tomllib.loads(block.body), block.where)
    assert spec.cells  # at least one cell: the block runs something


def test_a_fusion_key_at_the_top_level_is_refused_so_the_readme_cannot_teach_it():
    block = """
[experiment]
name = "x"
[[datasets]]
id = "cranfield"
[[systems]]
name = "a"
family = "zerda.keyword"
[[systems]]
name = "b"
family = "zerda.keyword"
params = { k1 = 0.9 }
[[fusions]]
name = "f"
inputs = ["a", "b"]
method = "rrf"
k = 60
"""
    from zerda_eval.errors import ConfigError

    with pytest.raises(ConfigError, match=r"fusions\[0\].*'k'"):
        resolve_experiment(tomllib.loads(block), "README.md")


def test_the_fence_finder_sees_marks_and_line_numbers():
    text = "intro\n\n```toml\na = 1\n```\n\n<!-- toml-fragment -->\n```toml\nb = 2\n```\n"
    text += "- item\n  ```toml\n  c = 3\n  ```\n"
    expected = [(3, "toml", "a = 1\n", False), (8, "toml", "b = 2\n", True), (12, "toml", "c = 3\n", False)]
    assert fenced(text) == expected
