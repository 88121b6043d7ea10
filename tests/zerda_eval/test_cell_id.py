"""The cell id covers every setting that can change a cell's numbers: each one is planted in turn and must
give a new id (the seed first). A key of the experiment file that is not planted here must be declared a
label (it names or places things, never changes a number), so a new key cannot slip past the id."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import zerda_eval.config.code_fingerprint as code_fingerprint
import zerda_eval.config.experiment as experiment
from zerda_eval.config.experiment import DATASET_KEYS, EXPERIMENT_KEYS, FUSION_KEYS, SYSTEM_KEYS, resolve_experiment
from zerda_eval.ranking import TIE_BREAK

BASE: dict[str, Any] = {
    "experiment": {"name": "ids", "seed": 0, "depth": 20, "measures": ["ndcg@10"]},
    "datasets": [{"id": "cranfield", "max_queries": 5}],
    "systems": [
        {"name": "bm25", "family": "zerda.keyword", "params": {"k1": 1.2}},
        {"name": "meta", "family": "zerda.metadata"},
        {"name": "user", "family": "python", "params": {"object": "tests.x:f", "version": "1"}},
    ],
    "fusions": [{"name": "fused", "inputs": ["bm25", "meta"], "method": "rrf", "params": {"k": 60}}],
}
EVERY = ("bm25", "meta", "user", "fused")
# (section, index, key, new value, the cells whose id must change); the seed first
PLANTED = [
    ("experiment", None, "seed", 1, EVERY),
    ("experiment", None, "depth", 21, EVERY),
    ("experiment", None, "measures", ["ndcg@10", "P@5"], EVERY),
    ("datasets", 0, "id", "vaswani", EVERY),
    ("datasets", 0, "max_queries", 6, EVERY),
    ("datasets", 0, "measures", ["ndcg@5"], EVERY),
    ("datasets", 0, "relevance", "raw", EVERY),  # a protocol option of the dataset
    ("systems", 0, "params", {"k1": 1.3}, ("bm25", "fused")),
    ("systems", 0, "name", "bm25b", ("bm25", "fused")),
    ("systems", 1, "family", "zerda.keyword", ("meta", "fused")),
    ("systems", 2, "params", {"object": "tests.x:f", "version": "1", "duplicates": "max"}, ("user",)),
    ("fusions", 0, "method", "pipeline_rrf", ("fused",)),  # both take k
    ("fusions", 0, "params", {"k": 61}, ("fused",)),
    ("fusions", 0, "inputs", ["meta", "bm25"], ("fused",)),
    ("fusions", 0, "name", "fused2", ("fused",)),
]
# keys that label or place things and never change a number (so not in the id)
LABELS = {
    "experiment": {"name", "description", "output_dir", "cache_dir", "max_cells"},
    "datasets": {"name"},
    "systems": {"grid", "tune"},  # a grid point is its params (planted); tune adds a tuned cell of its own
    "fusions": {"grid", "tune"},
}
KEYS = {"experiment": EXPERIMENT_KEYS, "datasets": DATASET_KEYS, "systems": SYSTEM_KEYS, "fusions": FUSION_KEYS}


def cell_ids(raw: dict[str, Any]) -> dict[str, str]:
    return {
        cell.name.removesuffix("b").removesuffix("2"): cell.cell_id
        for cell in resolve_experiment(raw, "ids.toml").cells
    }


@pytest.fixture(autouse=True)
def user_factory(monkeypatch):
    """``tests.x:f`` resolves (the python family imports a factory path when the file is checked)."""
    import sys
    import types

    module = types.ModuleType("tests.x")
    module.f = lambda: lambda text, k: []
    monkeypatch.setitem(sys.modules, "tests.x", module)


def test_every_key_of_the_file_is_planted_or_declared_a_label():
    planted = {(section, key) for section, _, key, _, _ in PLANTED}
    for section, keys in KEYS.items():
        for key in keys:
            assert (section, key) in planted or key in LABELS[section], f"plant a change of {section}.{key}"


@pytest.mark.parametrize(
    ("section", "index", "key", "value", "changed"), PLANTED, ids=[f"{p[0]}.{p[2]}" for p in PLANTED]
)
def test_each_planted_change_gives_a_new_id_to_the_cells_it_touches(section, index, key, value, changed):
    before = cell_ids(BASE)
    raw = copy.deepcopy(BASE)
    (raw[section] if index is None else raw[section][index])[key] = value
    if section == "systems" and key == "name":  # the fusion names its inputs by name
        raw["fusions"][0]["inputs"] = [
            value if name == BASE[section][index]["name"] else name for name in raw["fusions"][0]["inputs"]
        ]
    after = cell_ids(raw)
    for name in EVERY:
        assert (after[name] != before[name]) == (name in changed), name


@pytest.mark.parametrize(
    "plant",
    [
        lambda m: m.setitem(experiment.CONVENTIONS, "tie_break", "score desc, doc_id asc"),  # the old order
        lambda m: m.setitem(experiment.CONVENTIONS, "rrf", "0-based rank"),
        lambda m: m.setattr(experiment, "library_versions", lambda names=(): {"numpy": "0.0.0"}),
        lambda m: m.setattr(code_fingerprint, "code_fingerprint", lambda root: "edited"),
    ],
    ids=["tie_break", "rrf_convention", "versions", "code"],
)
def test_conventions_versions_and_code_are_in_every_id(monkeypatch, plant):
    before = cell_ids(BASE)
    plant(monkeypatch)
    after = cell_ids(BASE)
    assert all(after[name] != before[name] for name in EVERY)


def test_the_recorded_order_is_trec_evals():
    cell = resolve_experiment(copy.deepcopy(BASE), "ids.toml").cells[0]
    assert (
        cell.config["conventions"]["tie_break"]
        == TIE_BREAK
        == "score desc (as a float32, trec_eval's float sim), doc_id desc (UTF-8 bytes, trec_eval's strcmp)"
    )
    assert cell.config["seed"] == 0
