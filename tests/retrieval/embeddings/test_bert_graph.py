"""bert_graph: the ONNX BERT written from numpy weights against Hugging Face's BertModel (torch) on the same weights,
and its safetensors reader against the safetensors library."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embeddings.bert_graph import BertShape, build_graph, from_hf_bert, read_safetensors
from retrieval.embeddings.onnx_sessions import SessionPool


@pytest.fixture(scope="module")
def tiny_bert():
    """A randomly initialised 2-layer BERT (hidden 32, 4 heads) in Hugging Face's own implementation."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
        attn_implementation="eager",
    )
    return transformers.BertModel(config, add_pooling_layer=False).eval(), config


def hf_mean(model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling of the torch model's last hidden states."""
    import torch

    with torch.inference_mode():
        hidden = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state
    weights = mask[:, :, None].astype(np.float32)
    return (hidden.numpy() * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


def test_graph_from_the_weights_computes_what_hugging_faces_bert_does(tiny_bert, tmp_path):
    import onnx

    model, config = tiny_bert
    state = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
    shape = BertShape(config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.layer_norm_eps)
    path = tmp_path / "bert.onnx"
    onnx.save(build_graph(from_hf_bert(state, shape.layers), shape, embed_ids=True), str(path))
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 50, size=(3, 17)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0  # padded rows: their pad tokens are neither attended to nor pooled
    mask[2, 1:] = 0
    ids[mask == 0] = 0
    ours = SessionPool(path, "f32").run({"input_ids": ids, "attention_mask": mask})[0]
    np.testing.assert_allclose(ours, hf_mean(model, ids, mask), rtol=0, atol=2e-5)
    for row in (1, 2):  # a padded row equals the same text alone, unpadded
        length = int(mask[row].sum())
        alone = hf_mean(model, ids[row : row + 1, :length], mask[row : row + 1, :length])
        np.testing.assert_allclose(ours[row : row + 1], alone, rtol=0, atol=2e-5)


def test_the_word_vector_graph_equals_the_id_graph_given_the_gathered_rows(tiny_bert, tmp_path):
    """e5's form (the word table outside the file) computes what the id form computes."""
    import onnx

    model, config = tiny_bert
    tensors = from_hf_bert({name: t.numpy() for name, t in model.state_dict().items()}, config.num_hidden_layers)
    shape = BertShape(config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.layer_norm_eps)
    onnx.save(build_graph(tensors, shape, embed_ids=False), str(tmp_path / "vectors.onnx"))
    ids = np.array([[2, 7, 9, 4, 0], [3, 5, 0, 0, 0]], dtype=np.int64)
    mask = (ids > 0).astype(np.float32)
    feed = {"word_vectors": tensors["emb.word"][ids], "mask": mask}
    ours = SessionPool(tmp_path / "vectors.onnx", "f32").run(feed)[0]
    np.testing.assert_allclose(ours, hf_mean(model, ids, mask.astype(np.int64)), rtol=0, atol=2e-5)


def test_a_file_that_is_not_safetensors_is_one_line(tmp_path):
    from retrieval.embeddings import EmbedderUnavailable

    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    with pytest.raises(EmbedderUnavailable, match=r"model\.safetensors is not a readable safetensors file") as error:
        read_safetensors(bad)
    assert "\n" not in str(error.value)
