"""Install size and import time: ``python benchmarks/bench_install.py VENV [VENV ...]``.

For each virtual environment: its size on disk (``du``), its largest installed packages, and the wall time
of ``import zerda_eval`` in a fresh process of that environment (the median of ``RUNS``, after one untimed
import that warms the OS file cache; started in ``/`` so that no package in the current folder shadows the
installed one), as ``results.md`` reports them. The install time is measured around the README's command
itself (``/usr/bin/time``), on a fresh clone.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

RUNS = 5
LARGEST = 8
TIMED_IMPORT = "import time; t = time.perf_counter(); import zerda_eval; print(time.perf_counter() - t)"


def megabytes(path: Path) -> int:
    """``du -sm``: the size on disk in MB (1024 x 1024 bytes)."""
    return int(subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def import_seconds(python: Path) -> float:
    """Median wall time of ``import zerda_eval`` in ``RUNS`` fresh processes (one warm-up first)."""
    command = [str(python), "-c", TIMED_IMPORT]
    runs = [
        float(subprocess.run(command, capture_output=True, text=True, check=True, cwd="/").stdout)
        for _ in range(RUNS + 1)
    ]
    return statistics.median(runs[1:])


def report(venv: Path) -> list[str]:
    """The lines printed for one environment."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    sizes = sorted(((megabytes(p), p.name) for p in site.iterdir() if not p.name.endswith("-info")), reverse=True)
    largest = ", ".join(f"{name} {size}" for size, name in sizes[:LARGEST])
    return [
        f"{venv}: {megabytes(venv)} MB; import zerda_eval {import_seconds(venv / 'bin' / 'python'):.3f} s "
        f"(median of {RUNS})",
        f"  largest (MB): {largest}",
    ]


def main(argv: list[str]) -> int:
    for venv in argv or [".venv"]:
        print("\n".join(report(Path(venv))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
