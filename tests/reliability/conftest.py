"""The ``cli`` fixture of the reliability suite: the real CLI, in-process, run from ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.harness import CliResult
from zerda_eval import cli as cli_module


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run ``zerda_eval.cli.main(args)`` in-process from ``tmp_path``; return code and captured output."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            code = cli_module.main([str(a) for a in args])
        except SystemExit as exit_:  # argparse or a main() that exits instead of returning
            code = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
