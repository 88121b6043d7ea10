"""What an experiment file puts in front of a reader (its description, goals' sources and needs: the report prints
them) speaks of the experiment, never of the project's internal issue numbers."""

import re
import tomllib
from pathlib import Path

import pytest

EXPERIMENTS = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.toml"))


def shown_texts(config: dict) -> list[str]:
    """Every string of the file the report shows: the description and each goal's source and needs."""
    texts = [config.get("experiment", {}).get("description", "")]
    for goal in config.get("study", {}).get("goals", {}).get("targets", []):
        texts += [goal.get("source", ""), goal.get("needs", "")]
    return texts


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_no_issue_number_reaches_a_report(path):
    texts = shown_texts(tomllib.loads(path.read_text(encoding="utf-8")))
    assert not [t for t in texts if re.search(r"\bissue\s*#?\d+", t, re.I)]
