"""The default ``Tokenizer``: counts the project tokenizer's tokens (``retrieval.core.tokenize``)."""

from __future__ import annotations

from retrieval.core import tokenize


class RegexTokenCounter:
    """Token count = number of ``retrieval.core.tokenize`` tokens (word runs of 2+ characters).

    An approximation of a model tokenizer's count, dependency-free and deterministic.
    """

    def count_tokens(self, text: str) -> int:
        return len(tokenize(text))
