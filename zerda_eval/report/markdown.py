"""Render report blocks as GitHub-flavoured markdown (plots linked as relative PNG paths)."""

from __future__ import annotations

from pathlib import Path

from zerda_eval.report.document import Block, Code, Heading, Paragraph
from zerda_eval.report.plots import Figure
from zerda_eval.report.tables import Table


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(table: Table) -> str:
    """A markdown table; bold cells wrapped in ``**``, numeric columns right-aligned."""
    lines = ["| " + " | ".join(_escape(h) for h in table.header) + " |"]
    lines.append("|" + "|".join(":---" if j == 0 else "---:" for j in range(len(table.header))) + "|")
    for i, row in enumerate(table.rows):
        cells = [f"**{_escape(c)}**" if (i, j) in table.bold else _escape(c) for j, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
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
        elif isinstance(block, Figure):
            png = block.png.relative_to(base_dir).as_posix()
            svg = block.svg.relative_to(base_dir).as_posix()
            parts.append(f"![{block.caption}]({png})\n\n*{block.caption}* ([SVG]({svg}))")
    return "\n\n".join(parts) + "\n"
