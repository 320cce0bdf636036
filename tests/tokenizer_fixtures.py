"""The tokenizers the tokenizer tests run on: the small ones trained for them and kept in
the repository (tests/data/tokenizers, see train.py there), always; the real ones of
../shared/tokenizers when that folder is present. And threads to encode with them: the
real files of ../shared/realdata when present, else the repository's data_samples and a
few threads holding what a tokenizer may fail to keep."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from pipeline.jobs.read import read
from pipeline.mms import Message, Thread
from tests.conftest import REPO, SHARED

SMALL_TOKENIZERS = REPO / "tests" / "data" / "tokenizers"
"""The small tokenizers trained here, one folder per family shape."""

SMALL_FAMILIES = {
    "bytelevel-llama3": "llama3_from_tiktoken",
    "bytelevel-qwen2": "qwen2.5_from_tiktoken",
    "bytelevel-plain": "torchtune_test_assets/tokenizer.json",
    "bytelevel-cropped": "torchtune_test_assets/tiny_bpe_tokenizer.json",
    "sentencepiece-phi3": "phi-3-mini",
    "sentencepiece-llama2": "llama2",
    "sentencepiece-gemma-cropped": "torchtune_test_assets/tokenizer_gemma_cropped.json",
}
"""Each small tokenizer, and the real one in ../shared/tokenizers whose shape it has."""


def shared_present() -> bool:
    return (SHARED / "DESIGN.md").is_file()


def shared_tokenizers() -> Path:
    """../shared/tokenizers, or a skip naming what is missing."""
    if not shared_present():
        pytest.skip(
            f"real data folder {SHARED} is absent (set MMS_SHARED to point at it); "
            "this test needs the real third-party tokenizers of ../shared/tokenizers"
        )
    return SHARED / "tokenizers"


def tokenizer_root(source: str) -> Path:
    """`repo`: the small tokenizers; `shared`: ../shared/tokenizers (or a skip)."""
    return SMALL_TOKENIZERS if source == "repo" else shared_tokenizers()


def small(name: str) -> Path:
    """The folder of the small tokenizer `name` (a key of SMALL_FAMILIES)."""
    assert name in SMALL_FAMILIES, name
    return SMALL_TOKENIZERS / name


def remarkable_threads() -> list[Thread]:
    """Threads holding what some tokenizer cannot keep as is, or must keep: a literal
    `</s>` and control-token text, decomposed characters, Chinese, emoji, byte-fallback
    characters, a named context message and an assistant turn left open."""
    decomposed = unicodedata.normalize("NFD", "Café déjà vu, naïve Ångström")
    return [
        Thread(
            "remarkable-controls",
            [
                Message.user("Why does my output end with </s> and <s> here?"),
                Message.assistant("The literal `</s>` and <|endoftext|> stay text."),
            ],
        ),
        Thread(
            "remarkable-decomposed",
            [Message.user(decomposed), Message.assistant(f"Composed: {decomposed.upper()}")],
        ),
        Thread(
            "remarkable-chinese",
            [
                Message.context("天气: 晴, 25°C", name="weather_tool"),
                Message.user("你好，今天天气怎么样？"),  # noqa: RUF001
                Message.assistant("今天是晴天 🙂 — 气温 25°C。", end_turn=False),
            ],
        ),
        Thread(
            "remarkable-bytes",
            [
                Message.user("Emoji 👩\u200d💻 \U0001f9d1\U0001f3fd, Ωμέγα, ١٢٣ and tabs\t\r\n"),
                Message.assistant("  leading spaces, ▁ a literal metaspace,  double  "),
                Message.user("ünïcödé ß ẞ ﬁ ℌ ①"),  # noqa: RUF001
                Message.assistant("", end_turn=False),
            ],
        ),
    ]


def repo_threads() -> list[Thread]:
    """Every thread the repository's data_samples read into, then remarkable_threads."""
    folders = sorted(
        str(folder)
        for folder in (REPO / "data_samples").iterdir()
        if folder.is_dir() and folder.name != "expected"
    )
    return [*read(folders, on_reject=lambda rejection: None), *remarkable_threads()]
