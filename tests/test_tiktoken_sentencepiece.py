"""tiktoken stands in for `tokenizers` on SentencePiece-style BPE (spaces as `▁`, byte
fallback) only where the file proves they agree: a small hand-made tokenizer of that shape
is taken, and each way of departing from it (a missing byte token, an entry joining a
character and `▁`, an entry BPE cannot make, merges of one entry apart, a whole-word lookup,
another pre-tokenizer or normalizer) keeps `tokenizers`. On the real tokenizers, generated text made of
the characters where merges overlap (runs of `-`, `.`, spaces ...) encodes the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.tokenize import LoadedTokenizer, load_tokenizer
from tests.tokenizer_fixtures import tokenizer_file

M = "\u2581"
CHARS = [M, "a", "b", "c", "d", "é", "x"]
MADE = [("a", "b"), ("ab", "c"), (M, "ab"), (M, "abc"), ("c", "d"), ("é", "x")]
"""The merges of the small tokenizer, in rank order: each entry's parts come first."""


def small_sentencepiece() -> dict:
    """A Llama-2-shaped tokenizer.json: `<unk> <s> </s>`, the 256 byte tokens, a few
    characters (é is two bytes), and the entries MADE makes."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab |= {f"<0x{byte:02X}>": 3 + byte for byte in range(256)}
    for token in [*CHARS, *("".join(pair) for pair in MADE)]:
        vocab.setdefault(token, len(vocab))
    added = [
        {"id": n, "content": t, "single_word": False, "lstrip": False, "rstrip": False}
        | {"normalized": False, "special": True}
        for t, n in list(vocab.items())[:3]
    ]
    normalizer = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": M},
            {"type": "Replace", "pattern": {"String": " "}, "content": M},
        ],
    }
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True}
    model |= {"continuing_subword_prefix": None, "end_of_word_suffix": None}
    model |= {"byte_fallback": True, "vocab": vocab, "merges": [list(pair) for pair in MADE]}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": model,
    }


TEXTS = [
    "abc abcd  ab c",
    "éx é x ééx",
    "x中文 🙂 a\nb\tc",
    "   ",
    "",
    "<s> </s> <0x41>",
    "abababab cdcd",
]


def _load(tmp_path: Path, data: dict) -> LoadedTokenizer:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    return load_tokenizer(path)


def _with_model(data: dict, **changes: object) -> dict:
    return {**data, "model": {**data["model"], **changes}}


def test_the_small_sentencepiece_tokenizer_is_encoded_by_tiktoken_with_the_same_ids(tmp_path):
    fast = _load(tmp_path, small_sentencepiece())
    slow = load_tokenizer(tmp_path / "tokenizer.json", allow_tiktoken=False)
    assert (fast.text_encoder.name, slow.text_encoder.name) == ("tiktoken", "tokenizers")
    assert fast.text_encoder.encode_ids(TEXTS) == slow.text_encoder.encode_ids(TEXTS)
    _assert_flat_equal(fast, slow, TEXTS)
    # characters outside the vocabulary are their bytes, as `tokenizers` gives them
    assert fast.text_encoder.encode_ids(["中"])[0][1:] == [3 + b for b in "中".encode()]


def _without_a_byte_token(data: dict) -> dict:
    vocab = {t: n for t, n in data["model"]["vocab"].items() if t != "<0x41>"}
    return _with_model(data, vocab=vocab)


def _joining_a_character_and_metaspace(data: dict) -> dict:
    vocab = {**data["model"]["vocab"], f"c{M}": len(data["model"]["vocab"])}
    return _with_model(data, vocab=vocab, merges=[*data["model"]["merges"], ["c", M]])


def _an_entry_bpe_cannot_make(data: dict) -> dict:
    # `b c` ranked first: "abc" merges to [a][bc], and no merge joins those
    vocab = {**data["model"]["vocab"], "bc": len(data["model"]["vocab"])}
    return _with_model(data, vocab=vocab, merges=[["b", "c"], *data["model"]["merges"]])


def _merges_of_one_entry_apart(data: dict) -> dict:
    vocab = {**data["model"]["vocab"], "bc": len(data["model"]["vocab"])}
    merges = data["model"]["merges"]
    return _with_model(
        data, vocab=vocab, merges=[*merges[:2], ["b", "c"], *merges[2:], ["a", "bc"]]
    )


def _whole_word_lookup(data: dict) -> dict:
    return _with_model(data, ignore_merges=True)


def _splitting_at_every_metaspace(data: dict) -> dict:
    pre = {"type": "Split", "pattern": {"String": M}, "behavior": "MergedWithNext"}
    return {**data, "pre_tokenizer": pre | {"invert": False}}


def _nfkc_first(data: dict) -> dict:
    steps = data["normalizer"]["normalizers"]
    return {**data, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, *steps]}}


@pytest.mark.parametrize(
    "change",
    [
        _without_a_byte_token,
        _joining_a_character_and_metaspace,
        _an_entry_bpe_cannot_make,
        _merges_of_one_entry_apart,
        _whole_word_lookup,
        _splitting_at_every_metaspace,
        _nfkc_first,
    ],
)
def test_a_tokenizer_that_departs_keeps_tokenizers(tmp_path, change):
    assert _load(tmp_path, change(small_sentencepiece())).text_encoder.name == "tokenizers"


# ------------------------------------------------------------------ real tokenizers

OVERLAPPING = "-.=*_/)}'!xwfIX" + " \n\t" + M + "éü中🙂"
"""Characters whose runs have merges that overlap (`--` `-` and `-` `--` both make `---`),
where the two libraries' order of merges could part; and a few outside the vocabularies."""


@pytest.fixture(
    scope="module", params=["sentencepiece-phi3", "sentencepiece-llama2", "bytelevel-llama3"]
)
def real_pair(request) -> tuple[LoadedTokenizer, LoadedTokenizer]:
    """A family's tokenizer (the real one when ../shared is present, else the small one of
    its shape), loaded with tiktoken and with `tokenizers`."""
    path = tokenizer_file(request.param)
    fast, slow = load_tokenizer(path), load_tokenizer(path, allow_tiktoken=False)
    assert (fast.text_encoder.name, slow.text_encoder.name) == ("tiktoken", "tokenizers")
    return fast, slow


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.text(alphabet=OVERLAPPING + "ab", min_size=1, max_size=60), max_size=20))
def test_runs_where_merges_overlap_encode_the_same(real_pair, texts):
    fast, slow = real_pair
    assert fast.text_encoder.encode_ids(texts) == slow.text_encoder.encode_ids(texts)
    _assert_flat_equal(fast, slow, texts)


FRAGMENTS = ["a", " ", "  ", "\n", "é", "中文", "🙂", "👍🏽", "ab", "-", "<s>", "\t", "x"]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_batch_encoded_end_to_end_is_each_text_encoded(real_pair, data):
    """`encode_flat` (one gather for the batch: unmerged bytes expanded, ordinary added
    tokens mapped) gives each text's ids in order, as `tokenizers` does."""
    fast, slow = real_pair
    fragments = FRAGMENTS + sorted(getattr(fast.text_encoder, "_ordinary", {}))
    texts = data.draw(st.lists(st.lists(st.sampled_from(fragments), max_size=12), max_size=16))
    _assert_flat_equal(fast, slow, ["".join(parts) for parts in texts])


def _assert_flat_equal(fast: LoadedTokenizer, slow: LoadedTokenizer, texts: list[str]) -> None:
    """Both encoders' `encode_flat` are `tokenizers`' ids of each text, end to end."""
    expected = slow.text_encoder.encode_ids(texts)
    for encoder in (fast.text_encoder, slow.text_encoder):
        flat, lengths = encoder.encode_flat(texts)
        assert lengths.tolist() == [len(ids) for ids in expected]
        assert flat.tolist() == [number for ids in expected for number in ids]


def test_an_ordinary_added_token_is_cut_out_of_a_batch_encoded_end_to_end(tmp_path):
    """A non-special added token inside content is its own id, the text around it encoded
    apart (each piece with its own `▁`), as `tokenizers` does."""
    data = small_sentencepiece()
    number = len(data["model"]["vocab"])
    data["added_tokens"].append(
        {"id": number, "content": "<tool>", "single_word": False, "lstrip": False}
        | {"rstrip": False, "normalized": False, "special": False}
    )
    fast = _load(tmp_path, data)
    slow = load_tokenizer(tmp_path / "tokenizer.json", allow_tiktoken=False)
    assert fast.text_encoder.name == "tiktoken"
    texts = ["ab<tool>cd", "<tool>", "x <tool> é<tool><tool>中", *TEXTS]
    assert number in fast.text_encoder.encode_flat(texts)[0].tolist()
    _assert_flat_equal(fast, slow, texts)
