"""The main results tables as LaTeX (booktabs), one ``table`` float per dataset, as ranx's ``Report`` offers.

``\\usepackage{booktabs}`` is all a paper needs. Best values are ``\\textbf``, significance markers
superscripts (``$^{*}$`` t-test, ``$^{\\dagger}$`` randomisation test), the baseline row marked, and
the caption says which tests, correction and alpha the markers stand for.
"""

from __future__ import annotations

import re

from zerda_eval.report.tables import MARKERS, RunData, Table

SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "∞": r"$\infty$",
}
MARKER_TEX = {"*": "*", "†": r"\dagger", "‡": r"\ddagger", "§": r"\S"}
TEST_NAMES = {"t-test": "paired t-test", "fisher": "randomisation test", "wilcoxon": "Wilcoxon signed-rank test"}


def escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(SPECIAL.get(char, char) for char in text)


def _cell(text: str, bold: bool, numeric: bool) -> str:
    markers = ""
    if numeric:
        body = text.rstrip("".join(MARKERS.values()))
        markers = "".join(MARKER_TEX[m] for m in text[len(body) :])
        text = body
    text = escape(text)
    text = rf"\textbf{{{text}}}" if bold else text
    return text + (f"$^{{{markers}}}$" if markers else "")


def table_latex(table: Table, caption: str, label: str) -> str:
    """One booktabs table: a left-aligned text column, right-aligned number columns."""
    numeric = table.numeric()
    numeric[0] = False
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(escape(h) for h in table.header) + r" \\",
        r"\midrule",
    ]
    for i, row in enumerate(table.rows):
        cells = [_cell(c, (i, j) in table.bold, numeric[j]) for j, c in enumerate(row)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", rf"\label{{{label}}}", r"\end{table}"]
    return "\n".join(lines)


def render_latex(data: RunData, tables: list[tuple[str, Table]]) -> str:
    """report.tex: a booktabs table per (dataset, main table), ready to ``\\input``."""
    spec = data.spec
    note = "Best value per column in bold."
    if spec.baseline is not None:
        markers = ", ".join(f"${MARKER_TEX[MARKERS[t]]}$ {TEST_NAMES[t]}" for t in spec.tests)
        note += (
            f" Significantly different from the baseline {escape(spec.baseline)} ({markers}; "
            f"{escape(spec.correction)} correction, $\\alpha = {spec.alpha}$)."
        )
    parts = [f"% zerda-eval report: {data.name} (tables need \\usepackage{{booktabs}})"]
    for dataset, table in tables:
        label = "tab:" + re.sub(r"[^A-Za-z0-9]+", "-", f"{data.name}-{dataset}").strip("-")
        parts.append(table_latex(table, f"{escape(dataset)}. {note}", label))
    return "\n\n".join(parts) + "\n"
