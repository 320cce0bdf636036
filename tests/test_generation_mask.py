"""The shipped template's `{% generation %}` mask is the rows' labels, position by position,
whatever bytes an answer ends with: Chinese punctuation, emoji (ZWJ sequences, flags, skin
tones), combining characters and mixed scripts, on every tokenizer family the code branches
on (byte-level BPE as Llama-3, Qwen2.5 and GPT-2 write it, the byte-level file tiktoken
encodes, SentencePiece as Llama-2, Phi-3 and Gemma write it), text-only and with media,
under both labels policies.

transformers maps each block to tokens in one of two ways: 4.x takes `char_to_token` of
the block's first and last characters and marks the tokens between (a last character of
several byte tokens maps to the first of them); 5.x marks every token whose offsets
overlap the block. Both are computed here from the same rendering and compared with the
labels the renderer writes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipeline.mms import Thread
from pipeline.output.tokenizer import write_tokenizer
from pipeline.tokenize import IGNORE, Renderer, load_tokenizer
from tests.tokenizer_fixtures import tokenizer_file

transformers = pytest.importorskip(
    "transformers", reason="transformers (the dev extra) computes the assistant mask"
)
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

FAMILIES = (
    "bytelevel-llama3",
    "bytelevel-qwen2",
    "bytelevel-plain",  # tiktoken encodes it
    "bytelevel-cropped",
    "sentencepiece-phi3",
    "sentencepiece-llama2",
    "sentencepiece-gemma-cropped",
)
"""Every family whose tokenizer loads (tests/tokenizer_fixtures.py), the real file when
../shared is present."""

ENDINGS = (
    "好的。",
    "太好了！",  # noqa: RUF001
    "今天是晴天，气温二十五度",  # noqa: RUF001
    "「引用」",
    "done 👩\u200d💻",
    "family 👨\u200d👩\u200d👧\u200d👦",
    "vive la 🇫🇷",
    "wave 👋🏽",
    "mixed ελληνικά, العربية, 日本語です。",
    "cafe\u0301",
    "A\u030a",
    "नमस्ते",
    "e\u0301\u0323 ok",
    "plain end.",
)
"""What answers end with: characters of several byte tokens, sequences of several code
points, combining marks after a base letter."""


def _assistant(content: Any, **fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "end_turn": True, **fields}


def _threads(answer: str) -> list[dict[str, Any]]:
    """Threads ending their answers with `answer`: a finished turn, a halt before a user
    message, before a trained assistant message, before a context message and at the end
    of the thread, a halting message weighted 0 before a trained one, two answers."""
    user = {"role": "user", "content": "你好？"}  # noqa: RUF001
    tool = {"role": "context", "name": "lookup", "content": "結果: 42。"}
    shapes = {
        "finished": [user, _assistant(answer)],
        "halt-user": [user, _assistant(answer, end_turn=False), user, _assistant(answer)],
        "halt-assistant": [user, _assistant(answer, end_turn=False), _assistant(answer)],
        "halt-context": [user, _assistant(answer, end_turn=False), tool, _assistant(answer)],
        "halt-end": [user, _assistant(answer, end_turn=False)],
        "weighted-halt": [
            user,
            _assistant(answer, end_turn=False, weight=0.0),
            _assistant(answer, end_turn=False),
        ],
        "after-weighted": [
            user,
            _assistant(answer, end_turn=False),
            _assistant(answer, weight=0.0),
        ],
        "two-answers": [user, _assistant(answer), user, _assistant(answer + answer)],
    }
    return [{"id": name, "messages": messages} for name, messages in shapes.items()]


def _media_threads(answer: str) -> list[dict[str, Any]]:
    """Threads with media: an image in the user's message; an assistant message whose last
    part is its text, or a placeholder."""
    image = {"type": "image", "path": "a.png"}
    user = {"role": "user", "content": [image, {"type": "text", "text": "看这个？"}]}  # noqa: RUF001
    text_last = [image, {"type": "text", "text": answer}]
    media_last = [{"type": "text", "text": answer}, image]
    shapes = {
        "image-in-user": [user, _assistant(answer)],
        "image-then-answer": [user, _assistant(text_last)],
        "image-then-halt": [user, _assistant(text_last, end_turn=False), user, _assistant(answer)],
        "answer-then-image": [user, _assistant(media_last, end_turn=False), _assistant(answer)],
    }
    return [{"id": name, "messages": messages} for name, messages in shapes.items()]


def _masks(
    hf: Any, messages: list[dict[str, Any]]
) -> tuple[list[int], list[int] | None, list[int]]:
    """input_ids, the 4.x mask (char_to_token of each block's first and last character) and
    the 5.x mask (every token overlapping a block) of one rendering of `messages`. The 4.x
    mask is None when a block starts on a character that has no token (a cropped
    vocabulary lacking its bytes drops it): 4.x stops there."""
    rendered, indices = render_jinja_template(
        conversations=[messages],
        chat_template=hf.chat_template,
        return_assistant_tokens_mask=True,
        **hf.special_tokens_map,
    )
    encoding = hf(rendered[0], add_special_tokens=False)
    overlapping = [
        int(any(s < end and e > start for start, end in indices[0]))
        for s, e in encoding.encodings[0].offsets
    ]
    ids = encoding["input_ids"]
    if any(encoding.char_to_token(start) is None for start, _ in indices[0]):
        return ids, None, overlapping
    by_chars = [0] * len(ids)
    for start, end in indices[0]:
        first, last = encoding.char_to_token(start), encoding.char_to_token(end - 1)
        if first is None:
            break
        for position in range(first, last + 1 if last else len(ids)):
            by_chars[position] = 1
    return ids, by_chars, overlapping


def _labels(ids: list[int], mask: list[int]) -> list[int]:
    return [token if marked else IGNORE for token, marked in zip(ids, mask, strict=True)]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, tmp_path_factory.mktemp(request.param)


@pytest.mark.parametrize("policy", ["assistant", "last_assistant"])
@pytest.mark.parametrize("media", [False, True], ids=["text", "media"])
def test_the_generation_mask_is_the_labels_whatever_an_answer_ends_with(family, policy, media):
    name, folder = family
    base = load_tokenizer(tokenizer_file(name))
    renderer = Renderer(base, policy=policy)
    shipped = folder / f"{policy}-{media}"
    shipped.mkdir()
    write_tokenizer(shipped, renderer, base, media=media)
    hf = transformers.AutoTokenizer.from_pretrained(str(shipped))
    compared = by_chars_compared = 0
    for answer in ENDINGS:
        made = _threads(answer) + (_media_threads(answer) if media else [])
        for data in made:
            thread = Thread.from_dict(data)
            encoded = renderer.encode(thread)
            messages = [message.to_dict() for message in thread.messages]
            ids, by_chars, overlapping = _masks(hf, messages)
            where = f"{name} {policy} {data['id']} {answer!r}"
            assert ids == encoded.input_ids, where
            assert _labels(ids, overlapping) == encoded.labels, where
            if by_chars is not None and data["id"] != "answer-then-image":  # the next test
                assert _labels(ids, by_chars) == encoded.labels, where
                by_chars_compared += 1
            out = hf.apply_chat_template(
                messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
            assert out["input_ids"] == encoded.input_ids, where
            assert _labels(out["input_ids"], out["assistant_masks"]) == encoded.labels, where
            compared += 1
    assert compared == len(ENDINGS) * (8 + 4 * media)
    assert by_chars_compared >= len(ENDINGS) * 8 // (2 if name == "bytelevel-cropped" else 1)


def test_only_text_before_a_placeholder_in_an_answer_can_lose_its_last_bytes_in_4x(tmp_path):
    """The one place a block ends on content: an answer's text followed by a placeholder
    (never trained). transformers 5.x marks it exactly; 4.x's char_to_token of its last
    character leaves that character's other byte tokens out (DESIGN §4)."""
    base = load_tokenizer(tokenizer_file("bytelevel-plain"))
    renderer = Renderer(base)
    write_tokenizer(tmp_path, renderer, base, media=True)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    missed: list[int] = []
    for answer in ENDINGS:
        thread = Thread.from_dict(_media_threads(answer)[3])
        ids, by_chars, overlapping = _masks(hf, [m.to_dict() for m in thread.messages])
        labels = renderer.encode(thread).labels
        assert by_chars is not None
        assert _labels(ids, overlapping) == labels
        differ = [i for i, (a, b) in enumerate(zip(by_chars, overlapping, strict=True)) if a != b]
        assert all(labels[i] != IGNORE and not by_chars[i] for i in differ)
        missed += differ
    assert missed


def _mask_by_chars(apply: Any) -> Any:
    """`apply_chat_template` whose assistant mask is computed as transformers 4.x does."""

    def patched(self: Any, conversation: Any, **kwargs: Any) -> Any:
        out = apply(self, conversation, **kwargs)
        if kwargs.get("return_assistant_tokens_mask"):
            ids, by_chars, _ = _masks(self, conversation)
            assert ids == out["input_ids"] and by_chars is not None
            out["assistant_masks"] = by_chars
        return out

    return patched


@pytest.mark.parametrize("by_chars", [False, True], ids=["overlap", "char_to_token"])
@pytest.mark.parametrize("media", [False, True], ids=["text", "media"])
def test_mms_verify_passes_every_row_with_such_answers(tmp_path, monkeypatch, media, by_chars):
    """`mms tokenize` on threads ending their answers with every ending, then `mms verify`:
    the template checked on every row, and passing, whichever way the mask is computed."""
    from click.testing import CliRunner

    from pipeline.cli import main

    if by_chars:
        base = transformers.PreTrainedTokenizerBase
        monkeypatch.setattr(base, "apply_chat_template", _mask_by_chars(base.apply_chat_template))
    threads = [
        {**data, "id": f"{data['id']}-{index}"}
        for index, answer in enumerate(ENDINGS)
        for data in _threads(answer) + (_media_threads(answer)[:3] if media else [])
    ]
    source = tmp_path / "threads.jsonl"
    source.write_bytes(
        b"".join(orjson.dumps(Thread.from_dict(t).to_dict()) + b"\n" for t in threads)
    )
    out = tmp_path / "out"
    tokenizer = tokenizer_file("bytelevel-llama3").parent
    args = ["tokenize", str(source), "--tokenizer", str(tokenizer), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--no-check-media"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["verify", str(out)])
    assert result.exit_code == 0, result.output
    checked = re.search(r"(\d+)\s+rows against the chat template", result.output)
    assert checked and int(checked[1]) == len(threads), result.output
