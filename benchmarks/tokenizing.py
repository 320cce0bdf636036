"""Benchmark the `mms-v0` Renderer on real threads: tokens/s against raw
`tokenizers.Tokenizer.encode_batch` over the same text, against transformers'
`apply_chat_template` with a §4 template, and on 2-turn against 200-turn threads.

Run from the repository root, with the package and transformers installed; the real files
come from ../shared/realdata, the tokenizers from ../shared/tokenizers:

    python benchmarks/tokenizing.py               # 20,000 threads, best of 3, ~2.5 min
    python benchmarks/tokenizing.py --quick       # smoke run, seconds
    python benchmarks/tokenizing.py --tokenizer ../shared/tokenizers/qwen2.5_from_tiktoken
    python benchmarks/tokenizing.py --profile 20 --json figures.json

What it does, in one process, for each --tokenizer:

1. build (untimed): reads the real files with `pipeline.read`, shuffles their threads
   (seeded) and cycles through them until there are --threads. Every message text that was already used
   anywhere in the set gets ` [N.K]` appended (thread N, message K), so no content repeats
   (the real files repeat system prompts and whole threads): the Renderer's dedup of
   identical pieces gets no free win. Only role, format and context names repeat. For
   the scaling runs, real (user, assistant) pairs (assistant ending its turn), made
   unique the same way, become 2-turn threads, and the same pairs, 100 in a row, 200-turn
   threads: the same text and the same number of tokens in both shapes.
2. timed, alternating --repeat times, fastest kept:
   raw: `Tokenizer.encode_batch(pieces, add_special_tokens=False)` of the base tokenizer
   and the ids taken out (`[e.ids for e in encodings]`), per batch of --batch threads,
   `pieces` being exactly the distinct text pieces the Renderer encodes for that batch
   (every content, and each role, format and name string once), built before timing;
   raw tiktoken (when the Renderer encodes with it, as for Llama-3 and Qwen2): the
   Renderer's own text encoder on the same pieces, the floor of its encoding;
   Renderer: `Renderer.encode_batch` per batch of --batch threads;
   transformers: `apply_chat_template(messages, chat_template=TEMPLATE, tokenize=True,
   return_dict=True, return_assistant_tokens_mask=True)` per thread (and, for reference,
   per batch of --batch conversations) on every k-th thread, --hf-threads in all;
   scaling: the Renderer on the 2-turn and on the 200-turn threads (batches of the same
   number of messages), and transformers per thread on a part of each.
3. checks (untimed): transformers' input_ids and labels (its assistant mask) equal the
   Renderer's on every transformers thread whose text holds no literal special token
   (transformers matches those as special ids, by design the Renderer does not).

tokens/s counts the rendered tokens (the Renderer's `num_tokens`) of the threads a run
covers, for every run, so a ratio of tokens/s is a ratio of time over the same threads.
`encode_batch` runs on every core (Rayon) for raw, batched transformers and a Renderer
encoding with `tokenizers`; tiktoken and per-thread transformers encode on one core. Timings are reported, never
asserted; the exit status is 1 when a check fails.

The file is not called tokenize.py: Python puts a script's folder first on sys.path, so a
tokenize.py here would stand for the standard library's `tokenize` (imported by `inspect`,
`linecache`, `dataclasses` ...) in every script of this folder.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import pstats
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from convert import DEFAULT_SEED
from ingest import DEFAULT_REALDATA, REPO_ROOT
from lint import where
from table import print_aligned
from transformers import PreTrainedTokenizerFast

import pipeline
from pipeline.mms import Message, Thread
from pipeline.tokenize import IGNORE, LoadedTokenizer, Renderer, load_tokenizer

T = TypeVar("T")
DEFAULT_TOKENIZER = REPO_ROOT.parent / "shared" / "tokenizers" / "llama3_from_tiktoken"
DEFAULT_THREADS = 20_000
DEFAULT_HF_THREADS = 2_000
DEFAULT_LONG_THREADS = 50
DEFAULT_HF_LONG_THREADS = 5
BATCH_THREADS = 1024
SHORT_TURNS, LONG_TURNS = 2, 200
QUICK = {"threads": 1_000, "hf_threads": 100, "long_threads": 5, "hf_long_threads": 1, "repeat": 1}
TARGET_RAW = 0.8
"""The Renderer's tokens/s must be at least this share of raw encode_batch's."""
TARGET_HF = 2.0
"""The Renderer must be at least this many times as fast as per-thread transformers."""
TARGET_SCALING = 0.2
"""200-turn tokens/s within this fraction of 2-turn tokens/s."""

TEMPLATE = (
    "{%- set ns = namespace(open=false) -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>assistant<|format|>{%- endgeneration -%}"
    "{%- else -%}<|role|>assistant<|format|>{%- endif -%}"
    "{%- generation -%}{{ m.format or 'markdown' }}<|content|>{{ m.content }}"
    "{%- if m.end_turn -%}<|end_turn|>{%- endif -%}{%- endgeneration -%}"
    "{%- set ns.open = not m.end_turn -%}"
    "{%- else -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>{%- endgeneration -%}"
    "{%- else -%}<|role|>{%- endif -%}"
    "{{ m.role }}{%- if m.role == 'context' and m.name -%}<|name|>{{ m.name }}{%- endif -%}"
    "<|content|>{{ m.content }}"
    "{%- set ns.open = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if ns.open -%}{%- generation -%}<|role|>{%- endgeneration -%}{%- endif -%}"
)
"""DESIGN §4 (`mms-v0`, policy `assistant`) as a chat template: `{% generation %}` marks
what is trained (an assistant message's format, <|content|>, content and <|end_turn|>; its
header too when it continues an unended assistant turn; the <|role|> halt signal after an
unended assistant message)."""


# --------------------------------------------------------------------------- data


def real_threads(realdata: Path) -> tuple[list[Thread], pipeline.Account]:
    """Every thread of the real files (records that are not conversations are skipped), in
    a seeded shuffle: any prefix, and every batch, mixes the sources."""
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

    def message(self, message: Message, mark: str) -> Message:
        """`message` with its content made distinct."""
        return dataclasses.replace(message, content=self.text(message.content, mark))


def cycled(items: Sequence[Any], count: int) -> Iterator[tuple[int, Any]]:
    """`count` items, cycling through `items`, numbered from 0."""
    for number in range(count):
        yield number, items[number % len(items)]


def unique_threads(real: Sequence[Thread], count: int) -> list[Thread]:
    """`count` threads cycled from `real`, each with its own id and no content repeated."""
    unique = Unique()
    return [
        Thread(
            f"bench-{n:07d}",
            [unique.message(m, f"{n}.{k}") for k, m in enumerate(thread.messages)],
            thread.settings,
        )
        for n, thread in cycled(real, count)
    ]


def real_pairs(real: Sequence[Thread]) -> list[tuple[Message, Message]]:
    """Every user message answered by an assistant message that ends its turn."""
    return [
        (first, second)
        for thread in real
        for first, second in zip(thread.messages, thread.messages[1:], strict=False)
        if first.role == "user" and second.role == "assistant" and second.end_turn
    ]


def turn_threads(real: Sequence[Thread], long_threads: int) -> tuple[list[Thread], list[Thread]]:
    """2-turn and 200-turn threads holding the same unique (user, assistant) pairs."""
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


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """`items` in slices of `size`, as the runs take them."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def pieces(batch: Sequence[Thread]) -> list[str]:
    """The distinct text pieces the Renderer encodes for `batch`, in its order."""
    found: dict[str, None] = {}
    for thread in batch:
        for m in thread.messages:
            found[m.role] = None
            if m.role == "context" and m.name:
                found[m.name] = None
            if m.role == "assistant":
                found[m.format or "markdown"] = None
            found[m.content] = None
    return list(found)


def chat_messages(thread: Thread) -> list[dict[str, Any]]:
    """A thread's messages as chat-template dicts (transformers drops the None fields)."""
    return [m.all_fields() for m in thread.messages]


def every_kth(threads: Sequence[Thread], count: int) -> list[Thread]:
    """`count` threads spread evenly over `threads`."""
    step = max(1, len(threads) // count)
    return list(threads[::step][:count])


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class Job:
    """A timed run: what it covers and the call that does it."""

    name: str
    threads: Sequence[Thread]
    run: Callable[[], None]


@dataclass(frozen=True, slots=True)
class Figures:
    """A job's fastest run; tokens are the rendered tokens of the threads it covers."""

    name: str
    threads: int
    messages: int
    tokens: int
    seconds: float
    tokens_per_s: float
    cpu_per_wall: float
    all_seconds: tuple[float, ...]


class Data(NamedTuple):
    """The threads every tokenizer's runs cover (built once, untimed)."""

    main: list[Thread]
    hf_main: list[Thread]
    short: list[Thread]
    long: list[Thread]
    hf_short: list[Thread]
    hf_long: list[Thread]


class Setup(NamedTuple):
    """One tokenizer's objects and the data sets its runs cover."""

    loaded: LoadedTokenizer
    renderer: Renderer
    hf: PreTrainedTokenizerFast
    data: Data


def raw_job(setup: Setup, batch: int) -> Callable[[], None]:
    """The base tokenizer on exactly the text the Renderer encodes, per batch."""
    base = setup.loaded.tokenizer
    texts = [pieces(b) for b in batches(setup.data.main, batch)]

    def run() -> None:
        for strings in texts:
            # the ids taken out of the Encodings, as any user of them must (the Renderer too)
            [e.ids for e in base.encode_batch(strings, add_special_tokens=False)]

    return run


def encoder_job(setup: Setup, batch: int) -> Callable[[], None]:
    """The Renderer's own text encoder (tiktoken, where it stands in for `tokenizers`) on
    the same text as raw: the floor of the Renderer's encoding."""
    encoder = setup.loaded.text_encoder
    texts = [pieces(b) for b in batches(setup.data.main, batch)]

    def run() -> None:
        for strings in texts:
            encoder.encode_ids(strings)

    return run


def renderer_job(renderer: Renderer, threads: Sequence[Thread], batch: int) -> Callable[[], None]:
    """`Renderer.encode_batch` over `threads`, `batch` threads per call."""
    parts = batches(threads, batch)

    def run() -> None:
        for part in parts:
            renderer.encode_batch(part)

    return run


def hf_call(hf: PreTrainedTokenizerFast, conversation: Any) -> Any:
    """transformers' route to ids and an assistant mask, with the §4 template."""
    return hf.apply_chat_template(
        conversation,
        chat_template=TEMPLATE,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )


def hf_job(
    hf: PreTrainedTokenizerFast, threads: Sequence[Thread], batch: int
) -> Callable[[], None]:
    """transformers per thread (`batch` 1) or per batch of conversations."""
    conversations = [chat_messages(t) for t in threads]
    calls = conversations if batch == 1 else batches(conversations, batch)

    def run() -> None:
        for conversation in calls:
            hf_call(hf, conversation)

    return run


def jobs(setup: Setup, batch: int) -> list[Job]:
    """Every timed run, in the order they alternate; 200-turn batches hold as many
    messages as 2-turn ones."""
    long_batch = max(1, batch * SHORT_TURNS // LONG_TURNS)
    encoder = setup.loaded.text_encoder.name
    own = (
        []
        if encoder == "tokenizers"
        else [Job(f"raw {encoder}", setup.data.main, encoder_job(setup, batch))]
    )
    return [
        Job("raw encode_batch", setup.data.main, raw_job(setup, batch)),
        *own,
        Job("Renderer", setup.data.main, renderer_job(setup.renderer, setup.data.main, batch)),
        Job(
            "transformers, per thread", setup.data.hf_main, hf_job(setup.hf, setup.data.hf_main, 1)
        ),
        Job(
            "transformers, batched", setup.data.hf_main, hf_job(setup.hf, setup.data.hf_main, batch)
        ),
        Job(
            "Renderer, 2-turn",
            setup.data.short,
            renderer_job(setup.renderer, setup.data.short, batch),
        ),
        Job(
            "Renderer, 200-turn",
            setup.data.long,
            renderer_job(setup.renderer, setup.data.long, long_batch),
        ),
        Job("transformers, 2-turn", setup.data.hf_short, hf_job(setup.hf, setup.data.hf_short, 1)),
        Job("transformers, 200-turn", setup.data.hf_long, hf_job(setup.hf, setup.data.hf_long, 1)),
    ]


def measure(
    runs: Sequence[Job], repeat: int, tokens: Callable[[Sequence[Thread]], int]
) -> list[Figures]:
    """Run every job `repeat` times, alternating; keep each one's fastest time."""
    wall: dict[str, list[float]] = {job.name: [] for job in runs}
    cpu: dict[str, list[float]] = {job.name: [] for job in runs}
    for attempt in range(1, repeat + 1):
        for job in runs:
            print(f"run {attempt}/{repeat}: {job.name} ...", flush=True)
            start, start_cpu = time.perf_counter(), time.process_time()
            job.run()
            wall[job.name].append(time.perf_counter() - start)
            cpu[job.name].append(time.process_time() - start_cpu)
    figures = []
    for job in runs:
        best = min(range(repeat), key=wall[job.name].__getitem__)
        seconds, count = wall[job.name][best], tokens(job.threads)
        figures.append(
            Figures(
                name=job.name,
                threads=len(job.threads),
                messages=sum(len(t.messages) for t in job.threads),
                tokens=count,
                seconds=round(seconds, 3),
                tokens_per_s=round(count / seconds),
                cpu_per_wall=round(cpu[job.name][best] / seconds, 2),
                all_seconds=tuple(round(s, 3) for s in wall[job.name]),
            )
        )
    return figures


# --------------------------------------------------------------------------- checks


def literal_specials(setup: Setup) -> tuple[str, ...]:
    """Texts transformers matches as special ids but the Renderer encodes as plain text."""
    controls = set(setup.loaded.control_tokens)
    return tuple(
        added.content
        for added in setup.renderer.tokenizer.get_added_tokens_decoder().values()
        if added.special or added.content in controls
    )


def holds_literal(thread: Thread, literals: Sequence[str]) -> bool:
    """Whether a content or name of `thread` holds one of `literals`."""
    return any(
        literal in text
        for m in thread.messages
        for text in (m.content, m.name or "")
        for literal in literals
    )


def compare_transformers(setup: Setup) -> dict[str, Any]:
    """transformers' ids and labels against the Renderer's on the transformers threads."""
    literals = literal_specials(setup)
    threads = setup.data.hf_main + setup.data.hf_short + setup.data.hf_long
    same = expected_differ = 0
    differ: list[str] = []
    for thread in threads:
        out = hf_call(setup.hf, chat_messages(thread))
        labels = [
            i if m else IGNORE
            for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True)
        ]
        mine = setup.renderer.encode(thread)
        if (list(out["input_ids"]), labels) == (mine.input_ids, mine.labels):
            same += 1
        elif holds_literal(thread, literals):
            expected_differ += 1
        else:
            differ.append(thread.id)
    return {
        "threads": len(threads),
        "with_unended_turn": sum(map(unended_turn, threads)),
        "same": same,
        "literal_special_text": expected_differ,
        "differ": differ,
    }


def unended_turn(thread: Thread) -> bool:
    """An assistant message that does not end its turn (a tool call): the halt labels."""
    return any(m.role == "assistant" and m.end_turn is False for m in thread.messages)


# --------------------------------------------------------------------------- profile


class Frame(NamedTuple):
    """What `lint.where` reads from a frame."""

    filename: str
    lineno: int


def profile(
    renderer: Renderer, threads: Sequence[Thread], batch: int, top: int
) -> list[dict[str, Any]]:
    """cProfile of one Renderer pass: the `top` functions by own time."""
    run = renderer_job(renderer, threads, batch)
    profiler = cProfile.Profile()
    profiler.runcall(run)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [
        {
            "where": f"{where(Frame(file, line))}({name})" if line else name,
            "calls": calls,
            "own_s": round(own, 3),
            "cumulative_s": round(cumulative, 3),
        }
        for (file, line, name), (_, calls, own, cumulative, _) in rows
    ]


# --------------------------------------------------------------------------- main


def build(args: argparse.Namespace) -> tuple[Data, dict[str, Any]]:
    """The data sets from the real files, and what they hold."""
    real, stats = real_threads(args.realdata)
    main = unique_threads(real, args.threads)
    short, long = turn_threads(real, args.long_threads)
    hf_long = long[: args.hf_long_threads]
    hf_short = short[: len(hf_long) * LONG_TURNS // SHORT_TURNS]
    data = Data(main, every_kth(main, args.hf_threads), short, long, hf_short, hf_long)
    built = {
        "files": len(stats.files),
        "records": stats.records_read,
        "records_not_threads": stats.quarantined_total,
        "real_threads": len(real),
        "real_pairs": len(real_pairs(real)),
        **{name: len(threads) for name, threads in data._asdict().items()},
    }
    print(
        f"read {len(real):,} real threads from {built['files']} files "
        f"({built['records_not_threads']:,} records are not conversations); built "
        f"{len(main):,} unique threads, {len(short):,} 2-turn and {len(long):,} "
        f"{LONG_TURNS}-turn threads from {built['real_pairs']:,} real user/assistant pairs"
    )
    return data, built


def make_setup(spec: Path, data: Data) -> Setup:
    """The Renderer and a transformers tokenizer sharing its augmented tokenizer."""
    loaded = load_tokenizer(spec)
    renderer = Renderer(loaded)
    hf = PreTrainedTokenizerFast(tokenizer_object=renderer.tokenizer)
    return Setup(loaded, renderer, hf, data)


def token_counts(setup: Setup, batch: int) -> dict[str, int]:
    """Every thread's rendered tokens, by id (an untimed pass that also warms up)."""
    counts: dict[str, int] = {}
    for threads in (setup.data.main, setup.data.short, setup.data.long):
        for part in batches(threads, batch):
            encoded = setup.renderer.encode_batch(part)
            counts.update(zip((t.id for t in part), encoded.num_tokens.to_pylist(), strict=True))
    return counts


def text_tokens(setup: Setup, batch: int) -> int:
    """The tokens raw encode_batch produces for the main threads."""
    base = setup.loaded.tokenizer
    return sum(
        len(e.ids)
        for part in batches(setup.data.main, batch)
        for e in base.encode_batch(pieces(part), add_special_tokens=False)
    )


def ratio(figures: dict[str, Figures], numerator: str, denominator: str) -> float:
    """tokens/s of one run over another's."""
    return round(figures[numerator].tokens_per_s / figures[denominator].tokens_per_s, 2)


def ratios(figures: Sequence[Figures]) -> dict[str, float]:
    """The Renderer against raw, transformers, and itself on long threads."""
    named = {f.name: f for f in figures}
    own = next(
        (name for name in named if name.startswith("raw ") and name != "raw encode_batch"), None
    )
    return {
        "renderer_over_raw": ratio(named, "Renderer", "raw encode_batch"),
        **({"renderer_over_own_encoder": ratio(named, "Renderer", own)} if own else {}),
        "renderer_over_transformers": ratio(named, "Renderer", "transformers, per thread"),
        "renderer_over_transformers_batched": ratio(named, "Renderer", "transformers, batched"),
        "renderer_200_over_2_turns": ratio(named, "Renderer, 200-turn", "Renderer, 2-turn"),
        "transformers_200_over_2_turns": ratio(
            named, "transformers, 200-turn", "transformers, 2-turn"
        ),
    }


def targets(found: dict[str, float]) -> dict[str, bool]:
    """Issue 6's targets, met or not (reported, never asserted)."""
    return {
        f"renderer >= {TARGET_RAW}x raw": found["renderer_over_raw"] >= TARGET_RAW,
        f"renderer >= {TARGET_HF}x transformers": found["renderer_over_transformers"] >= TARGET_HF,
        f"200-turn within {TARGET_SCALING:.0%} of 2-turn": abs(
            found["renderer_200_over_2_turns"] - 1
        )
        <= TARGET_SCALING,
    }


def run_tokenizer(spec: Path, data: Data, args: argparse.Namespace) -> dict[str, Any]:
    """Every run for one tokenizer, its ratios, the transformers check and the profile."""
    print(f"\ntokenizer {spec}", flush=True)
    setup = make_setup(spec, data)
    counts = token_counts(setup, args.batch)
    figures = measure(
        jobs(setup, args.batch), args.repeat, lambda threads: sum(counts[t.id] for t in threads)
    )
    found = ratios(figures)
    result = {
        "tokenizer": str(spec),
        "special_ids": setup.renderer.special_ids.as_dict(),
        "raw_text_tokens": text_tokens(setup, args.batch),
        "runs": [asdict(f) for f in figures],
        "ratios": found,
        "targets": targets(found),
        "check": compare_transformers(setup),
    }
    if args.profile:
        result["profile"] = profile(setup.renderer, setup.data.main, args.batch, args.profile)
    print_tokenizer(result, figures)
    return result


def print_tokenizer(result: dict[str, Any], figures: Sequence[Figures]) -> None:
    print()
    header = ("run", "threads", "messages", "tokens", "seconds", "tokens/s", "CPU/wall")
    lines = [header] + [
        (
            f.name,
            f"{f.threads:,}",
            f"{f.messages:,}",
            f"{f.tokens:,}",
            f"{f.seconds:.3f}",
            f"{f.tokens_per_s:,.0f}",
            f"{f.cpu_per_wall:.2f}",
        )
        for f in figures
    ]
    print_aligned(lines)
    found, check = result["ratios"], result["check"]
    print(
        f"\nRenderer / raw encode_batch: {found['renderer_over_raw']:.2f}x tokens/s; "
        f"Renderer / transformers: {found['renderer_over_transformers']:.2f}x per thread, "
        f"{found['renderer_over_transformers_batched']:.2f}x batched; 200-turn / 2-turn: "
        f"Renderer {found['renderer_200_over_2_turns']:.2f}, transformers "
        f"{found['transformers_200_over_2_turns']:.2f}"
    )
    if "renderer_over_own_encoder" in found:
        print(
            f"Renderer / its own text encoder on the same text: "
            f"{found['renderer_over_own_encoder']:.2f}x tokens/s"
        )
    print(f"raw encode_batch encodes {result['raw_text_tokens']:,} text tokens of the main set")
    for target, met in result["targets"].items():
        print(f"target {target}: {'met' if met else 'MISSED'}")
    print(
        f"transformers = Renderer on {check['same']:,} of {check['threads']:,} threads "
        f"({check['with_unended_turn']:,} with an unended assistant turn); "
        f"{check['literal_special_text']:,} differ as expected (literal special-token text), "
        f"{len(check['differ']):,} otherwise"
    )
    if "profile" in result:
        print()
        print_aligned(
            [("Renderer pass, by own time", "calls", "own s", "cumulative s")]
            + [
                (p["where"], f"{p['calls']:,}", f"{p['own_s']:.3f}", f"{p['cumulative_s']:.3f}")
                for p in result["profile"]
            ]
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tokenizer",
        type=Path,
        action="append",
        help=f"a tokenizer to run (repeatable; default {DEFAULT_TOKENIZER})",
    )
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="unique threads")
    parser.add_argument(
        "--hf-threads", type=int, default=DEFAULT_HF_THREADS, help="of them, for transformers"
    )
    parser.add_argument(
        "--long-threads",
        type=int,
        default=DEFAULT_LONG_THREADS,
        help=f"{LONG_TURNS}-turn threads (and {LONG_TURNS // SHORT_TURNS} times as many 2-turn)",
    )
    parser.add_argument(
        "--hf-long-threads",
        type=int,
        default=DEFAULT_HF_LONG_THREADS,
        help="of them, for transformers",
    )
    parser.add_argument("--batch", type=int, default=BATCH_THREADS, help="threads per batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each job; fastest kept")
    parser.add_argument("--quick", action="store_true", help="smoke run: small sets, one run")
    parser.add_argument(
        "--realdata", type=Path, default=DEFAULT_REALDATA, help="the real files' folder"
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="cProfile a Renderer pass: top N"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    args.tokenizer = args.tokenizer or [DEFAULT_TOKENIZER]
    sizes = (args.threads, args.hf_threads, args.long_threads, args.hf_long_threads)
    if min(*sizes, args.batch, args.repeat) < 1:
        parser.error("sizes, --batch and --repeat must be positive")
    if args.hf_threads > args.threads or args.hf_long_threads > args.long_threads:
        parser.error("transformers runs cover a part of the threads: at most as many")
    if not args.realdata.is_dir():
        parser.error(f"no real data at {args.realdata}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    data, built = build(args)
    results = [run_tokenizer(spec, data, args) for spec in args.tokenizer]
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"\nload average (1, 5, 15 min): before {load['before']}, after {load['after']}")
    problems = [
        f"{r['tokenizer']}: transformers differs from the Renderer on {r['check']['differ'][:5]}"
        for r in results
        if r["check"]["differ"]
    ]
    if args.json:
        figures = {
            "data": built,
            "batch": args.batch,
            "repeat": args.repeat,
            "tokenizers": results,
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": load,
            "problems": problems,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
