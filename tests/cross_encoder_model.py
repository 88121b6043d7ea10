"""A tiny sentence-transformers cross-encoder written to a folder: what the rerank tests load.

A 2-layer BERT (hidden size 32) with a one-label classification head, random weights from a fixed seed,
and a hand-written WordPiece vocabulary, saved with ``save_pretrained``: the folder layout a real
``CrossEncoder`` folder has, small enough to build in a second. Its scores mean nothing; the tests pin
the harness's scores and order to ``CrossEncoder.predict`` on the same pairs.
"""

from __future__ import annotations

from pathlib import Path

VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "of",
    "and",
    "in",
    "on",
    "to",
    "is",
    "cat",
    "sat",
    "mat",
    "dog",
    "ran",
    "lava",
    "volcano",
    "magma",
    "erupt",
    "##s",
    "##ed",
    "bee",
    "honey",
    "flower",
    "hive",
    "jet",
    "engine",
    "fuel",
    "plane",
    "bread",
    "flour",
    "oven",
    "water",
    "sun",
    "plant",
]


def write_tiny_cross_encoder(folder: Path, seed: int = 7, labels: int = 1) -> Path:
    """Save the tiny cross-encoder (model, config and tokenizer files) to ``folder``; return it. ``labels``: its
    head's outputs (a cross-encoder has one; two make it a pair classifier)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(VOCABULARY),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=labels,
        initializer_range=0.5,  # spread the random scores, so rankings differ from the input order
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return folder
