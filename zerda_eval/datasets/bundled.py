"""The bundled datasets: id, language, folder in ``../shared/datasets``, source, licence, files read."""

from __future__ import annotations

from dataclasses import dataclass

QURAN_SPLITS = {"train": ("train",), "dev": ("dev",), "train+dev": ("train", "dev")}  # split -> files' parts


@dataclass(frozen=True)
class DatasetSpec:
    """What the ``zerda-eval datasets`` listing says about a bundled dataset, and the files it is read from."""

    id: str
    language: str
    folder: str
    source: str
    licence: str
    files: tuple[str, ...] = ()  # in ``folder``: what its content fingerprint hashes


def _quran_files(split: str) -> tuple[str, ...]:
    parts = QURAN_SPLITS[split]
    return (
        "QQA23_TaskA_QPC_v1.1.tsv",
        *(f"QQA23_TaskA_{part}.tsv" for part in parts),
        *(f"QQA23_TaskA_qrels_{part}.gold" for part in parts),
    )


_QURAN = ("ar", "quranqa23-taskA", "Qur'an QA 2023 task A (QPC v1.1), organisers' files", "CC BY-NC-ND 4.0")
_NPL = "research collection, no licence stated"
_SCIFACT = ("en", "beir-scifact", "BEIR SciFact (Wadden et al. 2020)", "CC BY-NC 2.0")
_SCIFACT_FILES = ("corpus.jsonl", "queries.jsonl")
BUNDLED: dict[str, DatasetSpec] = {
    spec.id: spec
    for spec in (
        DatasetSpec("beir/scifact/test", *_SCIFACT, files=(*_SCIFACT_FILES, "qrels/test.tsv")),
        DatasetSpec("beir/scifact/train", *_SCIFACT, files=(*_SCIFACT_FILES, "qrels/train.tsv")),
        DatasetSpec(
            "cranfield",
            "en",
            "cranfield",
            "Cranfield 1400 (Cleverdon), SMART files",
            _NPL,
            files=("cran.all.1400", "cran.qry", "cranqrel"),
        ),
        DatasetSpec(
            "vaswani",
            "en",
            "vaswani",
            "NPL / Vaswani (Glasgow), TREC-format files",
            _NPL,
            files=("doc-text.trec", "query-text.trec", "qrels"),
        ),
        *(DatasetSpec(f"quranqa23/taskA/{split}", *_QURAN, files=_quran_files(split)) for split in QURAN_SPLITS),
        DatasetSpec(
            "tydiqa-goldp/ar/dev",
            "ar",
            "tydiqa-goldp-ar",
            "TyDi QA GoldP dev, Arabic (SQuAD JSON)",
            "Apache-2.0",
            files=("tydiqa-goldp-dev-arabic.json",),
        ),
        DatasetSpec(
            "xquad/ar", "ar", "xquad-ar", "XQuAD, Arabic (SQuAD JSON)", "CC BY-SA 4.0", files=("xquad.ar.json",)
        ),
    )
}
