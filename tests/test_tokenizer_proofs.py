"""What is proven about a tokenizer file is remembered per sha256 of its bytes
(pipeline/tokenize/proofs.py): a second load uses it, an entry of other library versions or
an unreadable one is proven again, a cache that is off or cannot be written changes nothing
but the time, and a remembered fact is still checked against what the run renders."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import Renderer, TokenizerLoadError, load_tokenizer
from pipeline.tokenize.proofs import kept_file, proving_versions
from pipeline.user_cache import CACHE_ENV
from tests.tokenizer_fixtures import tokenizer_file

SMALL = tokenizer_file("bytelevel-plain")
"""A small byte-level BPE as converted from tiktoken (torchtune's test tokenizer.json, 158
kB, or the one of its shape trained for the tests): tiktoken encodes it."""


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@pytest.fixture
def small() -> Path:
    return SMALL


def entry(cache: Path, file: Path) -> Path:
    return cache / "tokenizers" / f"{hashlib.sha256(file.read_bytes()).hexdigest()}.json"


def recipe_fact(kept: dict) -> str:
    (name,) = [fact for fact in kept["facts"] if fact.startswith("tiktoken_recipe:")]
    return name


def test_a_proof_is_kept_and_used_by_the_next_load(cache: Path, small: Path) -> None:
    first = load_tokenizer(small)
    assert first.text_encoder.name == "tiktoken"
    kept = orjson.loads(entry(cache, small).read_bytes())
    assert kept["versions"] == proving_versions()
    recipe = kept["facts"][recipe_fact(kept)]
    assert recipe["pattern"] and len(recipe["vocab"]) == first.text_encoder.base_vocab_size()
    again = load_tokenizer(small)  # from the recipe: the same ids, no tokenizer.json parsed
    text = "Hello, wörld! 12345 <|role|> \n\n  tabs\tand 😀"
    assert again.text_encoder.encode_ids([text]) == first.text_encoder.encode_ids([text])
    assert again.text_encoder.added_tokens() == first.text_encoder.added_tokens()
    # what the cache says is what the next load believes: claim tiktoken does not fit
    kept["facts"][recipe_fact(kept)] = None
    entry(cache, small).write_bytes(orjson.dumps(kept))
    assert load_tokenizer(small).text_encoder.name == "tokenizers"


def test_other_versions_or_a_broken_entry_are_proven_again(cache: Path, small: Path) -> None:
    path = entry(cache, small)
    load_tokenizer(small)
    fact = recipe_fact(orjson.loads(path.read_bytes()))
    stale = {"versions": {**proving_versions(), "tokenizers": "0.0.1"}, "facts": {fact: None}}
    for content in (orjson.dumps(stale), b"{not json", b"[]"):
        path.write_bytes(content)
        assert load_tokenizer(small).text_encoder.name == "tiktoken"
        assert orjson.loads(path.read_bytes())["versions"] == proving_versions()


def test_a_cache_that_is_off_or_unwritable_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    assert load_tokenizer(small).text_encoder.name == "tiktoken"
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    assert load_tokenizer(small).text_encoder.name == "tiktoken"
    assert blocked.read_text() == "not a folder"


def test_remembered_ids_of_the_shipped_tokenizer_are_still_checked(
    cache: Path, small: Path, tmp_path: Path
) -> None:
    base = load_tokenizer(small)
    first = tmp_path / "first"
    first.mkdir()
    write_tokenizer(first, Renderer(base), base)
    shipped = first / "tokenizer.json"
    kept = orjson.loads(entry(cache, shipped).read_bytes())
    ids = kept["facts"]["mms_token_ids"]
    assert ids == orjson.loads((first / "mms_special_tokens.json").read_bytes())["special_tokens"]
    kept["facts"]["mms_token_ids"] = {**ids, "<|role|>": 7}
    entry(cache, shipped).write_bytes(orjson.dumps(kept))
    second = tmp_path / "second"
    second.mkdir()
    with pytest.raises(TokenizerLoadError, match=r"gives <\|role\|> the id 7"):
        write_tokenizer(second, Renderer(load_tokenizer(small)), base)


def test_an_invalid_file_is_never_remembered_as_valid(cache: Path, tmp_path: Path) -> None:
    from pipeline.tokenize.loading import check_tokenizer

    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "Nope"}}')
    for _ in range(2):
        with pytest.raises(TokenizerLoadError, match="unknown model type"):
            check_tokenizer(bad)
    assert not entry(cache, bad).exists()


def test_the_shipped_tokenizer_is_kept_and_read_back_only_whole(
    cache: Path, small: Path, tmp_path: Path
) -> None:
    base = load_tokenizer(small)
    made = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        write_tokenizer(tmp_path / name, Renderer(base), base)
        made.append((tmp_path / name / "tokenizer.json").read_bytes())
    (kept,) = (cache / "tokenizers").glob("*.shipped-tokenizer.json")
    assert made[0] == made[1] == kept.read_bytes()
    kept.write_bytes(made[0][:-10])  # a kept file that is not whole is made again
    (tmp_path / "after").mkdir()
    write_tokenizer(tmp_path / "after", Renderer(base), base)
    assert (tmp_path / "after" / "tokenizer.json").read_bytes() == made[0] == kept.read_bytes()
    record = orjson.loads((tmp_path / "after" / "mms_special_tokens.json").read_bytes())
    assert record["tokenizer"]["sha256"] == hashlib.sha256(made[0]).hexdigest()


def test_a_kept_file_is_kept_per_settings(cache: Path) -> None:
    made: list[bytes] = []

    def make(text: bytes) -> bytes:
        made.append(text)
        return text

    for settings, text in (({"bos": None}, b"one"), ({"bos": "<s>"}, b"two")):
        for _ in range(2):
            found, sha256 = kept_file("ab" * 32, "x.json", settings, lambda t=text: make(t))
            assert found == text and sha256 == hashlib.sha256(text).hexdigest()
    assert made == [b"one", b"two"]


def test_the_flagged_special_tokens_are_remembered(cache: Path, small: Path) -> None:
    first = load_tokenizer(small).special_tokens
    kept = orjson.loads(entry(cache, small).read_bytes())
    flagged = kept["facts"]["flagged_special_tokens"]
    assert isinstance(flagged, list) and set(flagged) <= set(first)
    kept["facts"]["flagged_special_tokens"] = ["<|remembered|>"]
    entry(cache, small).write_bytes(orjson.dumps(kept))
    assert "<|remembered|>" in load_tokenizer(small).special_tokens
