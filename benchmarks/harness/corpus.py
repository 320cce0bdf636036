"""Corpora built from the real files ($MMS_SHARED/realdata): the real threads made unique
(no text repeats, so no cache or dedup gets a free win), 2-turn and 200-turn threads of
the same pairs, OpenAI records, copies of the converted threads, an evaluation set,
preference pairs; and the `mms run` config the run benchmarks share."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from harness import DEFAULT_SEED, MIB

SHORT_TURNS, LONG_TURNS = 2, 200
MAX_TOKENS = 32768
"""Long enough that no real thread is truncated with any tokenizer (Phi-3 makes some of them
longer than 8,192 tokens), so every route encodes the same threads whole."""
WORKERS = 2
"""`engine.workers` of the run config (and `num_proc` of the datasets route)."""


# --------------------------------------------------------------------------- real threads


def real_threads(realdata: Path) -> tuple[list[Any], Any]:
    """Every thread of the real files (records that are not conversations are skipped), in
    a seeded shuffle, so any prefix and every batch mixes the sources; and the account."""
    import pipeline

    stats = pipeline.Account()
    threads = list(pipeline.read(str(realdata), stats=stats))
    random.Random(DEFAULT_SEED).shuffle(threads)
    return threads, stats


class Unique:
    """Makes texts distinct across a data set: a text already used gets ` [mark]` added."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def text(self, text: str, mark: str) -> str:
        while text in self.seen:
            text = f"{text} [{mark}]"
        self.seen.add(text)
        return text

    def message(self, message: Any, mark: str) -> Any:
        """`message` with its content made distinct."""
        return dataclasses.replace(message, content=self.text(message.content, mark))


def cycled(items: Sequence[Any], count: int) -> Iterator[tuple[int, Any]]:
    """`count` items, cycling through `items`, numbered from 0."""
    for number in range(count):
        yield number, items[number % len(items)]


def unique_threads(real: Sequence[Any], count: int) -> list[Any]:
    """`count` threads cycled from `real`, each with its own id and no content repeated
    (every content already used anywhere gets ` [N.K]`: thread N, message K)."""
    from pipeline.mms import Thread

    unique = Unique()
    return [
        Thread(
            f"bench-{n:07d}",
            [unique.message(m, f"{n}.{k}") for k, m in enumerate(thread.messages)],
            thread.settings,
        )
        for n, thread in cycled(real, count)
    ]


def real_pairs(real: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Every user message answered by an assistant message that ends its turn."""
    return [
        (first, second)
        for thread in real
        for first, second in zip(thread.messages, thread.messages[1:], strict=False)
        if first.role == "user" and second.role == "assistant" and second.end_turn
    ]


def turn_threads(real: Sequence[Any], long_threads: int) -> tuple[list[Any], list[Any]]:
    """2-turn and 200-turn threads holding the same unique (user, assistant) pairs: the
    same text and the same tokens in both shapes."""
    from pipeline.mms import Thread

    per_long = LONG_TURNS // 2
    unique = Unique()
    pairs = [
        [unique.message(m, f"{n}.{k}") for k, m in enumerate(pair)]
        for n, pair in cycled(real_pairs(real), long_threads * per_long)
    ]
    short = [Thread(f"short-{n:07d}", pair) for n, pair in enumerate(pairs)]
    long = [
        Thread(f"long-{n:05d}", [m for pair in pairs[start : start + per_long] for m in pair])
        for n, start in enumerate(range(0, len(pairs), per_long))
    ]
    return short, long


def write_threads(threads: Sequence[Any], path: Path) -> int:
    """`threads` as MMS JSONL at `path`; the bytes written."""
    written = 0
    with open(path, "wb", buffering=MIB) as out:
        for thread in threads:
            written += out.write(thread.to_json_line())
    return written


def sized_inputs(
    realdata: Path, workdir: Path, sizes: list[int], spread: Callable[[int], int]
) -> list[Path]:
    """An MMS JSONL file per size of the real threads made unique (the smaller the first
    threads of the largest), then the largest's threads again over `spread(its bytes)`
    files in one folder: as many threads in more parts, so that a cost per part and a cost
    per thread can be told apart."""
    real, _ = real_threads(realdata)
    every = unique_threads(real, max(sizes))
    sources = []
    for count in sizes:
        source = workdir / f"input-{count}.jsonl"
        write_threads(every[:count], source)
        sources.append(source)
    files = spread(sources[-1].stat().st_size)
    folder = workdir / f"input-{max(sizes)}-in-{files}-files"
    folder.mkdir()
    for index in range(files):
        write_threads(every[index::files], folder / f"part-{index:04d}.jsonl")
    return [*sources, folder]


def write_config(
    path: Path,
    source: Path,
    output: Path,
    tokenizer: Path,
    partition: str | None = None,
    *,
    max_tokens: int = MAX_TOKENS,
    workers: int = WORKERS,
    stages: dict[str, Any] | None = None,
    media: str = "drop",
) -> None:
    """The run benchmarks' config (YAML) on `source`: lint with every rule (`fail_on:
    never`), every thread kept (`min_trained_tokens: 0`), dedup, tokenize with truncation,
    one split, `workers` workers; `stages` added (curation); `partition`: the engine's."""
    config = {
        "name": f"run-benchmark-{source.stem}",
        "inputs": [{"path": str(source), "format": "mms"}],
        "stages": {
            # the real threads' media point at files ../shared does not hold: text only
            **({"normalize": {"multimodal": media}} if media else {}),
            "lint": {"fail_on": "never"},
            "filters": {"min_trained_tokens": 0},
            "dedup": {"enabled": True},
            "tokenize": {
                "tokenizer": str(tokenizer.resolve()),
                "max_tokens": max_tokens,
                "overlong": "truncate",
            },
            "shard": {"splits": {"train": 1.0}},
            **(stages or {}),
        },
        "output": str(output),
        "engine": {"workers": workers, **({"partition": partition} if partition else {})},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def manifest_counts(output: Path) -> dict[str, Any]:
    """The counts of a finished `mms run`, from its manifest."""
    counts: dict[str, Any] = json.loads((output / "manifest.json").read_text())["counts"]
    return counts


def manifest_rows(output: Path) -> int:
    """The rows a finished run wrote, over its splits."""
    manifest = json.loads((output / "manifest.json").read_text())
    return sum(split["rows"] for split in manifest["splits"].values())


# --------------------------------------------------------------------------- other shapes


OPENAI_SOURCES = (
    "openai_finetune_examples/toy_chat_fine_tuning.jsonl",
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
    "openai_finetune_examples/evals_older_samples.jsonl",
    "functionary/test_case.json",
    "functionary/test_case_v1.json",
    "functionary/test_case_v2.json",
    "functionary/test_case_vision.json",
    "llamafactory/kto_en_demo.json",
    "llamafactory/mllm_demo.json",
    "llamafactory/mllm_video_audio_demo.json",
    "llamafactory/reason_tool_use_demo_50.jsonl",
    "llamafactory/v1_sft_demo.jsonl",
    "llamafactory/v1_multimodal_demo.jsonl",
    "llamafactory/v1_dpo_demo.jsonl",
    "torchtune_assets/hh_rlhf_tiny.json",
)
"""The real files the OpenAI records come from (all read by the `openai` format)."""


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file, a JSON array, or a single JSON object."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return [orjson.loads(line) for line in data.splitlines() if line.strip()]
    value = orjson.loads(data)
    return value if isinstance(value, list) else [value]


def openai_records(realdata: Path, target: Path, count: int) -> dict[str, Any]:
    """Write `count` OpenAI-shaped records to `target`, one from each source file in turn
    (cycling each file's records), every record with a distinct `id`."""
    pools = [load_records(realdata / name) for name in OPENAI_SOURCES]
    written = 0
    with open(target, "wb") as out:
        for number in range(count):
            pool = pools[number % len(pools)]
            record = pool[(number // len(pools)) % len(pool)]
            line = orjson.dumps(
                {"id": f"bench-{number:07d}", **record}, option=orjson.OPT_APPEND_NEWLINE
            )
            out.write(line)
            written += len(line)
    return {"records": count, "bytes": written, "source_records": sum(map(len, pools))}


def converted_realdata(realdata: Path, workdir: Path) -> dict[str, Any]:
    """The real files as one MMS JSONL file (formats detected per file)."""
    import pipeline

    result = pipeline.convert(
        str(realdata), workdir / "realdata.jsonl", quarantine=workdir / "realdata.rejected.jsonl"
    )
    stats = result.account
    return {
        "path": str(result.output),
        "files": len(stats.files),
        "records": stats.records_read,
        "quarantined": stats.quarantined_total,
        "threads": stats.threads,
    }


def write_copies(source: Path, target: Path, count: int) -> int:
    """Write `count` threads to `target`, cycling through the MMS threads of `source`, each
    with a fresh id and made distinct (`[copy N]` after its first user message, else its
    first message), so the data grows as a real dataset would; the bytes written."""
    written = number = 0
    with open(target, "wb") as out:
        while number < count:
            with open(source, "rb") as stream:
                for line in stream:
                    if number == count:
                        break
                    thread = orjson.loads(line)
                    thread["id"] = f"bench-{number:07d}"
                    messages = thread["messages"]
                    marked = next((m for m in messages if m["role"] == "user"), messages[0])
                    marked["content"] += f" [copy {number}]"
                    data = orjson.dumps(thread, option=orjson.OPT_APPEND_NEWLINE)
                    out.write(data)
                    written += len(data)
                    number += 1
    return written


PLANTED = 100
"""Evaluation prompts copied from real user turns: the training threads holding one of them
are the ones decontamination finds (8% of 100k threads: the real threads are cycled)."""


def evaluation_set(threads: Sequence[Any], count: int, path: Path) -> None:
    """`count` MT-Bench-shaped questions: the openings (30 words) of real answers, which no
    training user turn holds, each made unique; and PLANTED real user turns, which some do."""
    answers = [
        " ".join(m.content.split()[:30])
        for t in threads
        for m in t.messages
        if m.role == "assistant" and len(m.content.split()) >= 20
    ]
    prompts = [
        m.content for t in threads for m in t.messages if m.role == "user" and len(m.content) > 40
    ]
    with open(path, "w", encoding="utf-8") as out:
        for index in range(count):
            if index < PLANTED:
                turn = prompts[index * 7 % len(prompts)]
            else:
                turn = f"{answers[index % len(answers)]} (variant {index})"
            out.write(json.dumps({"question_id": index, "turns": [turn]}) + "\n")


def preference_pairs(source: Path, pairs: int, out: Path) -> None:
    """`pairs` unique TRL conversational pairs built from the LLaMA-Factory DPO demo (each
    copy's prompt and answers marked with its number)."""
    records = json.loads(source.read_text())
    with out.open("w") as handle:
        for number in range(pairs):
            record = records[number % len(records)]
            prompt = [
                {"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]}
                for t in record["conversations"]
            ]
            prompt[-1]["content"] += f" (#{number})"
            pair = {
                "prompt": prompt,
                "chosen": [
                    {"role": "assistant", "content": f"{record['chosen']['value']} [{number}]"}
                ],
                "rejected": [
                    {"role": "assistant", "content": f"{record['rejected']['value']} [{number}]"}
                ],
            }
            handle.write(json.dumps(pair) + "\n")
