"""Benchmark `mms stats` on an output and on the same output replicated four times: wall
time and the peak memory of its process (polars' streaming scans should keep it flat).

Run from the repository root; the real files come from ../shared/realdata, the tokenizer
from ../shared/tokenizers:

    python benchmarks/stats.py                    # 20,000 threads, 1x and 4x, best of 3
    python benchmarks/stats.py --threads 50000 --repeat 2 --json figures.json

What it does: writes --threads unique real threads (as benchmarks/run.py builds them) and
runs `mms run` on them once (lint, dedup, tokenize with Llama-3, one split): the 1x output.
The 4x output is a folder whose `data/` holds each of the 1x shards four times under shard
names of its own (the same rows four times: what the scans read grows four-fold). Then
`python -m pipeline.cli stats OUT --by source --output-format json` runs in a child process
on each, alternating, --repeat times; the fastest time of each is kept, and the peak
memory (sum of PSS over the child's process tree, sampled every 0.05 s) of the last run of
each is reported. Timings are reported, never asserted; the exit status is 1 when a run
fails or the 4x threads are not four times the 1x ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from convert import make_workdir
from run import GROWTH, run_tree, write_config, write_threads
from small_job import add_child_run_options
from table import print_aligned
from tokenizing import real_threads, unique_threads

MIB = 1 << 20


def build(args: argparse.Namespace, workdir: Path) -> dict[int, Path]:
    """The 1x output of a real run, and the GROWTH x folder of its shards repeated."""
    real, _ = real_threads(args.realdata)
    source = workdir / "input.jsonl"
    write_threads(unique_threads(real, args.threads), source)
    config = workdir / "run.yaml"
    one = workdir / "out-1x"
    write_config(config, source, one, args.tokenizer)
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config), "--fresh"]
    subprocess.run(command, check=True, capture_output=True)
    many = workdir / f"out-{GROWTH}x"
    (many / "data").mkdir(parents=True, exist_ok=True)
    shards = sorted((one / "data").glob("*.parquet"))
    total = len(shards) * GROWTH
    for copy in range(GROWTH):
        for index, shard in enumerate(shards):
            number = copy * len(shards) + index
            shutil.copy(shard, many / "data" / f"train-{number:05d}-of-{total:05d}.parquet")
    return {1: one, GROWTH: many}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20_000)
    add_child_run_options(parser)
    args = parser.parse_args(argv)
    workdir, created = make_workdir(args.workdir)
    try:
        outputs = build(args, workdir)
        seconds: dict[int, list[float]] = {scale: [] for scale in outputs}
        peaks: dict[int, float] = {}
        threads: dict[int, int] = {}
        for attempt in range(args.repeat):
            for scale, out in outputs.items():
                json_file = workdir / f"stats-{scale}x.json"
                command = [sys.executable, "-m", "pipeline.cli", "stats", str(out), "--by"]
                command += ["source", "--output-format", "json", "-o", str(json_file)]
                last = attempt == args.repeat - 1
                run = run_tree(
                    f"stats {scale}x",
                    command,
                    workdir / "stats.log",
                    dict(os.environ),
                    0.05 if last else None,
                )
                if run.returncode != 0:
                    print(f"FAIL: mms stats on {out} exited {run.returncode}")
                    return 1
                seconds[scale].append(run.seconds)
                if last:
                    peaks[scale] = run.peak_pss_mb
                    figures = json.loads(json_file.read_text())["splits"]
                    threads[scale] = sum(split["threads"] for split in figures.values())
        sizes = {
            scale: sum(p.stat().st_size for p in (out / "data").glob("*.parquet"))
            for scale, out in outputs.items()
        }
        lines = [("output", "threads", "Parquet MiB", "seconds", "peak PSS MiB")]
        lines += [
            (
                f"{scale}x",
                f"{threads[scale]:,}",
                f"{sizes[scale] / MIB:.1f}",
                f"{min(seconds[scale]):.2f}",
                f"{peaks[scale]:.1f}",
            )
            for scale in outputs
        ]
        print_aligned(lines)
        print(f"seconds: the fastest of {args.repeat} each, in turn ({seconds})")
        if args.json is not None:
            figures = {"threads": threads, "seconds": seconds, "peak_pss_mb": peaks, "bytes": sizes}
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        if threads[GROWTH] != GROWTH * threads[1]:
            print(f"FAIL: {threads}: the 4x output should hold four times the threads")
            return 1
        return 0
    finally:
        if created and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
