"""The report's plots (matplotlib, Agg backend), each saved as PNG and SVG.

Every plot answers one question and is drawn at the size it is read at: at most ``MAX_WIDTH_IN``
inches wide (a page at 96 CSS px per inch shows it unscaled in a 1280 px window and on GitHub), 9-10 pt
text, systems named by their short labels (``labels.short_labels``), labels horizontal, the baseline
marked, legends outside the data. Plots are deterministic: a fixed SVG hash salt and no dates in the
metadata, so the same numbers give the same bytes. The PNG is rendered at ``DPI`` (1.5x) and shown at ``CSS_DPI``, so
it stays sharp on high-density screens; ``Figure.width`` is its display width in CSS pixels.

Labels go through ``plot_label``: matplotlib draws Arabic glyphs (DejaVu Sans has them) but neither
joins nor orders them right-to-left, so Arabic text is shaped with ``arabic_reshaper`` +
``python-bidi`` when those are installed and shown as ``\\uXXXX`` escapes otherwise, rather than drawn
wrongly.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.lines
import matplotlib.patches
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.compare import cells_of, index_per_query
from zerda_eval.analysis.studies.base import StudyFigure
from zerda_eval.config.tuning import TUNED
from zerda_eval.report.labels import split_label
from zerda_eval.report.tables import MAIN_LATENCY, RunData, dataset_measures
from zerda_eval.store.files import atomic_write_bytes

ARABIC = re.compile(r"[\u0600-\u06FF\u0750-\u077F\uFB50-\uFDFF\uFE70-\uFEFF]+")
DPI = 144
CSS_DPI = 96
MAX_WIDTH_IN = 9.5
PANEL_COLUMNS = 3
LOG_SPREAD = 20.0  # latency axis on a log scale when the slowest cell is this many times the fastest
TIE = 1e-12  # per-query values closer than this are a tie
PILE_SHARE = 0.1  # a scatter dot standing for this share of the queries or more is labelled with its count
RASTER_DOTS = 250  # a scatter panel with more dots is an image inside the SVG (7,000 queries: 5.5 MB as vectors)
MAX_DRAWN = 12  # bars or panels a per-system plot draws per dataset; beyond, the best grid entries (listed rest)
MAX_LEGEND_GROUPS = 10  # coloured legend entries (grid entries, sweep series): tab10's colours, none reused
WIN, DRAW, LOSS = "#4c956c", "#b8b8b8", "#c8553d"
plt.rcParams.update(
    {
        "font.family": "DejaVu Sans",
        "font.size": 10,
        "axes.titlesize": 10,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "svg.hashsalt": "zerda-eval",  # fixed clip-path and glyph ids: the same plot is the same SVG bytes
    }
)
UNDATED = {"svg": {"Date": None}, "png": {}}  # no date in a plot's metadata: regenerated plots stay identical


@dataclass(frozen=True)
class Figure:
    """A saved plot: its name, the PNG and SVG files, a one-line caption, its display size in CSS px."""

    name: str
    png: Path
    svg: Path
    caption: str
    width: int
    height: int


def plot_label(text: str) -> str:
    """``text`` safe to draw: Arabic runs shaped right-to-left if possible, else escaped."""
    if not ARABIC.search(text):
        return text
    try:
        import arabic_reshaper
        from bidi.algorithm import get_display
    except ImportError:
        return ARABIC.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return get_display(arabic_reshaper.reshape(text))


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    return struct.unpack(">II", data[16:24])


def _save(fig: plt.Figure, out_dir: Path, name: str, caption: str) -> Figure:
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    size = (0, 0)
    # atomically (a failure leaves no truncated file); no date in the SVG, so a redrawn plot is byte-identical
    for path, options in ((png, {"dpi": DPI}), (svg, {})):
        buffer = io.BytesIO()
        kind = path.suffix[1:]
        fig.savefig(buffer, format=kind, bbox_inches="tight", metadata=UNDATED[kind], **options)
        atomic_write_bytes(path, buffer.getvalue())
        if path is png:
            size = png_size(buffer.getvalue())
    plt.close(fig)
    return Figure(name, png, svg, caption, round(size[0] * CSS_DPI / DPI), round(size[1] * CSS_DPI / DPI))


def study_figure(figure: StudyFigure, out_dir: Path) -> Figure:
    """A study's figure, drawn with ``plot_label`` and saved like every other plot."""
    return _save(figure.draw(plot_label), out_dir, figure.name, figure.caption)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _grid(panels: int, row_height: float, columns: int = PANEL_COLUMNS, **options) -> tuple[plt.Figure, list]:
    """A figure of ``panels`` axes, ``columns`` per row, ``MAX_WIDTH_IN`` wide; unused axes removed."""
    columns = min(columns, panels)
    rows = math.ceil(panels / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(MAX_WIDTH_IN, row_height * rows), squeeze=False, layout="constrained", **options
    )
    flat = list(axes.flat)
    for ax in flat[panels:]:
        ax.remove()
    return fig, flat[:panels]


def _baseline_labels(data: RunData, rows: pd.DataFrame) -> set[str]:
    return set(cells_of(rows, data.spec.baseline)["system"]) if data.spec.baseline else set()


def _short(data: RunData, label: str) -> str:
    return plot_label(data.labels.get(label, label))


def metric_bars(data: RunData, dataset: str, out_dir: Path) -> Figure:
    """Every measure of ``dataset`` per system: horizontal bars, 95% per-query bootstrap CIs, one panel each.

    Beyond ``MAX_DRAWN`` cells: the baseline and the best grid entries by the first compared measure
    (``drawn_cells``); the figure and its caption say how many more cells the dataset's table holds."""
    measures = dataset_measures(data, dataset)
    ranking = data.measures[0] if data.measures[0] in measures else measures[0]
    baseline = _baseline_labels(data, data.results[data.results["dataset"] == dataset])
    drawn = drawn_cells(data, data.results[data.results["dataset"] == dataset], ranking, keep=baseline)
    rows = drawn.rows
    lookup = index_per_query(data.per_query[data.per_query["dataset"] == dataset])
    fig, axes = _grid(len(measures), 0.3 * len(rows) + 1.0, sharey=True)
    y = np.arange(len(rows))
    for ax, measure in zip(axes, measures, strict=True):
        means = rows[measure].to_numpy(float)
        bounds = [
            sig.bootstrap_ci(np.array(list(lookup.get((c, measure), {}).values())), seed=data.spec.seed)
            for c in rows["cell_id"]
        ]
        low = np.array([b[0] for b in bounds])
        high = np.array([b[1] for b in bounds])
        errors = np.nan_to_num(np.vstack([means - low, high - means]).clip(min=0))
        is_base = rows["system"].isin(baseline).to_numpy()
        measured = np.isfinite(low).any()
        color = np.where(is_base, "#9aa5b1", "#4c72b0")
        ax.barh(y, means, xerr=errors if measured else None, capsize=2, color=color, height=0.7)
        for i in np.flatnonzero(is_base):
            ax.barh(y[i], means[i], height=0.7, fill=False, hatch="//", edgecolor="black", linewidth=0.6)
        ax.set_title(
            measure if measured else f"{measure}\n(no per-query values: no CI)", fontsize=10 if measured else 9
        )
        ax.set_xlim(
            0, max(float(np.nanmax(high)) if np.isfinite(high).any() else 0.0, float(np.nanmax(means))) * 1.08 or 1
        )
        ax.grid(axis="y", visible=False)
    names = [n + (" (baseline)" if s in baseline else "") for n, s in zip(drawn.names, rows["system"], strict=True)]
    axes[0].set_yticks(y, names)
    axes[0].invert_yaxis()
    where = f"the table of {dataset} above"
    fig.supxlabel("mean over queries (error bar: 95% bootstrap CI)" + drawn.figure_note(where), fontsize=9)
    caption = f"{dataset}: every measure per system, 95% per-query bootstrap CIs." + drawn.caption(ranking, where)
    return _save(fig, out_dir, f"metrics_{_slug(dataset)}", caption)


def grid_entry(label: str) -> str:
    """The grid entry a cell belongs to: its label before ``[``; a tuned row or a plain system is its own."""
    name, axes = split_label(label)
    return label if not axes or label.endswith(f"{TUNED}]") else name


@dataclass(frozen=True)
class Drawn:
    """The cells a per-system plot draws (``rows``, in drawing order, labelled ``names``; the first ``kept``
    drawn whatever their values) and how many it leaves out."""

    rows: pd.DataFrame
    names: list[str]
    kept: int = 0
    hidden_cells: int = 0
    hidden_entries: tuple[str, ...] = ()

    def figure_note(self, where: str) -> str:
        """A second line for the figure's label: how many cells are not drawn and where they are ("" if none)."""
        return f"\n+ {self.hidden_cells} more cells not drawn: see {where}" if self.hidden_cells else ""

    def caption(self, measure: str, where: str) -> str:
        """The caption's sentences on the cells not drawn ("" if none)."""
        if not self.hidden_cells:
            return ""
        first = "the baseline and " if self.kept else ""
        rest = f" Not drawn: {', '.join(self.hidden_entries)}." if self.hidden_entries else ""
        return (
            f" Drawn: {first}the {len(self.rows) - self.kept} best systems by {measure}, a grid entry by its best "
            f'cell ("best of N"); {self.hidden_cells} more cells are in {where}.{rest}'
        )


def drawn_cells(data: RunData, rows: pd.DataFrame, measure: str, keep: set[str] = frozenset()) -> Drawn:
    """Every cell of ``rows`` (results order) up to ``MAX_DRAWN``; beyond, one cell per grid entry (its best
    by ``measure``): the systems in ``keep`` first, then the best entries, ``MAX_DRAWN`` in all."""
    labels = rows["system"].astype(str)
    if len(rows) <= MAX_DRAWN:
        return Drawn(rows, [_short(data, label) for label in labels])
    kept = labels.isin(keep)
    entry = labels.where(kept, labels.map(grid_entry))
    ranked = rows.assign(_entry=entry, _later=~kept, _value=-rows[measure].astype(float))
    best = ranked.sort_values(["_later", "_value"], kind="stable", na_position="last").drop_duplicates("_entry")
    shown = best.head(MAX_DRAWN)
    sizes = entry.value_counts()
    names = [
        _short(data, str(s)) + (f" (best of {sizes[e]})" if sizes[e] > 1 else "")
        for s, e in zip(shown["system"], shown["_entry"], strict=True)
    ]
    hidden = tuple(str(e) for e in best["_entry"].iloc[MAX_DRAWN:])
    return Drawn(rows.loc[shown.index], names, int((~shown["_later"]).sum()), len(rows) - len(shown), hidden)


def _paired(data: RunData, dataset: str, measure: str) -> tuple[list[tuple[str, sig.Aligned]], Drawn | None]:
    """(drawn name, values aligned with the baseline's) for the other systems of ``dataset`` that
    ``drawn_cells`` draws, and that choice (None without a single baseline cell)."""
    rows = data.results[data.results["dataset"] == dataset]
    base = cells_of(rows, data.spec.baseline) if data.spec.baseline else rows.iloc[0:0]
    if len(base) != 1:
        return [], None
    lookup = index_per_query(data.per_query[data.per_query["dataset"] == dataset])
    base_values = lookup.get((base["cell_id"].iloc[0], measure), {})
    measured = np.array([(cell, measure) in lookup for cell in rows["cell_id"]], dtype=bool)
    drawn = drawn_cells(data, rows[(rows["cell_id"] != base["cell_id"].iloc[0]).to_numpy() & measured], measure)
    pairs = [
        (name, sig.align(base_values, lookup[(cell, measure)]))
        for name, cell in zip(drawn.names, drawn.rows["cell_id"], strict=True)
    ]
    return pairs, drawn


def win_tie_loss(aligned: sig.Aligned) -> tuple[int, int, int]:
    """Queries where the system beats, ties and loses to the baseline."""
    delta = aligned.delta
    return int((delta > TIE).sum()), int((np.abs(delta) <= TIE).sum()), int((delta < -TIE).sum())


def per_query_scatter(data: RunData, dataset: str, measure: str, out_dir: Path) -> Figure | None:
    """Baseline against each system, one point per query, the diagonal drawn (None without a baseline).

    Queries with the same pair of values share a dot whose area grows with their number (many queries
    score 0 or 1 under both systems); a dot for ``PILE_SHARE`` of the queries or more says how many. Beyond
    ``RASTER_DOTS`` dots a panel's dots are one image in the SVG (its axes and text stay vector).
    """
    pairs, drawn = _paired(data, dataset, measure)
    if not pairs:
        return None
    fig, axes = _grid(len(pairs), 3.1)
    top = max(1.0, *(float(max(a.baseline.max(), a.system.max())) for _, a in pairs if a.delta.size))
    for ax, (system, aligned) in zip(axes, pairs, strict=True):
        wins, ties, losses = win_tie_loss(aligned)
        ax.plot([0, top], [0, top], color="black", linewidth=0.8, linestyle="--")
        points, counts = np.unique(np.column_stack([aligned.baseline, aligned.system]), axis=0, return_counts=True)
        dots = {"s": 12 * np.sqrt(counts), "alpha": 0.45, "color": "#4c72b0", "edgecolors": "none"}
        ax.scatter(points[:, 0], points[:, 1], rasterized=len(points) > RASTER_DOTS, **dots)  # the PNG is the same
        for (x, y), count in zip(points, counts, strict=True):
            if count >= PILE_SHARE * len(aligned.query_ids):  # a pile of queries: say how many
                right, upper = x > 0.5 * top, y > 0.5 * top  # write it towards the middle of the panel
                ax.annotate(
                    f"{count}",
                    (x, y),
                    xytext=(-5 if right else 5, -5 if upper else 5),
                    textcoords="offset points",
                    ha="right" if right else "left",
                    va="top" if upper else "bottom",
                    fontsize=8,
                )
        ax.set_xlim(-0.03 * top, 1.03 * top)
        ax.set_ylim(-0.03 * top, 1.03 * top)
        ax.set_aspect("equal")
        ax.set_title(f"{system}\n{wins} better, {ties} tied, {losses} worse", fontsize=9)
        ax.set_xlabel(f"{data.spec.baseline} (baseline)")
        ax.set_ylabel(measure)
    where = f"the table of {dataset} against {data.spec.baseline} below"
    note = drawn.figure_note(where).strip()
    if note:
        fig.supxlabel(note, fontsize=9)
    caption = (
        f"{dataset}: {measure} per query, baseline ({data.spec.baseline}) on x, system on y; "
        "above the diagonal the system is better." + drawn.caption(measure, where)
    )
    return _save(fig, out_dir, f"per_query_{_slug(dataset)}_{_slug(measure)}", caption)


def win_tie_loss_bars(data: RunData, measure: str, out_dir: Path) -> Figure | None:
    """Per dataset and system: the share of queries better than, tied with and worse than the baseline."""
    paired = {d: _paired(data, d, measure) for d in data.datasets}
    panels = [(d, pairs, drawn) for d, (pairs, drawn) in paired.items() if pairs]
    if not panels:
        return None
    heights = [0.32 * len(pairs) + 0.7 for _, pairs, _ in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(MAX_WIDTH_IN, sum(heights) + 0.5),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    for ax, (dataset, pairs, drawn) in zip(axes[:, 0], panels, strict=True):
        counts = np.array([win_tie_loss(aligned) for _, aligned in pairs], float)
        shares = counts / counts.sum(axis=1, keepdims=True).clip(min=1)
        y = np.arange(len(pairs))
        left = np.zeros(len(pairs))
        for k, (name, color) in enumerate(zip(("better", "tied", "worse"), (WIN, DRAW, LOSS), strict=True)):
            ax.barh(y, shares[:, k], left=left, color=color, height=0.7, label=name)
            for i in range(len(pairs)):
                if shares[i, k] >= 0.06:
                    ax.text(
                        left[i] + shares[i, k] / 2, y[i], f"{int(counts[i, k])}", ha="center", va="center", fontsize=8
                    )
            left += shares[:, k]
        ax.set_yticks(y, [system for system, _ in pairs])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        note = drawn.figure_note(f"the table of {dataset} against {data.spec.baseline}").strip()
        ax.set_title(plot_label(dataset) + (f" ({note})" if note else ""), loc="left")
        ax.grid(False)
    axes[0, 0].legend(ncols=3, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1, 0].set_xlabel(f"share of queries ({measure} against {data.spec.baseline}; numbers: queries)")
    caption = f"{measure}: queries on which each system is better than, tied with or worse than {data.spec.baseline}."
    for dataset, _, drawn in panels:
        where = f"the table of {dataset} against {data.spec.baseline}"
        caption += drawn.caption(measure, where).replace(" Drawn:", f" {dataset}: drawn", 1)
    return _save(fig, out_dir, f"win_tie_loss_{_slug(measure)}", caption)


def pareto_front(latency: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Mask of points no other point dominates (latency <= and quality >=, one of them strictly)."""
    latency, quality = np.asarray(latency, float), np.asarray(quality, float)
    no_worse = (latency[None, :] <= latency[:, None]) & (quality[None, :] >= quality[:, None])
    better = (latency[None, :] < latency[:, None]) | (quality[None, :] > quality[:, None])
    return ~np.any(no_worse & better, axis=1)


MARKER_SHAPES = "osD^vP*Xph<>"
OTHERS_GREY = "#9a9a9a"


def legend_groups(rows: pd.DataFrame, measure: str) -> tuple[list, list]:
    """The cells of ``rows`` grouped by system (grid entry: the label before ``[``), best ``measure`` first:
    ``(shown, rest)``, each a list of ``(name, rows)``; at most ``MAX_LEGEND_GROUPS`` are shown, so a
    colour-and-marker pair is never reused and the legend stays short at 50+ cells. Up to
    ``MAX_LEGEND_GROUPS`` cells keep one entry each, in results order."""
    labels = rows["system"].astype(str)
    if len(rows) <= MAX_LEGEND_GROUPS:
        return [(label, rows[labels == label]) for label in labels], []
    names = labels.map(grid_entry)
    groups = [(str(name), group) for name, group in rows.groupby(names, sort=False)]
    groups.sort(key=lambda item: -float(item[1][measure].max()))
    return groups[:MAX_LEGEND_GROUPS], groups[MAX_LEGEND_GROUPS:]


def quality_latency(data: RunData, dataset: str, measure: str, out_dir: Path) -> Figure | None:
    """``measure`` against mean latency on one dataset, the Pareto front drawn as a step line.

    A fusion's latency is its total with its inputs' (``latency_mean_ms``), so it is never drawn
    cheaper than the systems it needs. Cells without a latency (run files) are named in the caption.
    """
    rows = data.results[data.results["dataset"] == dataset]
    if MAIN_LATENCY not in rows.columns or measure not in rows.columns:
        return None
    timed = rows.dropna(subset=[MAIN_LATENCY, measure])
    if timed.empty:
        return None
    fig, ax = plt.subplots(figsize=(MAX_WIDTH_IN, 4.2), layout="constrained")
    colors = plt.get_cmap("tab10")
    shown, rest = legend_groups(timed, measure)
    for i, (name, members) in enumerate(shown):
        label = _short(data, str(members["system"].iloc[0])) if len(members) == 1 else f"{name} ({len(members)} cells)"
        style = {"color": colors(i % 10), "marker": MARKER_SHAPES[i % len(MARKER_SHAPES)]}
        ax.scatter(members[MAIN_LATENCY], members[measure], s=60, label=plot_label(label), zorder=3, **style)
    if rest:
        others = pd.concat([members for _, members in rest])
        label = f"other systems ({len(rest)}, {len(others)} cells; in the caption)"
        ax.scatter(others[MAIN_LATENCY], others[measure], s=30, color=OTHERS_GREY, marker="o", label=label, zorder=2)
    front = timed[pareto_front(timed[MAIN_LATENCY].to_numpy(), timed[measure].to_numpy())].sort_values(MAIN_LATENCY)
    ax.step(front[MAIN_LATENCY], front[measure], where="post", color="black", linewidth=1, label="Pareto front")
    ax.scatter(front[MAIN_LATENCY], front[measure], facecolors="none", edgecolors="black", s=180, zorder=2)
    latency = timed[MAIN_LATENCY].to_numpy(float)
    log = latency.min() > 0 and latency.max() / latency.min() >= LOG_SPREAD
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("mean latency per query (ms" + (", log scale" if log else "") + "; a fusion: with its inputs)")
    ax.set_ylabel(measure)
    ax.set_title(plot_label(dataset))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    untimed = [data.labels.get(s, s) for s in rows["system"][rows[MAIN_LATENCY].isna()]]
    caption = f"{dataset}: {measure} against mean latency; circled points form the Pareto front."
    if any(len(members) > 1 for _, members in shown):
        caption += " One colour and marker per system, its grid cells drawn alike."
    if rest:
        caption += f" Grey, beyond the {len(shown)} best systems: {', '.join(name for name, _ in rest)}."
    caption += f" Not measured (no latency): {', '.join(untimed)}." if untimed else ""
    return _save(fig, out_dir, f"pareto_{_slug(dataset)}_{_slug(measure)}", caption)


def sweep_points(results: pd.DataFrame, param: str) -> pd.DataFrame:
    """Rows of a sweep over ``param``: dataset, series (system name + other params), x, cell_id.

    A list value (``weights``) is swept by its first element. Only series with >= 2 x values count.
    """
    rows = []
    for _, row in results.iterrows():
        params = json.loads(row["params"]) if isinstance(row["params"], str) else dict(row["params"])
        if param not in params:
            continue
        x = params.pop(param)
        x = x[0] if isinstance(x, list) and x else x
        if not isinstance(x, int | float) or isinstance(x, bool):
            continue
        base = str(row["system"]).split("[", 1)[0]
        other = ", ".join(f"{k}={params[k]}" for k in sorted(params) if _varies_apart(results, base, k, param))
        series = base + (f" ({other})" if other else "")
        rows.append({"dataset": row["dataset"], "series": series, "x": float(x), "cell_id": row["cell_id"]})
    frame = pd.DataFrame(rows, columns=["dataset", "series", "x", "cell_id"])
    counts = frame.groupby(["dataset", "series"])["x"].transform("nunique") if not frame.empty else frame["x"]
    return frame[counts >= 2]


def _varies_apart(results: pd.DataFrame, base: str, key: str, param: str) -> bool:
    """True if ``key`` varies across ``base``'s cells other than in lockstep with ``param``.

    ``keyword_weight = 1 - vector_weight`` moves with the swept ``vector_weight``: it is not a series.
    """
    pairs = set()
    for params in cells_of(results, base)["params"]:
        params = json.loads(params) if isinstance(params, str) else params
        pairs.add((json.dumps(params.get(param), sort_keys=True), json.dumps(params.get(key), sort_keys=True)))
    keys, xs = {k for _, k in pairs}, {x for x, _ in pairs}
    return len(keys) > 1 and not (len(pairs) == len(keys) == len(xs))


def sweep_curves(results: pd.DataFrame, measure: str, param: str, xlabel: str, out_dir: Path) -> Figure | None:
    """Line plot of ``measure`` against ``param`` per series, one panel per dataset (None if no sweep).

    Each series keeps one colour in every panel; beyond ``MAX_LEGEND_GROUPS`` series, the best ones (by
    their best value) are drawn and the rest named in the caption."""
    points = sweep_points(results, param)
    if points.empty:
        return None
    points = points.merge(results[["cell_id", measure]], on="cell_id")
    best = points.groupby("series", sort=False)[measure].max().sort_values(ascending=False, kind="stable")
    series = list(best.index) if len(best) > MAX_LEGEND_GROUPS else list(dict.fromkeys(points["series"]))
    shown, hidden = series[:MAX_LEGEND_GROUPS], series[MAX_LEGEND_GROUPS:]
    colors = plt.get_cmap("tab10")
    datasets = list(dict.fromkeys(points["dataset"]))
    fig, axes = _grid(len(datasets), 3.0)
    for ax, dataset in zip(axes, datasets, strict=True):
        own = points[points["dataset"] == dataset]
        for i, name in enumerate(shown):
            group = own[own["series"] == name].sort_values("x")
            if not group.empty:
                ax.plot(group["x"], group[measure], marker="o", color=colors(i), label=plot_label(str(name)))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(measure)
        ax.set_title(plot_label(dataset))
    handles = [plt.Line2D([], [], marker="o", color=colors(i), label=plot_label(str(n))) for i, n in enumerate(shown)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), frameon=False)
    caption = f"{measure} against {xlabel}."
    if hidden:
        fig.suptitle(f"+ {len(hidden)} more series not drawn: named in the caption", fontsize=9)
        caption += f" Drawn: the {len(shown)} series with the best {measure}. Not drawn: {', '.join(hidden)}."
    return _save(fig, out_dir, f"sweep_{_slug(param)}_{_slug(measure)}", caption)


def effect_intervals(data: RunData, comparisons: pd.DataFrame, dataset: str, measure: str, out_dir: Path):
    """Each system's difference from the baseline at a glance: the mean difference (dot) with its 95% t
    interval (thin) and BCa interval (thick), the band the comparison could detect (grey: ± its minimum
    detectable effect), a filled dot when significant, an open one when not, orange when the three tests
    disagree. The systems drawn are ``drawn_cells``' (None without comparisons on ``measure``)."""
    rows = comparisons[(comparisons["dataset"] == dataset) & (comparisons["measure"] == measure)]
    if rows.empty:
        return None
    results = data.results[data.results["dataset"] == dataset]
    drawn = drawn_cells(data, results[results["cell_id"].isin(set(rows["cell_id"]))], measure)
    shown = rows.set_index("cell_id").loc[list(drawn.rows["cell_id"])]
    y = np.arange(len(shown))
    fig, ax = plt.subplots(figsize=(MAX_WIDTH_IN * 0.8, 0.34 * len(shown) + 1.3), layout="constrained")
    significant = shown[f"significant_{data.spec.tests[0]}"].to_numpy(bool)
    agree = shown["tests_agree"].to_numpy(bool)
    for i, (_, row) in enumerate(shown.iterrows()):
        ax.barh(i, 2 * row["mde"], left=-row["mde"], height=0.8, color="#e5e5e5", zorder=0)
        colour = "#4c72b0" if agree[i] else "#dd8452"
        ax.plot([row["t_low"], row["t_high"]], [i, i], color=colour, linewidth=1, zorder=2)
        ax.plot([row["ci_low"], row["ci_high"]], [i, i], color=colour, linewidth=4, alpha=0.6, zorder=2)
        ax.scatter(row["delta"], i, s=36, zorder=3, color=colour if significant[i] else "white", edgecolors=colour)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(y, drawn.names)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    legend = [
        matplotlib.lines.Line2D([], [], marker="o", color="#4c72b0", linestyle="", label="significant"),
        matplotlib.lines.Line2D(
            [], [], marker="o", markerfacecolor="white", color="#4c72b0", linestyle="", label="not significant"
        ),
        matplotlib.lines.Line2D([], [], color="#dd8452", linewidth=3, label="tests disagree"),
        matplotlib.patches.Patch(color="#e5e5e5", label="± min. detectable effect"),
    ]
    # the figure's legend, above everything: as the axes' own, wider than the axes, it collapsed the layout
    fig.legend(handles=legend, loc="outside upper center", ncols=4, frameon=False, fontsize=8)
    where = f"the table of {dataset} against {data.spec.baseline}"
    ax.set_xlabel(f"Δ {measure} (system − {data.spec.baseline})" + drawn.figure_note(where))
    caption = (
        f"{dataset}: {measure} minus the baseline's, per system: dot = mean difference (filled: significant, "
        f"{data.spec.correction}), thin line = 95% t interval, thick = 95% BCa interval, orange = the t-test, "
        "Wilcoxon and randomisation tests disagree at alpha, grey band = ± the minimum detectable effect (power "
        f"{data.spec.power:g}): a difference inside it is one these queries cannot reliably detect."
        + drawn.caption(measure, where)
    )
    return _save(fig, out_dir, f"effects_{_slug(dataset)}_{_slug(measure)}", caption)


def rank_stability(data: RunData, ranks: pd.DataFrame, dataset: str, measure: str, out_dir: Path) -> Figure:
    """How sure the ranking of ``dataset``'s rows is: per row (the ``MAX_DRAWN`` best by observed rank), the
    95% interval of its rank over bootstrap resamples of the queries (line, dot at the median) and its
    probability of being the best row (bar); a grey name: the best row's Tukey HSD does not tell them apart."""
    shown = ranks.head(MAX_DRAWN)
    y = np.arange(len(shown))
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(MAX_WIDTH_IN, 0.34 * len(shown) + 1.3), sharey=True, layout="constrained", width_ratios=[2, 1]
    )
    left.hlines(y, shown["rank_low"], shown["rank_high"], color="#4c72b0", linewidth=3, alpha=0.6)
    left.scatter(shown["rank_median"], y, color="#4c72b0", zorder=3, s=20, label="median rank")
    left.scatter(shown["rank"], y, marker="|", color="black", s=120, zorder=4, label="observed rank")
    left.set_xlim(0.5, max(float(ranks["rank_high"].max()), 2) + 0.5)
    left.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    left.set_xlabel("rank (1 = best; line: 95% bootstrap interval)")
    left.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, frameon=False, fontsize=8)
    right.barh(y, shown["p_best"], color="#55a868", height=0.6)
    for i, value in enumerate(shown["p_best"]):
        right.text(value, i, f" {value:.0%}", va="center", fontsize=8)
    right.set_xlim(0, 1.2)
    right.set_xlabel("probability of being best")
    left.set_yticks(y, [_short(data, str(s)) for s in shown["system"]])
    for tick, differs, rank in zip(left.get_yticklabels(), shown["differs_from_best"], shown["rank"], strict=True):
        tick.set_color("black" if differs or rank == 1 else "#6e7781")
    left.invert_yaxis()
    for ax in (left, right):
        ax.grid(axis="y", visible=False)
    more = len(ranks) - len(shown)
    caption = (
        f"{dataset}: how stable the ranking of the rows on {measure} is over {len(ranks)} rows, from a bootstrap "
        "over queries (each resample ranks every row): the line spans the central 95% of a row's ranks, the bar "
        "is its share of resamples at rank 1. Grey names: not significantly different from the best row "
        "(randomised Tukey HSD over all pairs)." + (f" The {more} lower-ranked rows are in the table." if more else "")
    )
    return _save(fig, out_dir, f"ranks_{_slug(dataset)}_{_slug(measure)}", caption)
