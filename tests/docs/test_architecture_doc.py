"""docs/ARCHITECTURE.md names every module: its package tree lists each ``.py`` file under its package.

The tree is the fenced block under "## Packages, one direction": a line ``name/`` opens a package (two
spaces in: a subpackage of the top package; further in: a subpackage of the one open), and every
``file.py`` word after it, on that line or the indented lines that follow, is a module of that package.
Package ``__init__.py`` files are the packages themselves and need no entry.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("retrieval", "zerda_eval")
WORD = re.compile(r"^[(\[`]*([A-Za-z_]\w*)(\.py|/)[)\],;:`.]*$")


def listed_modules(text: str) -> set[str]:
    """``package/sub/file.py`` paths the package tree of ``text`` lists."""
    tree = text.split("## Packages, one direction", 1)[1].split("```", 2)[1]
    top, package, listed = "", "", set()
    for line in tree.splitlines():
        indent, words = len(line) - len(line.lstrip()), line.split()
        if indent == 2 and words and not words[0].endswith("/"):
            package = top  # a line of the top package's own modules
        for position, word in enumerate(words):
            match = WORD.match(word)
            if not match:
                continue
            name, kind = match.groups()
            if kind == "/":
                if indent == 0 and position == 0:
                    top = package = name
                elif indent == 2 and position == 0:
                    package = f"{top}/{name}"
                else:
                    package = f"{package}/{name}"
            elif package and name != "__init__":
                listed.add(f"{package}/{name}.py")
    return listed


def module_paths() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }


def test_the_doc_lists_every_module_in_its_package():
    missing = sorted(module_paths() - listed_modules(DOC.read_text(encoding="utf-8")))
    assert missing == [], "add these modules to the package tree of docs/ARCHITECTURE.md"


def test_the_doc_lists_no_module_that_does_not_exist():
    ghosts = sorted(listed_modules(DOC.read_text(encoding="utf-8")) - module_paths())
    assert ghosts == [], "docs/ARCHITECTURE.md names modules that are not in the tree"


def test_the_parser_sees_a_missing_module():
    text = "## Packages, one direction\n```\nzerda_eval/\n  core/   bm25.py (see tests/x/y.py)\n  api.py\n```\n"
    assert listed_modules(text) == {"zerda_eval/core/bm25.py", "zerda_eval/api.py"}
