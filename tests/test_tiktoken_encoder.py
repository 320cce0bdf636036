"""tiktoken stands in for `tokenizers` only where it gives the very same ids: on the
Llama-3, Qwen2.5, torchtune and Phi-3 families (the real tokenizers when ../shared is
present, else the small ones of their shapes trained for the tests: every Unicode code
point, conversations, literal special-token text, Qwen's ordinary added tokens), and never
on a tokenizer.json that departs from what tiktoken does (other pre-tokenizers, merges that
skip a split or break the rank order, whole-word lookup off, stripping added tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.jobs.read import read
from pipeline.mms import Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import LoadedTokenizer, Renderer, TokenizerLoadError, load_tokenizer
from tests.conftest import REPO, SHARED
from tests.tokenizer_fixtures import repo_threads, shared_present, tokenizer_file

FAST = (
    "bytelevel-llama3",
    "bytelevel-qwen2",
    "bytelevel-plain",
    "sentencepiece-phi3",
    "sentencepiece-llama2",
)
"""The families tiktoken reproduces: byte-level BPE converted from tiktoken, and
SentencePiece-style BPE of Llama-2's shape (Phi-3's vocabulary and merges are Llama-2's)."""
OTHERS = ("bytelevel-cropped", "sentencepiece-gemma-cropped")
TRICKY = [
    "<|eot_id|>",
    "a<|eot_id|>b<|begin_of_text|>",
    "<|im_start|>user\nhi<|im_end|>",
    "<tool_call>{}</tool_call>",
    "<<tool_call>> <tool_call</tool_call>",
    "e\u0301<tool_call>\u0301 and cafe\u0301",
    "'\u017f '\u212a 'S 'LL 'Ve",  # long s and the Kelvin sign fold to s and k
    "line\r\n\r\n  \n\t x  ",
    "١٢٣٤ 12345 ௧௨",
    "<|role|>assistant<|content|>",
    "🙂🙂 👩‍💻 \U0001f9d1\U0001f3fd",
    "",
    " ",
]


@pytest.fixture(scope="module", params=FAST)
def pair(request) -> tuple[LoadedTokenizer, LoadedTokenizer]:
    """One family's tokenizer loaded twice: encoded by tiktoken, and by `tokenizers`."""
    path = tokenizer_file(request.param)
    return load_tokenizer(path), load_tokenizer(path, allow_tiktoken=False)


@pytest.fixture(scope="module")
def real_threads() -> list[Thread]:
    """Every thread of ../shared/realdata, and of the formats folder; without ../shared,
    the repository's data_samples and remarkable threads."""
    if not shared_present():
        return repo_threads()
    folders = [str(SHARED / "realdata"), str(SHARED / "formats")]
    return list(read(folders, on_reject=lambda rejection: None))


MINIMUM_THREADS = 1000 if shared_present() else 200
"""How many threads real_threads holds at least (../shared's real files, or the repo's)."""


@pytest.mark.parametrize("family", FAST)
def test_the_tiktoken_families_are_encoded_by_tiktoken(family):
    loaded = load_tokenizer(tokenizer_file(family))
    assert loaded.text_encoder.name == "tiktoken"
    slow = load_tokenizer(tokenizer_file(family), allow_tiktoken=False)
    assert slow.text_encoder.name == "tokenizers"


@pytest.mark.parametrize("family", OTHERS)
def test_other_tokenizers_keep_tokenizers(family):
    assert load_tokenizer(tokenizer_file(family)).text_encoder.name == "tokenizers"


def test_every_code_point_splits_and_encodes_the_same(pair):
    """Each code point of the Basic Multilingual Plane, and every 7th beyond it, between
    letters, digits, quotes, spaces and line breaks: the regex engines of tiktoken and
    `tokenizers` must agree on every Unicode class and case fold."""
    fast, slow = pair
    points = [*range(0xD800), *range(0xE000, 0x10000), *range(0x10000, 0x110000, 7)]
    texts = [
        "".join(f"a{c}b{c}{c} 1{c}2 '{c}x\n{c}  {c}3\r\n" for c in map(chr, points[i : i + 16]))
        for i in range(0, len(points), 16)
    ]
    assert fast.text_encoder.encode_ids(texts) == slow.text_encoder.encode_ids(texts)


def test_tricky_text_encodes_the_same(pair):
    fast, slow = pair
    assert fast.text_encoder.encode_ids(TRICKY) == slow.text_encoder.encode_ids(TRICKY)


def test_special_token_text_stays_text_and_ordinary_added_tokens_match(pair):
    fast, _ = pair
    eot = fast.text_encoder.token_to_id("<|endoftext|>") or fast.text_encoder.token_to_id(
        "<|eot_id|>"
    )
    for text in ("<|endoftext|>", "<|eot_id|>"):
        assert eot not in fast.text_encoder.encode_ids([text])[0]
    tool_call = fast.text_encoder.token_to_id("<tool_call>")
    if tool_call is not None:  # Qwen: an added token that is not special
        assert fast.text_encoder.encode_ids(["x<tool_call>y"])[0].count(tool_call) == 1


def test_real_threads_render_the_same_ids_and_labels(pair, real_threads):
    fast, slow = pair
    ours, theirs = (
        Renderer(fast).encode_batch(real_threads),
        Renderer(slow).encode_batch(real_threads),
    )
    assert len(ours) == len(real_threads) > MINIMUM_THREADS
    assert ours.input_ids.equals(theirs.input_ids)
    assert ours.labels.equals(theirs.labels)
    assert ours.message_ends.equals(theirs.message_ends)


def test_both_encoders_give_the_mms_tokens_and_bos_the_same_ids(pair):
    fast, slow = pair
    assert Renderer(fast).special_ids == Renderer(slow).special_ids
    assert _bos_outcome(fast) == _bos_outcome(slow)


def _bos_outcome(loaded: LoadedTokenizer) -> int | str | None:
    """The BOS id a renderer asked for one gets, or why it refuses."""
    try:
        return Renderer(loaded, bos=True).bos_id
    except ValueError as err:
        return str(err)


# ------------------------------------------------------------------ what keeps tokenizers

SMALL = 3000
"""Entries of the small tiktoken-style vocabulary: Llama-3's lowest ranks, whose parts all
rank lower (BPE made them in that order); all of the small Llama-3-shaped tokenizer's
(tests/data/tokenizers/bytelevel-llama3, fewer) without ../shared."""


@pytest.fixture(scope="module")
def small_tokenizer() -> dict:
    """A tokenizer.json as converted from tiktoken, on Llama-3's first SMALL ranks: every
    split of an entry into two entries is a merge, in the order of the entries made; merges
    making the same entry are listed longest left part first, the reverse of the usual."""
    data = orjson.loads(tokenizer_file("bytelevel-llama3").read_bytes())
    vocab = {token: n for token, n in data["model"]["vocab"].items() if n < SMALL}
    merges = [
        [token[:cut], token[cut:]]
        for token, _ in sorted(vocab.items(), key=lambda item: item[1])
        for cut in range(len(token) - 1, 0, -1)
        if token[:cut] in vocab and token[cut:] in vocab
    ]
    data["model"] = {**data["model"], "vocab": vocab, "merges": merges}
    data["added_tokens"] = [
        {**added, "id": SMALL + n} for n, added in enumerate(data["added_tokens"][:4])
    ]
    data["post_processor"] = None
    return data


def _load(tmp_path: Path, data: dict, name: str = "tokenizer.json") -> LoadedTokenizer:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return load_tokenizer(path)


def _real_texts(real_threads: list[Thread]) -> list[str]:
    return [m.content for t in real_threads[:1500] for m in t.messages] + TRICKY


def test_a_tokenizer_as_converted_from_tiktoken_is_encoded_by_it(
    small_tokenizer, real_threads, tmp_path
):
    loaded = _load(tmp_path, small_tokenizer)
    assert loaded.text_encoder.name == "tiktoken"
    texts = _real_texts(real_threads)
    slow = load_tokenizer(tmp_path / "tokenizer.json", allow_tiktoken=False)
    assert loaded.text_encoder.encode_ids(texts) == slow.text_encoder.encode_ids(texts)


def _without_a_split(data: dict) -> dict:
    merges = data["model"]["merges"]
    return {**data, "model": {**data["model"], "merges": merges[:100] + merges[101:]}}


def _out_of_rank_order(data: dict) -> dict:
    merges = list(data["model"]["merges"])
    merges[0], merges[-1] = merges[-1], merges[0]
    return {**data, "model": {**data["model"], "merges": merges}}


def _merging_into_whole_words(data: dict) -> dict:
    return {**data, "model": {**data["model"], "ignore_merges": False}}


def _other_pattern(data: dict) -> dict:
    split, byte_level = data["pre_tokenizer"]["pretokenizers"]
    other = {**split, "pattern": {"Regex": split["pattern"]["Regex"].replace("{1,3}", "{1,4}")}}
    return {
        **data,
        "pre_tokenizer": {**data["pre_tokenizer"], "pretokenizers": [other, byte_level]},
    }


def _stripping_added_token(data: dict) -> dict:
    added = {"id": SMALL + 10, "content": "<x>", "single_word": False, "lstrip": True}
    added |= {"rstrip": False, "normalized": False, "special": False}
    return {**data, "added_tokens": [*data["added_tokens"], added]}


def _nfkc(data: dict) -> dict:
    return {**data, "normalizer": {"type": "NFKC"}}


@pytest.mark.parametrize(
    "change",
    [
        _without_a_split,
        _out_of_rank_order,
        _merging_into_whole_words,
        _other_pattern,
        _stripping_added_token,
        _nfkc,
    ],
)
def test_a_tokenizer_that_departs_from_tiktoken_keeps_tokenizers(
    small_tokenizer, real_threads, tmp_path, change
):
    changed = change(small_tokenizer)
    loaded = _load(tmp_path, changed)
    assert loaded.text_encoder.name == "tokenizers"


def test_a_file_tokenizers_refuses_fails_when_the_tokenizer_is_written(small_tokenizer, tmp_path):
    """tiktoken never parses the file; the augmented tokenizer is parsed once, when written,
    so a dataset never ships a tokenizer its trainer cannot load."""
    loaded = _load(tmp_path, {**small_tokenizer, "decoder": {"type": "NoSuchDecoder"}})
    assert loaded.text_encoder.name == "tiktoken"
    renderer = Renderer(loaded)
    with pytest.raises(TokenizerLoadError, match="cannot load the tokenizer"):
        write_tokenizer(tmp_path, renderer, loaded)
    assert not (tmp_path / "mms_special_tokens.json").exists()


def test_mms_tokenize_refuses_such_a_file_before_encoding_anything(small_tokenizer, tmp_path):
    _load(tmp_path, {**small_tokenizer, "decoder": {"type": "NoSuchDecoder"}})
    out = tmp_path / "out"
    threads = REPO / "data_samples" / "mms" / "threads.jsonl"
    tokenizer = tmp_path / "tokenizer.json"
    args = ["tokenize", str(threads), "--tokenizer", str(tokenizer), "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "tokenizer.json: `tokenizers` cannot load the tokenizer" in result.output
    assert not out.exists()
