"""RM3 pseudo-relevance feedback (Lavrenko and Croft's relevance model RM1, interpolated with the query).

As Anserini's ``Rm3Reranker`` computes it, with its parameter names (``fb_docs``, ``fb_terms``,
``original_query_weight``):

1. First pass: BM25 top ``fb_docs`` documents; those scoring 0 share no query term and are left out.
2. ``P(q|d)`` = the document's first-pass score divided by the sum of the feedback documents' scores
   (Anserini's normalisation: the scores as they are, summing to 1; no ``exp``, because BM25 scores are
   not log-likelihoods, and scaling keeps their ratios). ``P(t|d)`` = ``tf(t, d) / |d|``, counted on the
   document's tokens from the same analyzer as the index (``|d|`` = its token count).
3. RM1: ``P(t|R) = sum over d of P(t|d) * P(q|d)``; keep the ``fb_terms`` heaviest terms (ties by term,
   ascending) and divide them by their sum.
4. RM3: ``w(t) = original_query_weight * c(t, q) / |q| + (1 - original_query_weight) * P(t|R)``, the query
   side being the query's term counts divided by its length (a repeated word weighs more).
5. Second pass: BM25 with WEIGHTED terms, ``score(d) = sum over t of w(t) * bm25(t, d)``.

Anserini also drops expansion terms that are long or hold non-letters; this module keeps every term the
analyzer gives, so an analyzer's choice (stopwords, stemming) is the only filter. Pure: no index type is
named here; the engines pass their first pass, document terms and weighted pass as functions.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

DEFAULT_FB_DOCS = 10
DEFAULT_FB_TERMS = 10
DEFAULT_ORIGINAL_QUERY_WEIGHT = 0.5

Hits = list[tuple[int, float]]  # (document index, score), best first


@dataclass(frozen=True)
class RM3:
    """RM3's three parameters (Anserini's ``-rm3.fbDocs``, ``-rm3.fbTerms``, ``-rm3.originalQueryWeight``)."""

    fb_docs: int = DEFAULT_FB_DOCS
    fb_terms: int = DEFAULT_FB_TERMS
    original_query_weight: float = DEFAULT_ORIGINAL_QUERY_WEIGHT

    def __post_init__(self) -> None:
        if not (isinstance(self.fb_docs, int) and self.fb_docs >= 1):
            raise ValueError(f"RM3 fb_docs must be an integer >= 1, got {self.fb_docs!r}")
        if not (isinstance(self.fb_terms, int) and self.fb_terms >= 1):
            raise ValueError(f"RM3 fb_terms must be an integer >= 1, got {self.fb_terms!r}")
        if not 0.0 <= self.original_query_weight <= 1.0:
            raise ValueError(f"RM3 original_query_weight must be in [0, 1], got {self.original_query_weight!r}")


def relevance_model(feedback: Sequence[tuple[Mapping[str, int], float]], fb_terms: int) -> dict[str, float]:
    """RM1 over ``(term counts, first-pass score)`` pairs: the ``fb_terms`` heaviest ``P(t|R)``, summing to 1.

    Documents with a score <= 0 or no tokens contribute nothing; no usable document gives ``{}``.
    """
    used = [(counts, sum(counts.values()), score) for counts, score in feedback if score > 0]
    used = [(counts, length, score) for counts, length, score in used if length > 0]
    total_score = sum(score for _, _, score in used)
    weights: dict[str, float] = {}
    for counts, length, score in used:
        p_query = score / total_score
        for term, tf in counts.items():
            weights[term] = weights.get(term, 0.0) + tf / length * p_query
    kept = heapq.nsmallest(fb_terms, weights.items(), key=lambda item: (-item[1], item[0]))
    kept_total = sum(weight for _, weight in kept)
    return {term: weight / kept_total for term, weight in kept} if kept_total > 0 else {}


def expanded_query(
    query_tokens: Sequence[str], feedback: Sequence[tuple[Mapping[str, int], float]], rm3: RM3
) -> dict[str, float]:
    """RM3's weighted query: the query's normalised term counts interpolated with RM1 (zero weights dropped).

    Terms come in the query's order, then the expansion's (heaviest first): the order the second pass sums in.
    """
    if not query_tokens:
        return {}
    alpha = rm3.original_query_weight
    counts = Counter(query_tokens)
    weights = {term: alpha * count / len(query_tokens) for term, count in counts.items()}
    for term, weight in relevance_model(feedback, rm3.fb_terms).items():
        weights[term] = weights.get(term, 0.0) + (1.0 - alpha) * weight
    return {term: weight for term, weight in weights.items() if weight > 0}


def rm3_top_k(
    query_tokens: Sequence[str],
    k: int,
    rm3: RM3,
    first_pass: Callable[[Sequence[str], int], Hits],
    document_terms: Callable[[int], Mapping[str, int]],
    weighted_top_k: Callable[[Mapping[str, float], int], Hits],
) -> Hits:
    """RM3 retrieval: ``first_pass`` top ``fb_docs``, their ``document_terms``, then ``weighted_top_k`` of the
    expanded query (an engine's three operations; results as its ``top_k``: best first, ties by lower index)."""
    hits = first_pass(query_tokens, rm3.fb_docs)
    feedback = [(document_terms(doc_index), score) for doc_index, score in hits if score > 0]
    return weighted_top_k(expanded_query(query_tokens, feedback, rm3), k)
