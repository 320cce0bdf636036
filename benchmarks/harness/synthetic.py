"""Generated corpora, the same bytes for the same seed: varied MMS threads of a given size
(all five roles, tool calls, reasoning, multi-message turns, settings, unicode, no text
repeated), image threads with their JPEGs, and token tables of given thread lengths."""

from __future__ import annotations

import json
import math
import random
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from harness import MIB

WRITE_CHUNK = 8 * MIB


# --------------------------------------------------------------------------- text


CLUSTERS = ("br", "ch", "cl", "dr", "fl", "gr", "pl", "qu", "sh", "st", "th", "tr")
CONSONANTS = (*"bcdfghjklmnprstvwz", *CLUSTERS)
VOWELS = (*"aeiouaeio", "ai", "ea", "ou", "ie")
ACCENTED = {"a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü", "n": "ñ", "c": "ç"}
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
CYRILLIC = "абвгдежзиклмнопрстуфхцчшыэюя"
HIRAGANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわん"
)
EMOJI = ("🙂", "🚀", "✅", "⚠️", "🔥", "📈", "🌍", "🎉", "🤔", "💡", "📦", "🧪")
ODD_WORDS = ['"quoted"', "C:\\temp\\x", "a\tb", "<tag>", "&amp;", "50%", "x=y+1", "'single'"]
VOCAB_SIZE = 65536
"""Word indices are 16-bit, drawn from `randbytes`: fast and deterministic."""

TOOLS = ("weather", "search", "calculator", "calendar", "sql", "browser", "translate", "stocks")
TOPICS = ("tool use", "coding", "math", "travel", "cooking", "finance", "health", "support")
LANGUAGES = ("python", "typescript", "rust", "sql", "bash")


def _latin_word(rng: random.Random) -> str:
    return "".join(
        rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))
    )


def _unicode_word(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return "".join(rng.choice(GREEK) for _ in range(rng.randint(3, 9)))
    if kind == 1:
        return "".join(rng.choice(CYRILLIC) for _ in range(rng.randint(3, 10)))
    if kind == 2:
        return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(2, 4)))
    if kind == 3:
        return "".join(rng.choice(HIRAGANA) for _ in range(rng.randint(2, 6)))
    if kind == 4:
        return rng.choice(EMOJI)
    word = _latin_word(rng)
    return "".join(ACCENTED.get(ch, ch) if rng.random() < 0.3 else ch for ch in word)


def build_vocab(rng: random.Random, unicode_share: float) -> list[str]:
    """VOCAB_SIZE words: pseudo-Latin plus `unicode_share` non-ASCII words, some numbers,
    markup and escapes; some capitalised or carrying punctuation, so that a plain
    `" ".join` of random words reads like (odd) prose."""
    words: list[str] = []
    for _ in range(VOCAB_SIZE):
        roll = rng.random()
        if roll < unicode_share:
            word = _unicode_word(rng)
        elif roll < unicode_share + 0.005:
            word = rng.choice(ODD_WORDS)
        elif roll < unicode_share + 0.015:
            word = str(rng.randint(0, 100_000))
        else:
            word = _latin_word(rng)
        roll = rng.random()
        if roll < 0.06:
            word = word.capitalize()
        elif roll < 0.14:
            word += ","
        elif roll < 0.19:
            word += "."
        elif roll < 0.20:
            word += "?"
        words.append(word)
    return words


class Words:
    """Random words from the vocabulary, drawn a million at a time."""

    REFILL = 1 << 20

    def __init__(self, rng: random.Random, vocab: list[str]) -> None:
        self._rng = rng
        self._vocab = vocab
        self._buffer: list[str] = []
        self._pos = 0
        self.mean_len = sum(map(len, vocab)) / len(vocab) + 1

    def take(self, count: int) -> list[str]:
        if self._pos + count > len(self._buffer):
            size = max(count, self.REFILL)
            indices = array("H", self._rng.randbytes(2 * size))
            self._buffer = list(map(self._vocab.__getitem__, indices))
            self._pos = 0
        words = self._buffer[self._pos : self._pos + count]
        self._pos += count
        return words

    def text(self, chars: float) -> str:
        """About `chars` characters of words."""
        return " ".join(self.take(max(1, round(chars / self.mean_len))))


# --------------------------------------------------------------------------- threads


class ThreadFactory:
    """Builds varied, realistic MMS thread dicts; every text carries a unique reference."""

    INTERNATIONAL_SHARE = 0.2
    """Threads written mostly in Greek, Cyrillic, CJK, kana and accented words; the rest
    are mostly ASCII with a little unicode (accents, emoji, the odd foreign word)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self._latin = Words(self.rng, build_vocab(self.rng, unicode_share=0.02))
        self._international = Words(self.rng, build_vocab(self.rng, unicode_share=0.6))
        self.words = self._latin
        self._ref = 0

    # -- small pieces

    def _length(self, low: int, high: int) -> float:
        """Log-uniform: mostly short, sometimes long."""
        return math.exp(self.rng.uniform(math.log(low), math.log(high)))

    def _tag(self, thread_no: int) -> str:
        self._ref += 1
        return f"{thread_no}.{self._ref}"

    def _prose(self, thread_no: int, low: int, high: int) -> str:
        return f"{self.words.text(self._length(low, high))} (ref {self._tag(thread_no)})"

    def _code_block(self) -> str:
        rng, words = self.rng, self.words
        name = "_".join(w.strip(",.?").lower() for w in words.take(2))
        body = "\n".join(f"    {' '.join(words.take(rng.randint(2, 8)))}" for _ in range(3))
        return f"```{rng.choice(LANGUAGES)}\ndef {name}(x):\n{body}\n    return x\n```"

    def _markdown(self, thread_no: int, low: int, high: int) -> str:
        rng, words = self.rng, self.words
        parts: list[str] = []
        if rng.random() < 0.3:
            parts.append("## " + " ".join(words.take(rng.randint(2, 6))))
        budget = self._length(low, high)
        paragraphs = rng.randint(1, 4)
        parts.extend(words.text(budget / paragraphs) for _ in range(paragraphs))
        if rng.random() < 0.3:
            parts.append(
                "\n".join(f"- {words.text(rng.randint(15, 80))}" for _ in range(rng.randint(2, 5)))
            )
        if rng.random() < 0.15:
            parts.append(self._code_block())
        if rng.random() < 0.08:
            rows = [" | ".join(words.take(3)) for _ in range(rng.randint(2, 5))]
            parts.append("| a | b | c |\n|---|---|---|\n" + "\n".join(f"| {r} |" for r in rows))
        parts.append(f"(ref {self._tag(thread_no)})")
        return "\n\n".join(parts)

    # -- messages

    def _developer(self, thread_no: int, tools: Sequence[str]) -> dict[str, Any]:
        text = self._prose(thread_no, 60, 2500)
        for tool in tools:
            text += (
                f"\n\n## {tool} tool\nUse the `{tool}:json` format:\n```typescript\n"
                f"type {tool.title()}Args = {{ query: string; limit?: number }}\n```"
            )
        return {"role": "developer", "content": text}

    def _tool_call(self, thread_no: int, tool: str) -> list[dict[str, Any]]:
        rng, words = self.rng, self.words
        args = {
            "query": words.text(rng.randint(10, 120)),
            "limit": rng.randint(1, 50),
            "request_id": self._tag(thread_no),
        }
        if rng.random() < 0.5:
            result: str = orjson.dumps(
                {
                    "results": [
                        {"title": words.text(30), "snippet": words.text(self._length(20, 400))}
                        for _ in range(rng.randint(1, 5))
                    ],
                    "request_id": self._tag(thread_no),
                }
            ).decode()
        else:
            result = self._prose(thread_no, 20, 1500)
        return [
            {
                "role": "assistant",
                "format": f"{tool}:json",
                "content": orjson.dumps(args).decode(),
                "end_turn": False,
            },
            {"role": "context", "name": tool, "content": result},
        ]

    def _assistant_turn(
        self, thread_no: int, tools: Sequence[str], used: set[str]
    ) -> list[dict[str, Any]]:
        """One assistant turn: optional reasoning, tool calls and intermediate messages,
        then a final message with end_turn true."""
        rng = self.rng
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.3:
            used.add("reasoning")
            messages.append(self._assistant("reasoning", self._prose(thread_no, 40, 2500), False))
        if tools and rng.random() < 0.7:
            for tool in rng.sample(list(tools), rng.randint(1, len(tools))):
                messages.extend(self._tool_call(thread_no, tool))
        if rng.random() < 0.1:
            messages.append(self._assistant("markdown", self._markdown(thread_no, 40, 800), False))
        roll = rng.random()
        if roll < 0.08:
            used.add("json")
            content = orjson.dumps(
                {"answer": self.words.text(self._length(20, 600)), "ref": self._tag(thread_no)}
            ).decode()
            messages.append(self._assistant("json", content, True))
        elif roll < 0.12:
            used.add("jsonl")
            lines = [
                orjson.dumps({"item": self.words.text(40), "ref": self._tag(thread_no)}).decode()
                for _ in range(rng.randint(2, 6))
            ]
            messages.append(self._assistant("jsonl", "\n".join(lines), True))
        else:
            messages.append(self._assistant("markdown", self._markdown(thread_no, 40, 4000), True))
        return messages

    @staticmethod
    def _assistant(fmt: str, content: str, end_turn: bool) -> dict[str, Any]:
        return {"role": "assistant", "format": fmt, "content": content, "end_turn": end_turn}

    def _settings(self, tools: Sequence[str], used: set[str]) -> dict[str, Any] | None:
        rng = self.rng
        formats: list[Any] = [
            {
                "name": f"{tool}:json",
                "halt_on_start": False,
                "halt_on_completion": True,
                "sampler": "json",
            }
            for tool in tools
        ]
        if "reasoning" in used:
            formats.append({"name": "reasoning", "halt_on_start": False})
        if "json" in used:
            formats.append({"name": "json", "sampler": "json"})
        if "jsonl" in used:
            formats.append({"name": "jsonl", "halt_on_completion": True, "sampler": "jsonl"})
        if not formats and rng.random() < 0.6:
            return None
        formats.insert(0, "markdown" if rng.random() < 0.5 else {"name": "markdown"})
        return {"formats": formats}

    def thread(self, thread_no: int) -> dict[str, Any]:
        rng = self.rng
        international = rng.random() < self.INTERNATIONAL_SHARE
        self.words = self._international if international else self._latin
        tools = rng.sample(TOOLS, rng.choice((0, 0, 0, 1, 1, 2, 3)))
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.25:
            messages.append({"role": "platform", "content": self._prose(thread_no, 30, 400)})
        if tools or rng.random() < 0.7:
            messages.append(self._developer(thread_no, tools))
        if rng.random() < 0.15:
            name = rng.choice(("document", "news_article", "email", "memo"))
            text = self._prose(thread_no, 100, 4000)
            messages.append({"role": "context", "name": name, "content": text})
        used: set[str] = set()
        no_user = rng.random() < 0.05
        for _ in range(1 if no_user else rng.choice((1, 1, 1, 2, 2, 3, 4))):
            if not no_user:
                messages.append({"role": "user", "content": self._prose(thread_no, 15, 1500)})
            if rng.random() < 0.08:
                messages.append(
                    {"role": "context", "name": None, "content": self._prose(thread_no, 30, 1500)}
                )
            messages.extend(self._assistant_turn(thread_no, tools, used))
        thread: dict[str, Any] = {"id": f"bench-{thread_no:09d}", "messages": messages}
        settings = self._settings(tools, used)
        if settings is not None or rng.random() < 0.5:
            thread["settings"] = settings
        thread["meta"] = {"topic": rng.choice(TOPICS), "difficulty": rng.randint(1, 5)}
        return thread


def generate(path: Path, size_bytes: int, seed: int) -> dict[str, int]:
    """Write threads to `path` until it holds at least `size_bytes`; return the counts."""
    factory = ThreadFactory(seed)
    threads = messages = written = 0
    chunk: list[bytes] = []
    chunk_bytes = 0
    with open(path, "wb") as out:
        while written + chunk_bytes < size_bytes:
            thread = factory.thread(threads)
            line = orjson.dumps(thread, option=orjson.OPT_APPEND_NEWLINE)
            chunk.append(line)
            chunk_bytes += len(line)
            threads += 1
            messages += len(thread["messages"])
            if chunk_bytes >= WRITE_CHUNK:
                out.write(b"".join(chunk))
                written += chunk_bytes
                chunk, chunk_bytes = [], 0
        out.write(b"".join(chunk))
        written += chunk_bytes
    return {"threads": threads, "messages": messages, "bytes": written}


# --------------------------------------------------------------------------- images


def image_records(folder: Path, threads: int, images: int) -> Path:
    """`images` distinct JPEGs (256x256 noise, about 50 KB each) in `folder/img`, and
    `threads` records in LLaMA-Factory's multimodal shape naming them in turn (one
    `<image>` each), one JSON file; returns the records' file."""
    from PIL import Image

    (folder / "img").mkdir(parents=True)
    chance = random.Random(0)
    for number in range(images):
        pixels = bytes(chance.getrandbits(8) for _ in range(256 * 256 * 3))
        Image.frombytes("RGB", (256, 256), pixels).save(
            folder / "img" / f"{number}.jpg", quality=85
        )
    records = [
        {
            "messages": [
                {"role": "user", "content": f"<image>What is in picture {index}?"},
                {"role": "assistant", "content": f"Noise, number {index % images}."},
            ],
            "images": [f"img/{index % images}.jpg"],
        }
        for index in range(threads)
    ]
    source = folder / "records.json"
    source.write_text(json.dumps(records))
    return source


# --------------------------------------------------------------------------- token tables


def lengths(count: int, seq_len: int, source: Path | None, seed: int) -> Any:
    """`count` thread lengths drawn from the `num_tokens` of a real output's shards
    (`source`), else a lognormal with the real data's median (205), capped at `seq_len`."""
    import numpy as np
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    if source is not None:
        real = np.concatenate(
            [
                pq.read_table(path, columns=["num_tokens"])["num_tokens"].to_numpy()
                for path in sorted((source / "data").glob("*.parquet"))
            ]
        )
        drawn = rng.choice(real, size=count)
    else:
        drawn = rng.lognormal(np.log(205), 1.0, size=count).astype(np.int64)
    return np.clip(drawn, 1, seq_len).astype(np.int64)


def token_table(sizes: Any) -> Any:
    """Threads of `sizes` tokens as an Arrow table of shard columns (ids 1..1000, every
    other token trained)."""
    import numpy as np
    import pyarrow as pa

    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(offsets[-1])
    ids = (np.arange(total) % 1000 + 1).astype(np.int32)
    labels = np.where(np.arange(total) % 2 == 0, ids, -100).astype(np.int32)
    trained = np.add.reduceat(labels != -100, offsets[:-1]) if total else np.zeros(0)
    return pa.table(
        {
            "id": pa.array([f"t{i}" for i in range(len(sizes))]),
            "input_ids": pa.LargeListArray.from_arrays(offsets, ids).cast(pa.list_(pa.int32())),
            "labels": pa.LargeListArray.from_arrays(offsets, labels).cast(pa.list_(pa.int32())),
            "num_tokens": pa.array(sizes.astype(np.int32)),
            "num_trained": pa.array(trained.astype(np.int32)),
        }
    )
