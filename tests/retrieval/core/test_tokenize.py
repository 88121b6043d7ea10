"""The seed tokenizer and the harness's analyzers, checked against hand-written expectations."""

import pytest

from retrieval.core import analyzer, normalize_arabic, tokenize


def test_tokenize_lowercases_and_keeps_runs_of_two_or_more_word_characters():
    assert tokenize("Hello, World! BM25 wins.") == ["hello", "world", "bm25", "wins"]


def test_tokenize_drops_one_character_tokens():
    assert tokenize("a b c I x ok") == ["ok"]
    assert tokenize("و في") == ["في"]  # the one-letter conjunction waw is dropped


def test_tokenize_keeps_digits_and_underscores_inside_tokens():
    assert tokenize("covid_19 in 2020, 7 cases, snake_case_name") == [
        "covid_19",
        "in",
        "2020",
        "cases",
        "snake_case_name",
    ]


def test_tokenize_splits_on_punctuation_and_hyphens():
    assert tokenize("state-of-the-art (e.g. x-ray)") == ["state", "of", "the", "art", "ray"]


def test_tokenize_arabic_words_digits_and_diacritics():
    # Arabic letters, Arabic-Indic digits and harakat (U+064B-U+0652 are in U+0600-U+06FF) stay in tokens.
    assert tokenize("ما هو الانحدار الخطي ١٢ كِتَابٌ") == ["ما", "هو", "الانحدار", "الخطي", "١٢", "كِتَابٌ"]


def test_tokenize_keeps_arabic_punctuation_glued_as_the_seed_regex_does():
    # Seed quirk: U+0600-U+06FF also holds Arabic punctuation (question mark U+061F, comma U+060C),
    # so "الخطي؟" stays one token, unlike "linear?" which loses its "?".
    assert tokenize("الانحدار الخطي؟ linear?") == ["الانحدار", "الخطي؟", "linear"]
    assert tokenize("كتاب، قلم") == ["كتاب،", "قلم"]


def test_tokenize_mixed_arabic_and_latin():
    assert tokenize("نموذج BERT للغة العربية") == ["نموذج", "bert", "للغة", "العربية"]


def test_normalize_arabic_light():
    assert normalize_arabic("أحمد إلى آمن ٱلله") == "احمد الي امن الله"  # alef forms; alef maksura -> yaa
    assert normalize_arabic("مدرسة") == "مدرسه"  # taa marbuta -> haa
    assert normalize_arabic("كِتَابٌ") == "كتاب"  # diacritics stripped
    assert normalize_arabic("كتـــاب") == "كتاب"  # tatweel stripped
    assert normalize_arabic("plain text") == "plain text"


def test_analyzer_default_is_the_seed_tokenizer():
    assert analyzer() is tokenize


def test_analyzer_light_normalisation_then_tokenize():
    analyze = analyzer("light")
    assert analyze("إلى المدرسةِ") == ["الي", "المدرسه"]
    assert analyze("Light AND ٱلنور") == ["light", "and", "النور"]


def test_analyzer_english_stemmer():
    assert analyzer(stemmer="english")("Running cats") == ["run", "cat"]


def test_analyzer_rejects_unknown_normalisation():
    with pytest.raises(ValueError, match="light"):
        analyzer("heavy")


def test_analyzer_none_strings_mean_off_and_keep_the_seed_tokenizer():
    assert analyzer("none", "none", "none") is tokenize  # TOML has no null: "none" is how a grid says "off"


def test_analyzer_removes_stopwords_before_stemming():
    # "the", "are", "in" are in scikit-learn's English list; "running" -> "run" only after removal
    assert analyzer(stopwords="english")("The cats are running in houses") == ["cats", "running", "houses"]
    assert analyzer(stemmer="english", stopwords="english")("The cats are running in houses") == ["cat", "run", "hous"]


def test_analyzer_arabic_stopwords_match_with_and_without_light_normalisation():
    text = "ذهب الولد إلى المدرسة في الصباح"
    assert analyzer(stopwords="arabic")(text) == ["ذهب", "الولد", "المدرسة", "الصباح"]
    assert analyzer("light", stopwords="arabic")(text) == ["ذهب", "الولد", "المدرسه", "الصباح"]  # "الي" removed too
    assert analyzer("light", "arabic", "arabic")(text) == ["ذهب", "ولد", "مدرسه", "صباح"]


def test_analyzer_takes_any_pystemmer_language_and_rejects_others():
    assert analyzer(stemmer="porter")("running") == ["run"]
    assert analyzer(stemmer="french")("chanteuses") == ["chanteux"]
    with pytest.raises(ValueError, match="unknown stemmer 'klingon'"):
        analyzer(stemmer="klingon")
    with pytest.raises(ValueError, match="unknown stopword list 'french'"):
        analyzer(stopwords="french")("text")
