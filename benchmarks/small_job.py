"""Benchmark a small `mms run`: the wall time of a whole run of 100 real threads with a
128k-vocabulary tokenizer, as a curator iterating on a config pays it, with the tokenizer
proofs cache cold (a new cache folder) and warm (the folder of the run before).

Run from the repository root; the real files come from $MMS_SHARED/realdata, the tokenizer
from $MMS_SHARED/tokenizers (default ../shared):

    python benchmarks/small_job.py                 # 100 threads, 3 runs each, ~30 s
    python benchmarks/small_job.py --threads 1000 --repeat 5 --json figures.json

Each run is `python -m pipeline.cli run CONFIG --fresh` in a child process, timed from its
start to its exit (imports included). The config is the run benchmark's (lint, dedup,
tokenize with truncation, one split) with one worker. Timings are reported, never asserted;
the exit status is 1 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from harness.corpus import real_threads, unique_threads, write_config, write_threads
from harness.options import add_data, add_run, work_folder, write_json
from harness.procs import checked, run_child
from harness.trees import headline, mms_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100)
    add_data(parser)
    add_run(parser, repeat=3)
    args = parser.parse_args(argv)
    with work_folder(args.workdir) as workdir:
        real, _ = real_threads(args.realdata)
        source = workdir / "input.jsonl"
        write_threads(unique_threads(real, args.threads), source)
        config = workdir / "run.yaml"
        write_config(config, source, workdir / "out", args.tokenizer, workers=1)
        command = [*mms_command(), "run", str(config), "--fresh"]
        cold: list[float] = []
        warm: list[float] = []
        try:
            for attempt in range(args.repeat):
                # a new cache folder: every proof is made; the same again: every proof kept
                env = {**os.environ, "MMS_CACHE_DIR": str(workdir / f"cache-{attempt}")}
                for found in (cold, warm):
                    log = workdir / "run.log"
                    found.append(checked(run_child("mms run", command, log, env=env), log).seconds)
        except RuntimeError as err:
            sys.exit(f"mms run failed: {err}")
    print(f"mms run, {args.threads} threads, {args.tokenizer.name}, one worker:")
    print(f"  cold proofs cache: {min(cold):.2f} s (median {statistics.median(cold):.2f})")
    print(f"  warm proofs cache: {min(warm):.2f} s (median {statistics.median(warm):.2f})")
    headline(lower={"cold proofs cache s": min(cold), "warm proofs cache s": min(warm)})
    figures = {"threads": args.threads, "tokenizer": str(args.tokenizer)}
    write_json(args.json, {**figures, "cold_seconds": cold, "warm_seconds": warm})
    return 0


if __name__ == "__main__":
    sys.exit(main())
