"""Benchmark a small `mms run`: the wall time of a whole run of 100 real threads with a
128k-vocabulary tokenizer, as a curator iterating on a config pays it, with the tokenizer
proofs cache cold (a new cache folder) and warm (the folder of the run before).

Run from the repository root; the real files come from ../shared/realdata, the tokenizer
from ../shared/tokenizers:

    python benchmarks/small_job.py                 # 100 threads, 3 runs each, ~30 s
    python benchmarks/small_job.py --threads 1000 --repeat 5 --json figures.json

Each run is `python -m pipeline.cli run CONFIG --fresh` in a child process, timed from its
start to its exit (imports included). The config is the run benchmark's (lint, dedup,
tokenize with truncation, one split) with one worker. Timings are reported, never asserted;
the exit status is 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from convert import make_workdir
from ingest import DEFAULT_REALDATA, REPO_ROOT
from run import write_config, write_threads
from tokenizing import DEFAULT_TOKENIZER, real_threads, unique_threads


def add_child_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark timing `mms run` children: --repeat, --tokenizer,
    --realdata, --workdir and --json."""
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    parser.add_argument("--realdata", type=Path, default=DEFAULT_REALDATA)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)


def timed_run(config: Path, cache: Path) -> float:
    """Seconds of one `mms run` in a child process with the proofs cache `cache`."""
    environment = {**os.environ, "MMS_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "--fresh"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"mms run failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100)
    add_child_run_options(parser)
    args = parser.parse_args(argv)
    workdir, _ = make_workdir(args.workdir)
    real, _ = real_threads(args.realdata)
    source = workdir / "input.jsonl"
    write_threads(unique_threads(real, args.threads), source)
    config = workdir / "run.yaml"
    write_config(config, source, workdir / "out", args.tokenizer, workers=1)
    cold, warm = [], []
    for attempt in range(args.repeat):
        cache = workdir / f"cache-{attempt}"
        cold.append(timed_run(config, cache))  # a new cache folder: every proof is made
        warm.append(timed_run(config, cache))  # the same folder: every proof is remembered
    figures = {
        "threads": args.threads,
        "tokenizer": str(args.tokenizer),
        "cold_seconds": cold,
        "warm_seconds": warm,
    }
    print(f"mms run, {args.threads} threads, {args.tokenizer.name}, one worker:")
    print(f"  cold proofs cache: {min(cold):.2f} s (median {statistics.median(cold):.2f})")
    print(f"  warm proofs cache: {min(warm):.2f} s (median {statistics.median(warm):.2f})")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
