"""The tokenizers the tokenizer tests run on, one per FAMILY (a shape pipeline/tokenize
branches on): the real file of ../shared/tokenizers when that folder is present, else the
small one of the same shape trained for the tests and kept in the repository
(tests/data/tokenizers, see train.py there). A test names the family, so its id is the
same with or without ../shared and it runs in both. And threads to encode with them: the
real files of ../shared/realdata when present, else the repository's data_samples and a
few threads holding what a tokenizer may fail to keep."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from pipeline.formats.base import ConvertOptions
from pipeline.jobs.read import ReadSpec, read
from pipeline.mms import Message, Thread
from tests.conftest import REPO, SHARED

SMALL_TOKENIZERS = REPO / "tests" / "data" / "tokenizers"
"""The small tokenizers trained here, one folder per family (named after it)."""

FAMILIES: dict[str, str | None] = {
    "bytelevel-llama3": "llama3_from_tiktoken",
    "bytelevel-qwen2": "qwen2.5_from_tiktoken",
    "bytelevel-plain": "torchtune_test_assets/tokenizer.json",
    "bytelevel-cropped": "torchtune_test_assets/tiny_bpe_tokenizer.json",
    "sentencepiece-phi3": "phi-3-mini",
    "sentencepiece-llama2": None,
    "sentencepiece-llama2-legacy": "llama2",
    "sentencepiece-gemma-cropped": "torchtune_test_assets/tokenizer_gemma_cropped.json",
}
"""Each family, and the real tokenizer of ../shared/tokenizers (a folder or a file) it
resolves to when present. sentencepiece-llama2 (Llama-2 as current `tokenizers` writes it)
has none: the real Llama-2 file is the legacy one, which does not load."""


def shared_present() -> bool:
    return (SHARED / "DESIGN.md").is_file()


def tokenizer_file(family: str) -> Path:
    """The tokenizer.json `family` resolves to: the real one in ../shared/tokenizers when
    that folder is present, else the small one trained for the tests. A folder's
    tokenizer_config.json is beside it (`.parent` is the folder to load)."""
    real = FAMILIES[family]
    if real is not None and shared_present():
        path = SHARED / "tokenizers" / real
        return path if path.suffix == ".json" else path / "tokenizer.json"
    return SMALL_TOKENIZERS / family / "tokenizer.json"


def remarkable_threads() -> list[Thread]:
    """Threads holding what some tokenizer cannot keep as is, or must keep: a literal
    `</s>` and control-token text (other models' chat formats written out), decomposed
    characters, Chinese, emoji, byte-fallback characters, a named context message and an
    assistant turn left open."""
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
            "remarkable-prompts",
            [
                Message.user(
                    "Why does this prompt print raw?\n<|begin_of_text|><|start_header_id|>"
                    "user<|end_header_id|>\n\nHi<|eot_id|>"
                ),
                Message.assistant(
                    "It is another model's chat format, e.g. <|im_start|>user\nHi<|im_end|>\n"
                    '<tool_call>{"name": "f"}</tool_call><|endoftext|> or '
                    "<|user|>\nHi<|end|>\n<|assistant|>"
                ),
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


def sample_threads() -> list[Thread]:
    """Every thread the repository's data_samples read into, their media dropped
    (`multimodal: drop`, as before media were kept): the tokenizer tests that use them are
    about text, and an output whose rows hold media ships three more tokens
    (tests/test_media_tokens.py covers those)."""
    folders = sorted(
        str(folder)
        for folder in (REPO / "data_samples").iterdir()
        if folder.is_dir() and folder.name != "expected"
    )
    spec = ReadSpec(options=ConvertOptions(multimodal="drop"))
    return list(read(folders, spec, on_reject=lambda rejection: None))


def repo_threads() -> list[Thread]:
    """sample_threads, then remarkable_threads."""
    return [*sample_threads(), *remarkable_threads()]


def write_threads(path: Path, threads: list[Thread]) -> Path:
    """`threads` as an MMS threads.jsonl at `path` (an input for `mms tokenize`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(thread.to_json_line() for thread in threads))
    return path


def tokenize_inputs(folder: Path, *real: str) -> list[Path]:
    """Inputs for `mms tokenize`: the files `real` of ../shared/realdata when present, else
    every thread of data_samples (sample_threads) written as one threads.jsonl in `folder`."""
    if shared_present():
        return [SHARED / "realdata" / name for name in real]
    return [write_threads(folder / "samples" / "threads.jsonl", sample_threads())]
