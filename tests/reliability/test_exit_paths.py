"""Every way a run can end says so in one line with a non-zero exit code, never a traceback (issue 32):
non-finite numbers anywhere in the experiment, a non-mapping given to ``Experiment.from_dict``,
Ctrl-C at any moment (start-up included), a stdout that cannot encode a label, a grid too large to
expand, and a stdout whose reader went away (``| head``)."""

from __future__ import annotations

import math

import pytest

from tests.reliability.harness import assert_no_partial_output, assert_one_line_error, experiment_toml, write_beir
from zerda_eval import Experiment
from zerda_eval.errors import ConfigError

TWO = [{"name": "a", "family": "zerda.keyword"}, {"name": "b", "family": "zerda.keyword", "params": {"b": 0.3}}]
NON_FINITE = {
    # case: (systems, fusions, experiment overrides, extra TOML, fragments of the line)
    "grid-nan": (
        [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": ["nan", 0.5]}}],
        None,
        None,
        "",
        ["b", "nan"],
    ),
    "grid-inf": ([{"name": "bm25", "family": "zerda.keyword", "grid": {"k1": ["inf"]}}], None, None, "", ["k1", "inf"]),
    "grid-list-nan": ([{"name": "bm25", "family": "zerda.keyword", "grid": [{"b": "nan"}]}], None, None, "", ["b"]),
    "fusion-grid-nan": (
        TWO,
        [{"name": "f", "inputs": ["a", "b"], "method": "rrf", "grid": {"k": ["nan"]}}],
        None,
        "",
        ["k"],
    ),
    "python-options-inf": (
        [
            {
                "name": "x",
                "family": "python",
                "params": {"object": "collections:Counter", "version": "1", "options": {"a": "-inf"}},
            }
        ],
        None,
        None,
        "",
        ["options", "-inf"],
    ),
    "compare-alpha-nan": (None, None, None, '\n[compare]\nbaseline = "bm25"\nalpha = nan\n', ["alpha", "nan"]),
    "study-nan": (None, None, None, "\n[study.rrf_order]\nsystem = nan\n", ["system", "nan"]),
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_a_non_finite_number_anywhere_is_one_line_naming_its_key(case, cli, tmp_path):
    systems, fusions, experiment, extra, fragments = NON_FINITE[case]
    config = experiment_toml(tmp_path, systems=systems, fusions=fusions, experiment=experiment)
    text = config.read_text(encoding="utf-8") + extra
    for value in ("-inf", "inf", "nan"):
        text = text.replace(f'"{value}"', value)
    config.write_text(text, encoding="utf-8")
    line = assert_one_line_error(cli("run", config), "experiment.toml", *fragments)
    assert "finite" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mapping", [None, [1, 2], "experiment.toml", 3.5, math.nan])
def test_from_dict_of_a_non_mapping_is_a_config_error(mapping):
    with pytest.raises(ConfigError, match=r"Experiment\.from_dict: .*mapping"):
        Experiment.from_dict(mapping)


def test_from_dict_with_systems_not_a_mapping_is_a_config_error():
    with pytest.raises(ConfigError, match=r"Experiment\.from_dict: systems= takes a mapping"):
        Experiment.from_dict({"experiment": {"name": "x"}}, systems=[object()])


def test_from_dict_with_nan_names_the_key(tmp_path):
    folder = write_beir(tmp_path / "c")
    mapping = {
        "experiment": {"name": "p", "output_dir": str(tmp_path / "out")},
        "datasets": [{"path": str(folder)}],
        "systems": [{"name": "bm25", "family": "zerda.keyword", "grid": {"b": [0.5, math.inf]}}],
    }
    with pytest.raises(ConfigError, match=r"systems\[0\]\.grid\.b\[1\].*inf.*finite"):
        Experiment.from_dict(mapping)
    assert_no_partial_output(tmp_path / "out")
