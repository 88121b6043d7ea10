"""The one tokenizer of the project, plus the harness's optional Arabic normalisation.

``tokenize`` is the zerda seed's reference tokenizer, exactly as documented:
``re.findall(r"[\\w\\u0600-\\u06FF]{2,}", text.lower())``. Every BM25 in ``retrieval`` uses it.
``analyzer`` builds variants for the harness's own systems (Arabic light normalisation, stopword
removal, stemming); it never changes ``tokenize`` itself.
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


NO_STEMMER = "none"
NO_STOPWORDS = "none"


def stemmer_languages() -> tuple[str, ...]:
    """Every PyStemmer (Snowball) language, e.g. ``"english"``, ``"arabic"``, ``"porter"``."""
    import Stemmer  # PyStemmer: small C extension, imported only when stemming is asked about

    return tuple(Stemmer.algorithms())


@cache
def _stemmer(language: str):
    import Stemmer

    return Stemmer.Stemmer(language)


@cache
def stopword_set(name: str) -> frozenset[str]:
    """The tokens the stopword list ``name`` removes: each word tokenized, plus its light-normalised form.

    Both spellings are kept so that "إلى" and "الى" go whether or not the text is normalised.
    """
    from retrieval.core.stopwords import stopword_list

    words = stopword_list(name)
    return frozenset(tokenize(" ".join(words))) | frozenset(tokenize(normalize_arabic(" ".join(words))))


def analyzer(
    normalization: str = "none", stemmer: str | None = None, stopwords: str | None = None
) -> Callable[[str], list[str]]:
    """Return a text -> tokens function wrapping the seed tokenizer (which itself never changes).

    Steps: optional Arabic light normalisation of the text, the seed ``tokenize``, removal of the
    named stopword list's tokens (``retrieval.core.stopwords``), then Snowball stemming. ``stemmer`` is
    a PyStemmer language (``stemmer_languages()``); ``None`` or ``"none"`` means no stemming, and
    likewise for ``stopwords`` (TOML has no null). ``analyzer()`` with no arguments is ``tokenize``.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {normalization!r}; use one of {', '.join(NORMALIZATIONS)}")
    stemmer = None if stemmer == NO_STEMMER else stemmer
    stopwords = None if stopwords == NO_STOPWORDS else stopwords
    if stemmer is not None and stemmer not in stemmer_languages():
        raise ValueError(f"unknown stemmer {stemmer!r}; use 'none' or a PyStemmer language such as 'english'")
    if normalization == "none" and stemmer is None and stopwords is None:
        return tokenize
    stem = _stemmer(stemmer).stemWords if stemmer else None
    stop = stopword_set(stopwords) if stopwords else None
    light = normalization == "light"

    def analyze(text: str) -> list[str]:
        tokens = tokenize(normalize_arabic(text) if light else text)
        if stop is not None:
            tokens = [token for token in tokens if token not in stop]
        return stem(tokens) if stem else tokens

    return analyze
