"""Benchmark `mms stats` on an output and on the same output replicated four times: wall
time and the peak memory of its process (polars' streaming scans should keep it flat).

Run from the repository root; the real files come from $MMS_SHARED/realdata, the tokenizer
from $MMS_SHARED/tokenizers (default ../shared):

    python benchmarks/stats.py                    # 20,000 threads, 1x and 4x, best of 3
    python benchmarks/stats.py --threads 50000 --repeat 2 --json figures.json

What it does: writes --threads unique real threads and runs `mms run` on them once (the run
benchmark's config: lint, dedup, tokenize with Llama-3, one split): the 1x output. The 4x
output is a folder whose `data/` holds each of the 1x shards four times under shard names
of its own (the same rows four times: what the scans read grows four-fold). Then
`python -m pipeline.cli stats OUT --by source --output-format json` runs in a child process
on each, alternating, --repeat times; the fastest time of each is kept, and the peak
memory (sum of PSS over the child's process tree, sampled every 0.05 s) of the last run of
each is reported. Timings are reported, never asserted; the exit status is 1 when a run
fails or the 4x threads are not four times the 1x ones.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from harness import MIB
from harness.corpus import real_threads, unique_threads, write_config, write_threads
from harness.options import add_data, add_run, fail, work_folder, write_json
from harness.procs import checked, run_child
from harness.table import print_aligned
from harness.trees import headline, mms_command

GROWTH = 4


def build(args: argparse.Namespace, workdir: Path) -> dict[int, Path]:
    """The 1x output of a real run, and the GROWTH x folder of its shards repeated."""
    real, _ = real_threads(args.realdata)
    source = workdir / "input.jsonl"
    write_threads(unique_threads(real, args.threads), source)
    config = workdir / "run.yaml"
    one = workdir / "out-1x"
    write_config(config, source, one, args.tokenizer)
    log = workdir / "run.log"
    checked(run_child("mms run", [*mms_command(), "run", str(config), "--fresh"], log), log)
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
    add_data(parser)
    add_run(parser, repeat=3)
    args = parser.parse_args(argv)
    with work_folder(args.workdir) as workdir:
        try:
            outputs = build(args, workdir)
        except RuntimeError as err:
            return fail([str(err)])
        seconds: dict[int, list[float]] = {scale: [] for scale in outputs}
        peaks: dict[int, float] = {}
        threads: dict[int, int] = {}
        for attempt in range(args.repeat):
            for scale, out in outputs.items():
                json_file = workdir / f"stats-{scale}x.json"
                command = [*mms_command(), "stats", str(out), "--by", "source"]
                command += ["--output-format", "json", "-o", str(json_file)]
                last = attempt == args.repeat - 1
                log = workdir / "stats.log"
                run = run_child(f"stats {scale}x", command, log, interval=0.05 if last else None)
                if run.returncode != 0:
                    return fail([f"mms stats on {out} exited {run.returncode}"])
                seconds[scale].append(run.seconds)
                if last:
                    peaks[scale] = run.peak_pss_mb
                    splits = json.loads(json_file.read_text())["splits"]
                    threads[scale] = sum(split["threads"] for split in splits.values())
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
    headline(
        lower={
            **{f"stats {scale}x s": min(found) for scale, found in seconds.items()},
            **{f"stats {scale}x peak PSS MiB": peak for scale, peak in peaks.items()},
        }
    )
    figures = {"threads": threads, "seconds": seconds, "peak_pss_mb": peaks, "bytes": sizes}
    write_json(args.json, figures)
    if threads[GROWTH] != GROWTH * threads[1]:
        return fail([f"{threads}: the 4x output should hold four times the threads"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
