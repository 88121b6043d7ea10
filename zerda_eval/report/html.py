"""Render report blocks as one HTML page that links its plots (``plots/*.png``) and loads the explorer's data
from ``explorer-data.js`` beside it: both work over file://, and the page stays small at any grid size
(the plots and per-query data of hundreds of cells are megabytes). No asset outside the report folder.

Laid out for a browser window of 1280 px and for print: the page never scrolls sideways (tables fit,
long cells wrap, code wraps), each plot is shown at its own display size (``Figure.width``), text is
left-aligned and numbers right-aligned, headings carry anchors and a table of contents links them;
print CSS drops the contents and keeps tables and figures whole on a page.
"""

from __future__ import annotations

import html
import re

from zerda_eval.report.document import Block, Code, Contents, Heading, Paragraph
from zerda_eval.report.explorer import STYLE as EXPLORER_STYLE
from zerda_eval.report.explorer import Explorer, explorer_html
from zerda_eval.report.formats import PLOT_DIR
from zerda_eval.report.plots import Figure
from zerda_eval.report.tables import Table

STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 15px; line-height: 1.45; color: #1f2328;
       max-width: 1180px; margin: 1.5em auto; padding: 0 24px; overflow-wrap: anywhere; }
h1 { font-size: 1.7em; margin-bottom: 0.3em; }
h2 { font-size: 1.35em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.1em; margin-top: 1.6em; }
a { color: #0550ae; }
nav.toc { background: #f6f8fa; border: 1px solid #d0d7de; padding: 0.6em 1.2em; margin: 1em 0 2em; }
nav.toc ul { margin: 0.2em 0; padding-left: 1.2em; } nav.toc li { margin: 0.1em 0; }
nav.toc > ul { columns: 2; column-gap: 2em; } nav.toc > ul > li { break-inside: avoid; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 13px; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.55em; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
@media (min-width: 1100px) {  /* a wide window: whole words in headers, numbers and names on one line */
  th { overflow-wrap: normal; } td.num, td:first-child { white-space: nowrap; }
}
th.text, td.text { text-align: left; } th.num, td.num { text-align: right; }
td.num { font-variant-numeric: tabular-nums; }
td.text { overflow-wrap: normal; }
code { background: #f6f8fa; padding: 0 0.25em; border-radius: 3px; font-size: 0.92em; }
pre { background: #f6f8fa; padding: 0.8em 1em; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
pre code { background: none; padding: 0; }
figure { margin: 1em 0 1.6em; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-style: italic; color: #57606a; margin-top: 0.3em; }
details summary { cursor: pointer; color: #0550ae; margin: 0.5em 0; }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav.toc { display: none; }
  a { color: inherit; text-decoration: none; }
  h2, h3 { break-after: avoid; }
  table, figure, pre { break-inside: avoid; }
  table { font-size: 8pt; }
  pre { font-size: 7pt; }
}
"""
JSON_SUMMARY = "The resolved configuration (JSON; click to open)"


def _inline(text: str) -> str:
    """Escape, then turn markdown's inline ``code`` into <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _header(text: str) -> str:
    """A column header, breakable after ":" (``answerable:map@10``)."""
    return html.escape(text).replace(":", ":<wbr>")


def table_html(table: Table) -> str:
    """An HTML table: text columns left-aligned, number columns right-aligned, bold cells in <strong>."""
    kinds = ["num" if numeric else "text" for numeric in table.numeric()]
    kinds[0] = "text"
    head = "".join(f'<th class="{k}">{_header(h)}</th>' for h, k in zip(table.header, kinds, strict=True))
    body = []
    for i, row in enumerate(table.rows):
        cells = []
        for j, cell in enumerate(row):
            escaped = html.escape(cell)
            if kinds[j] == "text":  # a long grid label has no space: it may break after each parameter
                escaped = escaped.replace(",", ",<wbr>")
            text = f"<strong>{escaped}</strong>" if (i, j) in table.bold else escaped
            cells.append(f'<td class="{kinds[j]}">{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def contents_html(contents: Contents) -> str:
    """The table of contents as nested lists (level-3 entries under their level-2 heading)."""
    items: list[tuple[str, list[str]]] = []
    for level, text, anchor in contents.entries:
        link = f'<a href="#{anchor}">{_inline(text)}</a>'
        if level == 2 or not items:
            items.append((link, []))
        else:
            items[-1][1].append(link)
    entries = "".join(
        f"<li>{link}" + (f"<ul>{''.join(f'<li>{sub}</li>' for sub in subs)}</ul>" if subs else "") + "</li>"
        for link, subs in items
    )
    return f'<nav class="toc"><strong>Contents</strong><ul>{entries}</ul></nav>'


def figure_html(figure: Figure) -> str:
    """A figure's PNG (in the report's ``plots/``) at its display size, with its caption."""
    caption = html.escape(figure.caption)
    source = html.escape(f"{PLOT_DIR}/{figure.png.name}")
    image = f'<img alt="{caption}" width="{figure.width}" height="{figure.height}" src="{source}" loading="lazy">'
    return f'<figure id="figure-{figure.name}">{image}<figcaption>{caption}</figcaption></figure>'


def render_html(blocks: list[Block], title: str) -> str:
    """The whole report as an HTML page (its plots and explorer data are files beside it)."""
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f' id="{block.anchor}"' if block.anchor else ""
            parts.append(f"<h{block.level}{anchor}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Code) and block.language == "json":  # the resolved config: long, folded
            parts.append(
                f"<details><summary>{JSON_SUMMARY}</summary><pre><code>{html.escape(block.text)}</code></pre></details>"
            )
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
        elif isinstance(block, Table):
            parts.append(table_html(block))
        elif isinstance(block, Figure):
            parts.append(figure_html(block))
        elif isinstance(block, Contents):
            parts.append(contents_html(block))
        elif isinstance(block, Explorer):
            parts.append(explorer_html(block))
    body = "\n".join(parts)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}{EXPLORER_STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )
