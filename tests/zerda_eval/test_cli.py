"""The command line: exit codes, one-line errors without traceback, version."""

from __future__ import annotations

import pytest

from zerda_eval import __version__
from zerda_eval.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and __version__ in capsys.readouterr().out


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run"])
    assert info.value.code == 2


def test_config_mistake_is_one_line_exit_1(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(
        '[experiment]\nname = "x"\n[[datasets]]\nid = "cranfeld"\n[[systems]]\nname = "a"\nfamily = "zerda.keyword"\n',
        encoding="utf-8",
    )
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'cranfield'" in err and "Traceback" not in err


def test_unknown_scheduler_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "x.toml"), "--scheduler", "dask"]) == 2
    assert "serial" in capsys.readouterr().err


def test_report_of_a_non_run_directory(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert "not a run directory" in capsys.readouterr().err


def test_a_closed_stdout_ends_quietly_with_141(capsys, monkeypatch):
    from zerda_eval import cli

    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(cli.COMMANDS, "datasets", closed)
    assert main(["datasets"]) == 141
    assert capsys.readouterr().err == ""


def test_our_warnings_are_one_line_each(capsys, monkeypatch):
    import warnings

    from zerda_eval import cli
    from zerda_eval.errors import ZerdaEvalWarning

    def warns(args):
        warnings.warn("cell 'bm25' (abc): per_query.csv is missing; recomputing it", ZerdaEvalWarning, stacklevel=1)
        warnings.warn("cell 'bm25' (abc): per_query.csv is missing; recomputing it", ZerdaEvalWarning, stacklevel=1)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "datasets", warns)
    assert main(["datasets"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == ["zerda-eval: warning: cell 'bm25' (abc): per_query.csv is missing; recomputing it"] * 2


def test_a_rebuilt_onnx_file_is_one_warning_line_not_pythons_warning_format(capsys, monkeypatch, tmp_path):
    """retrieval's own warnings (a damaged model file rebuilt) reach the CLI user as its one-line form too."""
    import onnx

    from retrieval.embeddings import onnx_export
    from zerda_eval import cli

    def identity() -> onnx.ModelProto:
        helper = onnx.helper
        x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])
        y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "tiny", [x], [y])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    monkeypatch.setenv("ZERDA_MODEL_CACHE", str(tmp_path))
    graph = onnx_export.OnnxGraph("tiny", "t1", identity)
    path = onnx_export.onnx_file(graph, "fp32")
    path.write_bytes(path.read_bytes()[:-8])  # damaged in place

    def rebuilds(args):
        onnx_export.onnx_file(graph, "fp32")
        return 0

    monkeypatch.setitem(cli.COMMANDS, "datasets", rebuilds)
    assert main(["datasets"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("zerda-eval: warning: tiny: rebuilding the ONNX file in "), err
    assert err[0].endswith(f"{path} does not match its SHA-256 in manifest.json")


def test_the_run_summary_says_not_measured_for_costs_and_a_dash_for_measures_a_dataset_lacks():
    import pandas as pd

    from zerda_eval.cli import _summary

    table = pd.DataFrame(
        [
            {
                "dataset": "q",
                "system": "ext",
                "ndcg@10": 0.5,
                "recall@100": float("nan"),
                "index_time_s": float("nan"),
                "latency_p50_ms": float("nan"),
                "qps": float("nan"),
            },
            {
                "dataset": "q",
                "system": "bm25",
                "ndcg@10": 0.25,
                "recall@100": 0.75,
                "index_time_s": 1.0,
                "latency_p50_ms": 2.0,
                "qps": 3.0,
            },
        ]
    )
    lines = _summary(table, ["ndcg@10", "recall@100"]).splitlines()
    assert lines[1].split()[:4] == ["q", "ext", "0.5000", "-"] and lines[1].count("not measured") == 3
    assert lines[2].split() == ["q", "bm25", "0.2500", "0.7500", "1.0000", "2.0000", "3.0000"]


def test_datasets_prints_its_table_and_no_progress_bars(tmp_path):
    # a fresh ir_datasets home: every docstore is built on the way, which draws tqdm bars unless silenced
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "ir_datasets"), "PYTHONPATH": str(root)}
    env.pop("TQDM_DISABLE", None)
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "datasets"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.split()[:3] == ["name", "language", "docs"] and "beir/scifact/test" in done.stdout


def test_systems_lists_a_long_value_list_once(capsys):
    from zerda_eval.api import describe_systems

    assert main(["systems"]) == 0
    out = capsys.readouterr().out
    families = set(describe_systems().query("parameter == 'stemmer'")["name"])
    assert len(families) > 3  # the stemmer list is shared by many families...
    assert out.count("'yiddish'") == 1  # ...and printed once
    stemmer_lines = [line for line in out.splitlines() if line.strip().startswith("stemmer = ")]
    assert len(stemmer_lines) == len(families) and all("'yiddish'" not in line for line in stemmer_lines)


@pytest.mark.parametrize("argv", [["-v", "run", "x.toml"], ["run", "x.toml", "-v"], ["run", "-v", "x.toml"]])
def test_verbose_is_accepted_before_or_after_the_subcommand(argv):
    from zerda_eval.cli import build_parser

    assert build_parser().parse_args(argv).verbose is True
    assert build_parser().parse_args(["run", "x.toml"]).verbose is False


def _toy_experiment(tmp_path):
    from tests.conftest import experiment_header, trec_dataset, write_trec_folder

    docs = {f"d{i}": f"document {i} about topic {i % 3}" for i in range(1, 9)}
    data = write_trec_folder(tmp_path / "toy", docs, {f"q{i}": f"topic {i}" for i in range(3)}, [("q1", "d4", 1)])
    path = tmp_path / "toy.toml"
    path.write_text(
        experiment_header(tmp_path, "toy", '["ndcg@10", "precision@5", "Judged@10"]')
        + trec_dataset("toy", data)
        + '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\ngrid = { k1 = [0.9, 1.2] }\n'
        + '[[fusions]]\nname = "rrf"\ninputs = ["bm25[k1=0.9]", "bm25[k1=1.2]"]\nmethod = "rrf"\n',
        encoding="utf-8",
    )
    return path


def test_a_rerun_says_its_cells_were_reused_and_only_says_the_report_was_not_rewritten(tmp_path, capsys, monkeypatch):
    import pandas as pd

    from zerda_eval import Experiment

    monkeypatch.chdir(tmp_path)
    path = _toy_experiment(tmp_path)
    cells = len(Experiment.from_toml(path).cells)
    assert main(["run", str(path)]) == 0
    assert f"0 cells reused, {cells} computed" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{cells} cells reused, 0 computed" in out and "report: reports/toy" in out
    assert main(["run", str(path), "--only", "bm25[k1=0.9]"]) == 0
    out = capsys.readouterr().out
    run_dir = Experiment.from_toml(path).output_dir
    assert f"report: not rewritten (--only runs part of the grid); write it with `zerda-eval report {run_dir}`" in out
    # every measure of the experiment is a column of the printed table
    columns = list(pd.read_csv(run_dir / "results.csv").columns)
    measures = columns[columns.index("cell_id") + 1 : columns.index("cell_id") + 4]
    assert out.splitlines()[0].split() == ["dataset", "system", *measures, "index_time_s", "latency_p50_ms", "qps"]
    assert len({m.lower() for m in measures} & {"ndcg@10", "p@5", "precision@5", "judged@10"}) == 3


def test_measures_chooses_the_printed_columns_and_names_an_unknown_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _toy_experiment(tmp_path)
    assert main(["run", str(path), "--no-report", "--measures", "ndcg@10"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["dataset", "system", "ndcg@10", "index_time_s", "latency_p50_ms", "qps"]
    assert "report: not written (--no-report)" in out
    assert main(["run", str(path), "--no-report", "--measures", "ndcg@11"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ndcg@11" in err and "did you mean 'ndcg@10'" in err


def test_datasets_columns_are_apart_and_text_left_aligned():
    import pandas as pd

    from zerda_eval.cli import aligned

    columns = {"name": ["a", "bbb"], "docs": [1400, 5], "source": ["x, y files", "z"], "licence": ["l m", "n"]}
    table = pd.DataFrame(columns)
    assert aligned(table).splitlines() == [
        "name   docs  source      licence",
        "a     1,400  x, y files  l m",
        "bbb       5  z           n",
    ]


def test_a_run_on_a_fresh_ir_datasets_home_shows_no_library_progress_bar(tmp_path):
    # ir_datasets builds cranfield's docstore on its first use and draws a tqdm bar for it unless silenced
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "bars.toml"
    config.write_text(
        '[experiment]\nname = "bars"\nmeasures = ["ndcg@10"]\n[[datasets]]\nid = "cranfield"\nmax_queries = 5\n'
        '[[systems]]\nname = "bm25"\nfamily = "zerda.keyword"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "ir_datasets"), "PYTHONPATH": str(root)}
    env.pop("TQDM_DISABLE", None)
    done = subprocess.run(
        [sys.executable, "-m", "zerda_eval", "run", str(config), "--no-report"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "it/s" not in done.stderr and "%|" not in done.stderr, done.stderr
    assert "0 cells reused, 1 computed" in done.stdout
