"""The one tokenizer of the project, plus the harness's optional Arabic normalisation.

``tokenize`` is the zerda seed's reference tokenizer, exactly as documented:
``re.findall(r"[\\w\\u0600-\\u06FF]{2,}", text.lower())``. Every BM25 in ``retrieval`` uses it.
``analyzer`` builds variants for the harness's own systems (Arabic light normalisation,
stemming); it never changes ``tokenize`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

TOKEN_PATTERN = re.compile(r"[\w\u0600-\u06FF]{2,}")

_TATWEEL = "\u0640"
_ARABIC_DIACRITICS = re.compile(r"[\u0610-\u061A\u064B-\u065F\u0670\u06D6-\u06ED]")
# Arabic punctuation sits inside U+0600-U+06FF, so the seed pattern glues it to words ("الخطي؟").
_ARABIC_PUNCTUATION = re.compile(r"[\u060C\u060D\u061B\u061E\u061F\u066A-\u066D\u06D4]")
_ARABIC_LETTER_FORMS = str.maketrans(
    {
        "\u0622": "\u0627",  # alef with madda -> alef
        "\u0623": "\u0627",  # alef with hamza above -> alef
        "\u0625": "\u0627",  # alef with hamza below -> alef
        "\u0671": "\u0627",  # alef wasla -> alef
        "\u0649": "\u064a",  # alef maksura -> yaa
        "\u0629": "\u0647",  # taa marbuta -> haa
    }
)

NORMALIZATIONS = ("none", "light")


def tokenize(text: str) -> list[str]:
    """Lower-case ``text`` and return its word / Arabic runs of two or more characters (seed 000)."""
    return TOKEN_PATTERN.findall(text.lower())


def normalize_arabic(text: str) -> str:
    """Light Arabic normalisation: strip tatweel and diacritics, split off Arabic punctuation, and unify
    alef, yaa and taa-marbuta forms."""
    text = _ARABIC_DIACRITICS.sub("", text.replace(_TATWEEL, ""))
    text = _ARABIC_PUNCTUATION.sub(" ", text)
    return text.translate(_ARABIC_LETTER_FORMS)


@cache
def _stemmer(language: str):
    import Stemmer  # PyStemmer: optional, imported only when a stemmed analyzer is asked for

    return Stemmer.Stemmer(language)


def analyzer(normalization: str = "none", stemmer: str | None = None) -> Callable[[str], list[str]]:
    """Return a text -> tokens function: optional Arabic normalisation, the seed tokenizer, optional stemming.

    ``stemmer`` is a PyStemmer (Snowball) language name such as ``"english"`` or ``"arabic"``.
    ``analyzer()`` with no arguments is ``tokenize`` itself.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {normalization!r}; use one of {', '.join(NORMALIZATIONS)}")
    if normalization == "none" and stemmer is None:
        return tokenize
    stem = _stemmer(stemmer).stemWords if stemmer else None

    def analyze(text: str) -> list[str]:
        if normalization == "light":
            text = normalize_arabic(text)
        tokens = tokenize(text)
        return stem(tokens) if stem else tokens

    return analyze
