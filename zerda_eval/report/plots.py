"""The report's plots (matplotlib, Agg backend), each saved as PNG and SVG.

Readability rules kept by every plot: labelled axes with units, the legend outside the data area,
the baseline marked. Labels go through ``plot_label``: matplotlib draws Arabic glyphs (DejaVu Sans
has them) but neither joins nor orders them right-to-left, so Arabic text is shaped with
``arabic_reshaper`` + ``python-bidi`` when those are installed and shown as ``\\uXXXX`` escapes
otherwise, rather than drawn wrongly. Dataset ids and system labels are ASCII in practice.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.compare import cells_of, index_per_query
from zerda_eval.analysis.studies.base import StudyFigure
from zerda_eval.store.files import atomic_write_bytes

ARABIC = re.compile(r"[\u0600-\u06FF\u0750-\u077F\uFB50-\uFDFF\uFE70-\uFEFF]+")
DPI = 120
plt.rcParams.update({"font.family": "DejaVu Sans", "axes.grid": True, "grid.alpha": 0.3})


@dataclass(frozen=True)
class Figure:
    """A saved plot: its name, the PNG and SVG files and a one-line caption."""

    name: str
    png: Path
    svg: Path
    caption: str


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


def _save(fig: plt.Figure, out_dir: Path, name: str, caption: str) -> Figure:
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    for path, options in ((png, {"dpi": DPI}), (svg, {})):  # atomically: a failure leaves no truncated file
        buffer = io.BytesIO()
        fig.savefig(buffer, format=path.suffix[1:], bbox_inches="tight", **options)
        atomic_write_bytes(path, buffer.getvalue())
    plt.close(fig)
    return Figure(name, png, svg, caption)


def study_figure(figure: StudyFigure, out_dir: Path) -> Figure:
    """A study's figure, drawn with ``plot_label`` and saved like every other plot."""
    return _save(figure.draw(plot_label), out_dir, figure.name, figure.caption)


def _legend_outside(ax: plt.Axes, title: str) -> None:
    ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _datasets(results: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(results["dataset"]))


def metric_bars(
    results: pd.DataFrame,
    per_query: pd.DataFrame,
    measure: str,
    baseline: str | None,
    out_dir: Path,
    seed: int,
) -> Figure:
    """Grouped bars: ``measure`` per system (bars) per dataset (groups), 95% per-query bootstrap CIs."""
    datasets = _datasets(results)
    systems = list(dict.fromkeys(results["system"]))
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 + len(datasets) * len(systems) * 0.28), 4.5))
    colors = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(systems), 2)))
    baseline_labels = set(cells_of(results, baseline)["system"]) if baseline else set()
    lookup = index_per_query(per_query)
    for i, system in enumerate(systems):
        means, errors = [], [[], []]
        for dataset in datasets:
            row = results[(results["dataset"] == dataset) & (results["system"] == system)]
            if row.empty:
                means.append(np.nan)
                errors[0].append(0.0)
                errors[1].append(0.0)
                continue
            values = np.array(list(lookup.get((row["cell_id"].iloc[0], measure), {}).values()))
            low, high = sig.bootstrap_ci(values, seed=seed)
            mean = float(row[measure].iloc[0])
            means.append(mean)
            errors[0].append(max(mean - low, 0.0))
            errors[1].append(max(high - mean, 0.0))
        is_base = system in baseline_labels
        ax.bar(
            np.arange(len(datasets)) + (i - (len(systems) - 1) / 2) * width,
            means,
            width,
            yerr=errors,
            capsize=2,
            color=colors[i],
            edgecolor="black" if is_base else "none",
            hatch="//" if is_base else None,
            label=plot_label(system + (" (baseline)" if is_base else "")),
        )
    ax.set_xticks(np.arange(len(datasets)), [plot_label(d) for d in datasets], rotation=15, ha="right")
    ax.set_xlabel("dataset")
    ax.set_ylabel(f"{measure} (mean over queries)")
    ax.set_title(f"{measure} per system and dataset (error bars: 95% bootstrap CI)")
    _legend_outside(ax, "system")
    return _save(fig, out_dir, f"metric_{_slug(measure)}", f"{measure} per system per dataset, 95% bootstrap CIs.")


def delta_distribution(
    results: pd.DataFrame, per_query: pd.DataFrame, measure: str, baseline: str, out_dir: Path
) -> Figure | None:
    """Box plots of per-query ``measure`` deltas (system minus baseline), one panel per dataset."""
    datasets = _datasets(results)
    lookup = index_per_query(per_query)
    panels = []
    for dataset in datasets:
        rows = results[results["dataset"] == dataset]
        base = cells_of(rows, baseline)
        if len(base) != 1:
            continue
        base_values = lookup.get((base["cell_id"].iloc[0], measure), {})
        deltas = {}
        for _, row in rows.iterrows():
            if row["cell_id"] != base["cell_id"].iloc[0]:
                deltas[row["system"]] = sig.align(base_values, lookup.get((row["cell_id"], measure), {})).delta
        if deltas:
            panels.append((dataset, deltas))
    if not panels:
        return None
    n_systems = max(len(d) for _, d in panels)
    size = (max(6.0, 1.5 + 0.5 * n_systems), 1.5 + 3.2 * len(panels))
    fig, axes = plt.subplots(len(panels), 1, figsize=size, squeeze=False, layout="constrained")
    for ax, (dataset, deltas) in zip(axes[:, 0], panels, strict=True):
        ax.boxplot(list(deltas.values()), showmeans=True)
        ax.set_xticks(np.arange(1, len(deltas) + 1), [plot_label(s) for s in deltas], rotation=30, ha="right")
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_ylabel(f"Δ {measure} per query")
        ax.set_title(plot_label(f"{dataset}: system minus baseline ({baseline}); triangle = mean"))
    axes[-1, 0].set_xlabel("system")
    return _save(fig, out_dir, f"delta_{_slug(measure)}", f"Per-query {measure} delta against {baseline}.")


def pareto_front(latency: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Mask of points no other point dominates (latency <= and quality >=, one of them strictly)."""
    latency, quality = np.asarray(latency, float), np.asarray(quality, float)
    no_worse = (latency[None, :] <= latency[:, None]) & (quality[None, :] >= quality[:, None])
    better = (latency[None, :] < latency[:, None]) | (quality[None, :] > quality[:, None])
    return ~np.any(no_worse & better, axis=1)


def quality_latency(results: pd.DataFrame, measure: str, out_dir: Path) -> Figure | None:
    """Scatter of ``measure`` against mean latency per dataset, Pareto front drawn as a step line.

    A fusion's latency is its total with its inputs' (``latency_mean_ms``), so it is never drawn
    cheaper than the systems it needs.
    """
    if "latency_mean_ms" not in results.columns or results["latency_mean_ms"].isna().all():
        return None
    datasets = _datasets(results)
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets) + 2.5, 4.0), squeeze=False)
    systems = list(dict.fromkeys(results["system"]))
    colors = dict(zip(systems, plt.get_cmap("tab20")(np.linspace(0, 1, max(len(systems), 2))), strict=False))
    for ax, dataset in zip(axes[0], datasets, strict=True):
        rows = results[results["dataset"] == dataset].dropna(subset=["latency_mean_ms", measure])
        for _, row in rows.iterrows():
            ax.scatter(
                row["latency_mean_ms"],
                row[measure],
                color=colors[row["system"]],
                label=plot_label(row["system"]),
            )
        front = rows[pareto_front(rows["latency_mean_ms"].to_numpy(), rows[measure].to_numpy())]
        front = front.sort_values("latency_mean_ms")
        ax.step(
            front["latency_mean_ms"],
            front[measure],
            where="post",
            color="black",
            linewidth=1,
            label="Pareto front",
        )
        ax.scatter(front["latency_mean_ms"], front[measure], facecolors="none", edgecolors="black", s=120)
        ax.set_xscale("log")
        ax.set_xlabel("mean latency per query (ms, log scale; fusions: with their inputs)")
        ax.set_ylabel(measure)
        ax.set_title(plot_label(dataset))
    handles, labels = axes[0, -1].get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(
        unique.values(),
        unique.keys(),
        loc="upper left",
        bbox_to_anchor=(1.0, 0.95),
        fontsize="small",
        frameon=False,
    )
    fig.tight_layout()
    return _save(
        fig,
        out_dir,
        f"pareto_{_slug(measure)}",
        f"{measure} vs mean latency (a fusion's includes its inputs'); circled points form the Pareto front.",
    )


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
    """Line plot of ``measure`` against ``param`` per series, one panel per dataset (None if no sweep)."""
    points = sweep_points(results, param)
    if points.empty:
        return None
    points = points.merge(results[["cell_id", measure]], on="cell_id")
    datasets = list(dict.fromkeys(points["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets) + 3.0, 3.8), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for series, group in points[points["dataset"] == dataset].groupby("series", sort=False):
            group = group.sort_values("x")
            ax.plot(group["x"], group[measure], marker="o", label=plot_label(str(series)))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(measure)
        ax.set_title(plot_label(dataset))
    _legend_outside(axes[0, -1], "series")
    fig.tight_layout()
    return _save(fig, out_dir, f"sweep_{_slug(param)}_{_slug(measure)}", f"{measure} against {xlabel}.")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")
