"""Render report blocks as GitHub-flavoured markdown (plots linked as relative PNG paths).

Text columns are left-aligned and number columns right-aligned (``Table.numeric``); the contents link
to GitHub's heading anchors (``document.anchor_of``); a plot is an image at its display width, so it
is read at the size it was drawn for.
"""

from __future__ import annotations

import html
from pathlib import Path

from zerda_eval.report.document import Block, Code, Contents, Heading, Paragraph
from zerda_eval.report.explorer import HEAD_TEXT as EXPLORER_TEXT
from zerda_eval.report.explorer import Explorer
from zerda_eval.report.plots import Figure
from zerda_eval.report.tables import Table


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(table: Table) -> str:
    """A markdown table; bold cells wrapped in ``**``, number columns right-aligned, text left-aligned."""
    numeric = table.numeric()
    lines = ["| " + " | ".join(_escape(h) for h in table.header) + " |"]
    lines.append("|" + "|".join("---:" if numeric[j] and j else ":---" for j in range(len(table.header))) + "|")
    for i, row in enumerate(table.rows):
        cells = [f"**{_escape(c)}**" if (i, j) in table.bold else _escape(c) for j, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def contents_markdown(contents: Contents) -> str:
    """The table of contents as a nested list of links to the headings' anchors."""
    lines = ["**Contents**", ""]
    for level, text, anchor in contents.entries:
        lines.append("  " * (level - 2) + f"- [{text}](#{anchor})")
    return "\n".join(lines)


def render_markdown(blocks: list[Block], base_dir: Path) -> str:
    """The whole report as markdown; figure paths are written relative to ``base_dir``."""
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append("#" * block.level + " " + block.text)
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Code):
            parts.append(f"```{block.language}\n{block.text}\n```")
        elif isinstance(block, Table):
            parts.append(table_markdown(block))
        elif isinstance(block, Contents):
            parts.append(contents_markdown(block))
        elif isinstance(block, Explorer):
            parts.append("In `report.html` (it needs the page's script): " + EXPLORER_TEXT)
        elif isinstance(block, Figure):
            png = block.png.relative_to(base_dir).as_posix()
            svg = block.svg.relative_to(base_dir).as_posix()
            alt = html.escape(block.caption)
            image = f'<img src="{png}" width="{block.width}" alt="{alt}">'  # shown at the size it was drawn for
            parts.append(f"{image}\n\n*{block.caption}* ([SVG]({svg}))")
    return "\n\n".join(parts) + "\n"
