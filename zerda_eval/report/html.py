"""Render report blocks as one self-contained HTML file (plots inline as base64 PNG, no external assets)."""

from __future__ import annotations

import base64
import html
import re

from zerda_eval.report.document import Block, Code, Heading, Paragraph
from zerda_eval.report.plots import Figure
from zerda_eval.report.tables import Table

STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td { text-align: right; } td:first-child { text-align: left; }
th { background: #f0f0f0; } pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
figure { margin: 1.5em 0; } img { max-width: 100%; } figcaption { font-style: italic; }
"""


def _inline(text: str) -> str:
    """Escape, then turn markdown's inline ``code`` into <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def table_html(table: Table) -> str:
    """An HTML table; bold cells in <strong>."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = []
    for i, row in enumerate(table.rows):
        cells = [
            f"<td><strong>{html.escape(c)}</strong></td>" if (i, j) in table.bold else f"<td>{html.escape(c)}</td>"
            for j, c in enumerate(row)
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(blocks: list[Block], title: str) -> str:
    """The whole report as a standalone HTML page."""
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
        elif isinstance(block, Table):
            parts.append(table_html(block))
        elif isinstance(block, Figure):
            data = base64.b64encode(block.png.read_bytes()).decode("ascii")
            caption = html.escape(block.caption)
            image = f'<img alt="{caption}" src="data:image/png;base64,{data}">'
            parts.append(f"<figure>{image}<figcaption>{caption}</figcaption></figure>")
    body = "\n".join(parts)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )
