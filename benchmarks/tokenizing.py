"""Benchmark the `mms-v0` Renderer on real threads: tokens/s against raw
`tokenizers.Tokenizer.encode_batch` over the same text, against transformers'
`apply_chat_template` with a §4 template, and on 2-turn against 200-turn threads.

Run from the repository root, with the package and transformers installed; the real files
come from $MMS_SHARED/realdata, the tokenizers from $MMS_SHARED/tokenizers (default ../shared):

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
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from harness import DEFAULT_TOKENIZER
from harness.corpus import (
    LONG_TURNS,
    SHORT_TURNS,
    real_pairs,
    real_threads,
    turn_threads,
    unique_threads,
)
from harness.options import add_data, fail, write_json
from harness.procs import load_average
from harness.routes import (
    BATCH_THREADS,
    Setup,
    batches,
    chat_messages,
    hf_call,
    hf_job,
    make_setup,
    pieces,
    raw_jobs,
    renderer_job,
)
from harness.table import print_aligned
from harness.timing import Timed, alternate, profile_table, profiled
from harness.trees import headline

from pipeline.mms import Thread
from pipeline.tokenize import IGNORE

DEFAULT_THREADS = 20_000
DEFAULT_HF_THREADS = 2_000
DEFAULT_LONG_THREADS = 50
DEFAULT_HF_LONG_THREADS = 5
QUICK = {"threads": 1_000, "hf_threads": 100, "long_threads": 5, "hf_long_threads": 1, "repeat": 1}
TARGET_RAW = 0.8
"""The Renderer's tokens/s must be at least this share of raw encode_batch's."""
TARGET_HF = 2.0
"""The Renderer must be at least this many times as fast as per-thread transformers."""
TARGET_SCALING = 0.2
"""200-turn tokens/s within this fraction of 2-turn tokens/s."""


class Data(NamedTuple):
    """The threads every tokenizer's runs cover (built once, untimed)."""

    main: list[Thread]
    hf_main: list[Thread]
    short: list[Thread]
    long: list[Thread]
    hf_short: list[Thread]
    hf_long: list[Thread]


def every_kth(threads: Sequence[Thread], count: int) -> list[Thread]:
    """`count` threads spread evenly over `threads`."""
    step = max(1, len(threads) // count)
    return list(threads[::step][:count])


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


def jobs(
    setup: Setup, data: Data, batch: int
) -> dict[str, tuple[Sequence[Thread], Callable[[], None]]]:
    """Every timed run and the threads it covers, in the order they alternate; 200-turn
    batches hold as many messages as 2-turn ones."""
    long_batch = max(1, batch * SHORT_TURNS // LONG_TURNS)
    found: dict[str, tuple[Sequence[Thread], Callable[[], None]]] = {
        name: (data.main, job) for name, job in raw_jobs(setup, data.main, batch).items()
    }
    found["Renderer"] = (data.main, renderer_job(setup.renderer, data.main, batch))
    found["transformers, per thread"] = (data.hf_main, hf_job(setup.hf, data.hf_main, 1))
    found["transformers, batched"] = (data.hf_main, hf_job(setup.hf, data.hf_main, batch))
    found["Renderer, 2-turn"] = (data.short, renderer_job(setup.renderer, data.short, batch))
    found["Renderer, 200-turn"] = (data.long, renderer_job(setup.renderer, data.long, long_batch))
    found["transformers, 2-turn"] = (data.hf_short, hf_job(setup.hf, data.hf_short, 1))
    found["transformers, 200-turn"] = (data.hf_long, hf_job(setup.hf, data.hf_long, 1))
    return found


def measure(
    runs: dict[str, tuple[Sequence[Thread], Callable[[], None]]],
    repeat: int,
    tokens: Callable[[Sequence[Thread]], int],
) -> list[Figures]:
    """Every job `repeat` times, alternating; each one's fastest run, in tokens/s."""
    found: dict[str, Timed] = alternate({name: job for name, (_, job) in runs.items()}, repeat)
    figures = []
    for name, (threads, _) in runs.items():
        timed, count = found[name], tokens(threads)
        figures.append(
            Figures(
                name=name,
                threads=len(threads),
                messages=sum(len(t.messages) for t in threads),
                tokens=count,
                seconds=timed.seconds,
                tokens_per_s=round(count / timed.seconds),
                cpu_per_wall=timed.cpu_per_wall,
                all_seconds=timed.all_seconds,
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


def compare_transformers(setup: Setup, data: Data) -> dict[str, Any]:
    """transformers' ids and labels against the Renderer's on the transformers threads."""
    literals = literal_specials(setup)
    threads = data.hf_main + data.hf_short + data.hf_long
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


def token_counts(setup: Setup, data: Data, batch: int) -> dict[str, int]:
    """Every thread's rendered tokens, by id (an untimed pass that also warms up)."""
    counts: dict[str, int] = {}
    for threads in (data.main, data.short, data.long):
        for part in batches(threads, batch):
            encoded = setup.renderer.encode_batch(part)
            counts.update(zip((t.id for t in part), encoded.num_tokens.to_pylist(), strict=True))
    return counts


def text_tokens(setup: Setup, data: Data, batch: int) -> int:
    """The tokens raw encode_batch produces for the main threads."""
    base = setup.loaded.tokenizer
    return sum(
        len(e.ids)
        for part in batches(data.main, batch)
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
    """The targets, met or not (reported, never asserted)."""
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
    setup = make_setup(spec)
    counts = token_counts(setup, data, args.batch)
    figures = measure(
        jobs(setup, data, args.batch),
        args.repeat,
        lambda threads: sum(counts[t.id] for t in threads),
    )
    found = ratios(figures)
    result = {
        "tokenizer": str(spec),
        "special_ids": setup.renderer.special_ids.as_dict(),
        "raw_text_tokens": text_tokens(setup, data, args.batch),
        "runs": [asdict(f) for f in figures],
        "ratios": found,
        "targets": targets(found),
        "check": compare_transformers(setup, data),
    }
    if args.profile:
        run = renderer_job(setup.renderer, data.main, args.batch)
        result["profile"] = profiled(run, args.profile)["by_own"]
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
        print_aligned(profile_table("Renderer pass, by own time", result["profile"]))


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
    add_data(parser, tokenizer=False)
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
    load_before = load_average()
    data, built = build(args)
    results = [run_tokenizer(spec, data, args) for spec in args.tokenizer]
    load = {"before": load_before, "after": load_average()}
    print(f"\nload average (1, 5, 15 min): before {load['before']}, after {load['after']}")
    problems = [
        f"{r['tokenizer']}: transformers differs from the Renderer on {r['check']['differ'][:5]}"
        for r in results
        if r["check"]["differ"]
    ]
    first = {f["name"]: f for f in results[0]["runs"]}
    headline(
        lower={f"{name} s": first[name]["seconds"] for name in ("Renderer", "Renderer, 200-turn")},
        higher={
            key: results[0]["ratios"][key]
            for key in ("renderer_over_raw", "renderer_over_transformers")
        },
    )
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
    write_json(args.json, figures)
    return fail(problems)


if __name__ == "__main__":
    sys.exit(main())
