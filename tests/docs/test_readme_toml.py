"""The README's experiment files are real: every ```toml block validates as an experiment.

A block that is a fragment on purpose is marked with ``<!-- toml-fragment -->`` on the line before its
fence (keep that rare). The README's own example retriever (``my_package.overlap:WordOverlap``, named
by its notebook block) is written to a temporary package from the README's Python example, so the
"python" family entry is validated against the code the README shows.
"""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path

import pytest

from zerda_eval.config.experiment import resolve_experiment

README = Path(__file__).resolve().parents[2] / "README.md"
FRAGMENT_MARK = "<!-- toml-fragment -->"
FENCE = re.compile(r"^( *)```toml\n(.*?)^\1```", re.S | re.M)  # a block may be indented in a list item


def toml_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line number, body, marked as a fragment) of every ```toml block of ``text``."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        body = textwrap.dedent(match.group(2))
        blocks.append((text.count("\n", 0, match.start()) + 1, body, before == FRAGMENT_MARK))
    return blocks


def readme_example_package(root: Path) -> None:
    """``my_package/overlap.py`` holding the imports and class of the README's Python API example."""
    text = README.read_text(encoding="utf-8")
    example = text.split("<!-- readme-api-example -->\n```python\n", 1)[1].split("```", 1)[0]
    (root / "my_package").mkdir()
    (root / "my_package" / "__init__.py").write_text("", encoding="utf-8")
    (root / "my_package" / "overlap.py").write_text(example.split("\nexperiment = ", 1)[0], encoding="utf-8")


BLOCKS = toml_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_experiment_blocks_and_few_fragments():
    assert sum(not fragment for _, _, fragment in BLOCKS) >= 2
    assert sum(fragment for _, _, fragment in BLOCKS) <= 1


EXPERIMENTS = [(line, body) for line, body, fragment in BLOCKS if not fragment]


@pytest.mark.parametrize(("line", "body"), EXPERIMENTS, ids=[f"README.md:{line}" for line, _ in EXPERIMENTS])
def test_every_toml_block_of_the_readme_is_a_valid_experiment(line, body, tmp_path, monkeypatch):
    readme_example_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = resolve_experiment(tomllib.loads(body), f"README.md:{line}")
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
    assert toml_blocks(text) == [(3, "a = 1\n", False), (8, "b = 2\n", True), (12, "c = 3\n", False)]
