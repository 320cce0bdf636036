"""`mms run` against raw `tokenizers.Tokenizer.encode_batch`, one tokenizer family at a
time, on the same unique real threads: the ratio of their times over the same threads
(>= 1.0 wanted for every family). Lighter than run.py: no datasets route, no memory run.

Run from the repository root; the real files come from $MMS_SHARED/realdata, the
tokenizers from $MMS_SHARED/tokenizers (default ../shared):

    python benchmarks/families.py --threads 50000 --repeat 2
    python benchmarks/families.py --threads 2000 --family phi-3-mini     # a smoke run

1. build (untimed): --threads real threads, cycled and made unique (harness/corpus.py),
   one MMS JSONL file; per family, the run benchmarks' config on it (lint, dedup,
   tokenize with the family's tokenizer, one split, two workers).
2. per family, --repeat rounds, alternating: raw `encode_batch` over exactly the text
   pieces the Renderer encodes (harness/routes.py, in this process, 1,024 threads a
   batch: `tokenizers` uses every core), then `mms run CONFIG --fresh` in a child
   process (from its start to its exit: the interpreter's start, the tokenizer's load
   and every stage count against it). Each route's fastest round is kept.

Timings are reported, never asserted; the exit status is 1 when a run fails or writes
other than one row per thread."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.corpus import (
    manifest_rows,
    real_threads,
    unique_threads,
    write_config,
    write_threads,
)
from harness.options import add_data, add_run, fail, work_folder, write_json
from harness.procs import ChildRun, best_of, checked, run_child
from harness.routes import BATCH_THREADS, make_setup, raw_job
from harness.table import print_aligned
from harness.timing import alternate
from harness.trees import mms_command

SHARED = Path(os.environ.get("MMS_SHARED", "../shared"))
FAMILIES = ("llama3_from_tiktoken", "qwen2.5_from_tiktoken", "phi-3-mini")
"""Byte-level BPE (Llama-3, Qwen2.5) and SentencePiece-style BPE (Phi-3)."""
TARGET = 1.0
"""`mms run` must take no longer than raw encode_batch on the same threads."""


def family(
    name: str, threads: Sequence[object], source: Path, workdir: Path, repeat: int
) -> dict[str, object]:
    """One family's rounds: raw encode_batch's fastest and `mms run`'s fastest."""
    tokenizer = SHARED / "tokenizers" / name
    config, output = workdir / f"run-{name}.yaml", workdir / f"out-{name}"
    write_config(config, source, output, tokenizer)
    raw = raw_job(make_setup(tokenizer), threads, BATCH_THREADS)
    runs: list[ChildRun] = []

    def mms() -> None:
        argv = [*mms_command(), "run", str(config), "-o", str(output), "--fresh"]
        log = workdir / f"mms-{name}.log"
        runs.append(checked(run_child(f"mms run {name}", argv, log), log))

    timed = alternate({"raw": raw, "mms": mms}, repeat)
    best = best_of(runs)
    return {
        "family": name,
        "raw_s": timed["raw"].seconds,
        "mms_s": best.seconds,
        "mms_cpu_s": best.cpu_seconds,
        "ratio": round(timed["raw"].seconds / best.seconds, 2),
        "rows": manifest_rows(output),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=50_000, help="unique real threads")
    parser.add_argument(
        "--family",
        action="append",
        choices=FAMILIES,
        help=f"a tokenizer under $MMS_SHARED/tokenizers (repeatable; default: {', '.join(FAMILIES)})",
    )
    add_data(parser, tokenizer=False)
    add_run(parser, repeat=2)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeat < 1:
        parser.error("--threads and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with work_folder(args.workdir) as workdir:
        real, _ = real_threads(args.realdata)
        threads = unique_threads(real, args.threads)
        source = workdir / "input.jsonl"
        write_threads(threads, source)
        found = [
            family(name, threads, source, workdir, args.repeat) for name in args.family or FAMILIES
        ]
    print(f"\n{args.threads:,} unique real threads; best of {args.repeat}, alternating")
    print_aligned(
        [("family", "raw encode_batch s", "mms run s (CPU)", f"mms / raw (>= {TARGET})")]
        + [
            (
                str(row["family"]),
                f"{row['raw_s']:.2f}",
                f"{row['mms_s']:.2f} ({row['mms_cpu_s']:.2f})",
                f"{row['ratio']:.2f}x",
            )
            for row in found
        ]
    )
    write_json(args.json, {"threads": args.threads, "families": found})
    return fail(
        [
            f"{row['family']}: mms run wrote {row['rows']:,} rows of {args.threads:,} threads"
            for row in found
            if row["rows"] != args.threads
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
