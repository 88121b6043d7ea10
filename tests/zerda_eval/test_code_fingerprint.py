"""The code fingerprint of a cell: which modules it follows, and that it is computed once per process."""

from __future__ import annotations

import sys
import textwrap

import pytest

from zerda_eval.config import code_fingerprint
from zerda_eval.config.code_fingerprint import modules_of


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A throwaway subpackage ``retrieval.fp_demo`` (four modules) found through ``retrieval.__path__``."""
    root = tmp_path / "retrieval_demo_root"
    demo = root / "retrieval" / "fp_demo"
    demo.mkdir(parents=True)
    sources = {
        "__init__.py": "from retrieval.fp_demo.scorer import score\n",
        "scorer.py": "def score():\n    return 1\n",
        "unused.py": "VALUE = 2\n",
        "family.py": textwrap.dedent(
            """
            from typing import TYPE_CHECKING
            from retrieval.fp_demo import score
            if TYPE_CHECKING:
                from retrieval.fp_demo import unused
            def build():
                from retrieval.fp_demo.scorer import score as again
                return again
            """
        ),
    }
    for name, text in sources.items():
        (demo / name).write_text(text, encoding="utf-8")
    import retrieval

    monkeypatch.setattr(retrieval, "__path__", [*retrieval.__path__, str(root / "retrieval")])
    code_fingerprint.clear_memo()
    yield demo
    for name in [m for m in sys.modules if m.startswith("retrieval.fp_demo")]:
        del sys.modules[name]
    code_fingerprint.clear_memo()


def test_imports_are_followed_to_the_defining_module_not_under_type_checking(package):
    found = modules_of("retrieval.fp_demo.family")
    assert "retrieval.fp_demo.scorer" in found  # `from package import name` -> where name is defined
    assert "retrieval.fp_demo.unused" not in found  # only under TYPE_CHECKING
    assert "retrieval.fp_demo" not in found  # the package's re-export is not a dependency


def test_fingerprint_changes_with_a_module_it_uses_and_not_with_others(package):
    before = code_fingerprint.code_fingerprint("retrieval.fp_demo.family")
    (package / "unused.py").write_text("VALUE = 3\n", encoding="utf-8")
    code_fingerprint.clear_memo()
    assert code_fingerprint.code_fingerprint("retrieval.fp_demo.family") == before
    (package / "scorer.py").write_text("def score():\n    return 2\n", encoding="utf-8")
    code_fingerprint.clear_memo()
    assert code_fingerprint.code_fingerprint("retrieval.fp_demo.family") != before


def test_sources_are_read_once_per_process(package):
    code_fingerprint.code_fingerprint("retrieval.fp_demo.family")
    read = code_fingerprint._source.cache_info().misses
    assert read >= len(modules_of("retrieval.fp_demo.family"))
    code_fingerprint.code_fingerprint("retrieval.fp_demo.family")
    assert code_fingerprint._source.cache_info().misses == read
