"""Benchmark `mms run` end to end on short and long threads holding the same text: tokens/s
of 2-turn threads against 200-turn threads (the same unique (user, assistant) pairs, one
after the other), so any cost that grows faster than the thread (a rule rescanning earlier
messages, a quadratic render) shows as a lower 200-turn rate.

Run from the repository root; the real files come from $MMS_SHARED/realdata, the tokenizer
from $MMS_SHARED/tokenizers (default ../shared):

    python benchmarks/thread_length.py                 # 100 x 200 turns, best of 3, ~1 min
    python benchmarks/thread_length.py --long-threads 400 --repeat 2 --json figures.json

What it does: builds the pairs (harness/corpus.py's `turn_threads`: real pairs whose
assistant ends its turn, every content made unique), writes them as MMS JSONL twice
(`--long-threads` x 100 2-turn threads, and `--long-threads` 200-turn threads), with the run
benchmark's config for each (lint, dedup, tokenize, one split, two workers; max_tokens
large enough that no 200-turn thread is cut), then runs `python -m pipeline.cli run` on
each in a child process, alternating, `--repeat` times; the fastest of each is kept.
tokens/s is each run's manifest `counts.tokens` over its wall time. Timings are reported,
never asserted; the exit status is 1 when a run fails or the two shapes' token counts differ.
"""

from __future__ import annotations

import argparse
import sys

from harness.corpus import (
    LONG_TURNS,
    SHORT_TURNS,
    manifest_counts,
    real_threads,
    turn_threads,
    write_config,
    write_threads,
)
from harness.options import add_data, add_run, fail, work_folder, write_json
from harness.procs import load_average, run_child
from harness.table import print_aligned
from harness.trees import headline, mms_command

MAX_TOKENS = 1 << 20
"""No 200-turn thread is cut: both shapes encode every token of the same text."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long-threads", type=int, default=100, help="200-turn threads")
    add_data(parser)
    add_run(parser, repeat=3)
    args = parser.parse_args(argv)
    with work_folder(args.workdir) as workdir:
        real, _ = real_threads(args.realdata)
        short_threads, long_threads = turn_threads(real, args.long_threads)
        shapes = {f"{SHORT_TURNS}-turn": short_threads, f"{LONG_TURNS}-turn": long_threads}
        configs = {}
        for name, threads in shapes.items():
            source = workdir / f"{name}.jsonl"
            write_threads(threads, source)
            configs[name] = workdir / f"{name}.yaml"
            output = workdir / f"out-{name}"
            write_config(configs[name], source, output, args.tokenizer, max_tokens=MAX_TOKENS)
        seconds: dict[str, list[float]] = {name: [] for name in shapes}
        for _ in range(args.repeat):
            for name, config in configs.items():
                command = [*mms_command(), "run", str(config), "--fresh"]
                run = run_child(name, command, workdir / f"{name}.log")
                if run.returncode != 0:
                    return fail([f"mms run of the {name} threads exited {run.returncode}"])
                seconds[name].append(run.seconds)
        tokens = {name: manifest_counts(workdir / f"out-{name}")["tokens"] for name in shapes}
    rates = {name: tokens[name] / min(seconds[name]) for name in shapes}
    short, long = shapes
    lines = [("threads", "count", "messages", "tokens", "seconds", "tokens/s", "x 2-turn")]
    lines += [
        (
            name,
            f"{len(shapes[name]):,}",
            f"{sum(len(t.messages) for t in shapes[name]):,}",
            f"{tokens[name]:,}",
            f"{min(seconds[name]):.2f}",
            f"{rates[name]:,.0f}",
            f"{rates[name] / rates[short]:.2f}",
        )
        for name in shapes
    ]
    print(f"mms run on {SHORT_TURNS}-turn and {LONG_TURNS}-turn threads, {args.tokenizer.name}:")
    print_aligned(lines)
    print(f"seconds: the fastest of {args.repeat} runs each, in turn ({seconds})")
    headline(
        lower={f"{name} s": min(seconds[name]) for name in shapes},
        higher={"200-turn / 2-turn tokens/s": round(rates[long] / rates[short], 3)},
    )
    figures = {
        "tokenizer": str(args.tokenizer),
        "threads": {name: len(found) for name, found in shapes.items()},
        "tokens": tokens,
        "seconds": seconds,
        "long_over_short": round(rates[long] / rates[short], 3),
        "load_average_after": load_average(),
    }
    write_json(args.json, figures)
    # the same messages in both shapes render the same tokens
    if tokens[short] != tokens[long]:
        return fail([f"{tokens}: the two shapes should render the same tokens"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
