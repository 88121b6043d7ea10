"""The code blocks of the README and docs/: found once here, for the doc tests that run or check them."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAGMENT_MARK = "<!-- toml-fragment"  # the line before the fence starts with it (a reason may follow)
FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```", re.S | re.M)  # a block may be indented in a list item


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, first line, language, body (dedented) and whether it is a marked fragment."""

    page: Path
    line: int
    language: str
    body: str
    fragment: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced(text: str) -> list[tuple[int, str, str, bool]]:
    """(first line, language, dedented body, marked as a fragment) of every fenced block of ``text``."""
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group(2), textwrap.dedent(match.group(3)), before.startswith(FRAGMENT_MARK)))
    return found


def blocks(language: str | None = None) -> list[Block]:
    """Every fenced block of every page (of ``language`` when given)."""
    found = [Block(page, *block) for page in PAGES for block in fenced(page.read_text(encoding="utf-8"))]
    return [b for b in found if language is None or b.language == language]


def marked_python(marker: str) -> str:
    """The python block right after ``<!-- marker -->`` on any page."""
    for page in PAGES:
        parts = page.read_text(encoding="utf-8").split(f"<!-- {marker} -->\n```python\n", 1)
        if len(parts) == 2:
            return parts[1].split("```", 1)[0]
    raise AssertionError(f"no page holds the python block marked <!-- {marker} -->")
