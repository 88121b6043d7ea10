"""Analysis options of the families: what text a system tokenizes or embeds, resolved in one place.

Every family that tokenizes (BM25 of both zerda engines, rank-bm25, LSA) or feeds text to an embedder
takes ``normalization`` (``None`` = the dataset's protocol option), and the ones that tokenize take
``stemmer`` and ``stopwords`` (``"none"`` or a name: TOML has no null, so ``stemmer = ["none",
"english"]`` is a grid axis). Text fed to an embedder is light-normalised when asked and lower-cased
with ``lowercase = true``; LSA, which tokenizes, also takes the stemmer and stopwords. Tokens always
come from ``retrieval.core.analyzer``, which wraps the seed tokenizer without changing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from retrieval.core.stopwords import STOPWORD_LISTS
from retrieval.core.tokenize import (
    NO_STEMMER,
    NO_STOPWORDS,
    NORMALIZATIONS,
    analyzer,
    normalize_arabic,
    stemmer_languages,
)
from zerda_eval.errors import ConfigError
from zerda_eval.systems.params import ParamSpec

NORMALIZATION = ParamSpec(
    None,
    "str",
    "Arabic light normalisation of the text tokenized or embedded; default: the dataset's option",
    choices=NORMALIZATIONS,
    optional=True,
)
ANALYZER_PARAMS = {
    "normalization": NORMALIZATION,
    "stemmer": ParamSpec(
        NO_STEMMER,
        "str",
        "PyStemmer (Snowball) language of the tokens, or 'none'",
        choices=(NO_STEMMER, *stemmer_languages()),
    ),
    "stopwords": ParamSpec(
        NO_STOPWORDS, "str", "stopword list removed from the tokens, or 'none'", choices=(NO_STOPWORDS, *STOPWORD_LISTS)
    ),
}
LOWERCASE = ParamSpec(False, "bool", "lower-case the text fed to the embedder (wordllama is case-sensitive)")
TOKEN_OPTIONS = ("stemmer", "stopwords")


@dataclass(frozen=True)
class Analysis:
    """The resolved analysis of one system over one collection (recorded in the cell's ``stats``)."""

    normalization: str = "none"
    stemmer: str = NO_STEMMER
    stopwords: str = NO_STOPWORDS
    lowercase: bool = False

    def analyzer(self) -> Callable[[str], list[str]]:
        """Text -> tokens for BM25 and LSA."""
        return analyzer(self.normalization, self.stemmer, self.stopwords)

    def embedder_text(self, text: str) -> str:
        """The text an embedder sees: light-normalised and lower-cased when asked."""
        if self.normalization == "light":
            text = normalize_arabic(text)
        return text.lower() if self.lowercase else text

    @property
    def changes_text(self) -> bool:
        return self.normalization != "none" or self.lowercase

    def describe(self) -> dict[str, Any]:
        return asdict(self)


NO_ANALYSIS = Analysis()  # the seed tokenizer, texts as they are


def resolve_analysis(params: dict[str, Any], collection: Any) -> Analysis:
    """The analysis ``params`` ask for on ``collection``; normalization falls back to the dataset's option."""
    normalization = params.get("normalization") or collection.options.get("normalization", "none")
    return Analysis(
        normalization=normalization,
        stemmer=params.get("stemmer") or NO_STEMMER,
        stopwords=params.get("stopwords") or NO_STOPWORDS,
        lowercase=bool(params.get("lowercase", False)),
    )


def check_token_options_reach_a_tokenizer(params: dict[str, Any], where: str) -> None:
    """A family whose only tokenizer is LSA's: stemmer / stopwords with another embedder would be ignored."""
    for name in TOKEN_OPTIONS:
        if params.get(name) not in (None, "none") and params.get("embedder") != "lsa":
            raise ConfigError(
                f'{where}.{name}: {params[name]!r} needs embedder = "lsa" (the only embedder of this family that '
                f"tokenizes; {params.get('embedder')!r} has its own tokenizer); remove {name} or use lsa"
            )
