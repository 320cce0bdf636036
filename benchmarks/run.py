"""Benchmark `mms run` end to end on real threads (MMS JSONL in, tokenized Parquet shards out):
tokens/s against raw `tokenizers.Tokenizer.encode_batch` over the same bodies and against the
usual route, `datasets.load_dataset("json")` -> `map(apply_chat_template)` -> `to_parquet`; the
peak memory of both routes, and of `mms run` at 1x and 4x the input.

Run from the repository root, with the package, datasets and transformers installed; the real
files come from $MMS_SHARED/realdata, the tokenizer from $MMS_SHARED/tokenizers (default
../shared):

    python benchmarks/run.py                   # 20,000 threads (80,000 for memory), ~4 min
    python benchmarks/run.py --quick           # smoke run: 500 threads, ~50 s
    python benchmarks/run.py --workdir /tmp/mms-run-bench --json figures.json --profile 25

1. build (untimed): the real threads, cycled and made unique (harness/corpus.py)
   (every message content already used anywhere gets ` [N.K]`; each thread its own id), written
   as MMS JSONL: --threads of them (the 1x file) and GROWTH times as many (the 4x file, whose
   first --threads lines are the 1x file). A config per file (YAML): that file read as `mms`;
   lint with the default rules, `fail_on: never`; `min_trained_tokens: 0`, so that every thread
   is written; dedup; tokenize (--tokenizer, max_tokens 32768, overlong truncate); one `train`
   split; engine workers 2.
2. runs, one after the other, each once:
   raw: `Tokenizer.encode_batch(pieces, add_special_tokens=False)` in this process, per batch
   of 1,024 threads, `pieces` being the distinct texts the Renderer encodes for that batch
   (harness/routes.py's `raw_job`), built before timing; and, when mms run encodes
   with tiktoken (the tokenizer is one it reproduces exactly), tiktoken on the same pieces;
   mms run 1x: `python -m pipeline.cli run CONFIG -o OUT --fresh` in a child process;
   datasets: in a child process, `load_dataset("json", data_files=1x)`, `.map(batched=True,
   num_proc=2)` of `apply_chat_template(messages, chat_template=TEMPLATE, tokenize=True,
   return_dict=True, return_assistant_tokens_mask=True)` (TEMPLATE being DESIGN §4, from
   harness/routes.py) and `.to_parquet`, with HF_DATASETS_CACHE in a fresh folder;
   mms run 4x: as 1x, on the 4x file.
3. memory of a child: its process tree (the child and every descendant: the engine's spawned
   workers, datasets' map workers) is sampled every --interval seconds from /proc. The peak is
   the highest sum over the tree of the processes' PSS (proportional set size: a page shared by
   k processes counts 1/k in each, so shared libraries and copy-on-write pages count once); the
   largest single process's VmHWM (the kernel's own peak RSS of it) is given too.

tokens/s counts, for every run, the tokens `mms run` wrote in its shards for the 1x threads, so a
ratio of tokens/s is a ratio of time over the same threads (the datasets route's own count is
given beside it). Timings are reported, never asserted; the exit status is 1 when a child
fails or a run writes other than one row per input thread.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import datasets
import pyarrow.compute as pc
import pyarrow.parquet as pq
from harness import MIB
from harness.corpus import (
    MAX_TOKENS,
    WORKERS,
    manifest_counts,
    real_threads,
    unique_threads,
    write_config,
    write_threads,
)
from harness.options import add_data, fail, work_folder, write_json
from harness.procs import ChildRun, checked, last_json_line, load_average, run_child
from harness.routes import BATCH_THREADS, hf_call, make_setup, raw_jobs
from harness.table import print_aligned
from harness.timing import alternate, profile_table, profiled
from harness.trees import headline, mms_command

from pipeline.jobs.run import run_pipeline
from pipeline.jobs.run.config import load_run_config
from pipeline.mms import Thread

DEFAULT_THREADS = 20_000
QUICK_THREADS = 500
GROWTH = 4
"""The memory run reads a file GROWTH times as large as the 1x file."""
SAMPLE_SECONDS = 0.05
TARGET_RAW = 0.6
"""mms run's tokens/s must be at least this share of raw encode_batch's."""
TARGET_PEERS = 2.0
"""mms run must be at least this many times as fast as the datasets route."""
PEERS_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


# --------------------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class Inputs:
    """The files and configs of the runs, and the 1x threads (for raw encode_batch)."""

    files: dict[int, Path]
    configs: dict[int, Path]
    outputs: dict[int, Path]
    threads: list[Thread]
    built: dict[str, Any]


def build(args: argparse.Namespace, workdir: Path) -> Inputs:
    """The 1x and GROWTH x files from the real threads, and a config for each."""
    real, stats = real_threads(args.realdata)
    every = unique_threads(real, args.threads * GROWTH)
    files = {scale: workdir / f"input-{scale}x.jsonl" for scale in (1, GROWTH)}
    sizes = {
        1: write_threads(every[: args.threads], files[1]),
        GROWTH: write_threads(every, files[GROWTH]),
    }
    outputs = {scale: workdir / f"out-{scale}x" for scale in files}
    configs = {scale: workdir / f"run-{scale}x.yaml" for scale in files}
    for scale, config in configs.items():
        write_config(config, files[scale], outputs[scale], args.tokenizer, args.partition)
    built = {
        "files": len(stats.files),
        "records": stats.records_read,
        "records_not_threads": stats.quarantined_total,
        "real_threads": len(real),
        "threads": {f"{scale}x": args.threads * scale for scale in files},
        "messages_1x": sum(len(t.messages) for t in every[: args.threads]),
        "bytes": {f"{scale}x": size for scale, size in sizes.items()},
    }
    print(
        f"read {len(real):,} real threads from {built['files']} files; wrote {args.threads:,} "
        f"unique threads ({sizes[1] / MIB:.1f} MiB) and {args.threads * GROWTH:,} "
        f"({sizes[GROWTH] / MIB:.1f} MiB)",
        flush=True,
    )
    return Inputs(files, configs, outputs, every[: args.threads], built)


# --------------------------------------------------------------------------- runs


def mms_run(inputs: Inputs, scale: int, workdir: Path, interval: float | None) -> ChildRun:
    """`mms run` of the `scale`x config in a child process (sampled every `interval` s)."""
    name = f"mms run {scale}x"
    print(f"{name} ({'memory' if interval else 'timed'}) ...", flush=True)
    argv = [*mms_command(), "run", str(inputs.configs[scale])]
    argv += ["-o", str(inputs.outputs[scale]), "--fresh"]
    log = workdir / f"mms-run-{scale}x.log"
    return checked(run_child(name, argv, log, interval=interval), log)


def peers_run(
    inputs: Inputs, args: argparse.Namespace, workdir: Path, interval: float | None
) -> tuple[ChildRun, Path]:
    """The datasets route on the 1x file in a child process (sampled every `interval` s);
    its run and its Parquet file."""
    name = "datasets + transformers"
    print(f"{name} ({'memory' if interval else 'timed'}) ...", flush=True)
    cache, target = workdir / "hf-datasets-cache", workdir / "peers-1x.parquet"
    shutil.rmtree(cache, ignore_errors=True)  # nothing to reuse from an earlier run
    env = {**os.environ, **PEERS_ENV, "HF_DATASETS_CACHE": str(cache)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--peers-child"]
    argv += [str(inputs.files[1]), str(target), str(args.tokenizer)]
    log = workdir / "peers-1x.log"
    return checked(run_child(name, argv, log, env=env, interval=interval), log), target


def peer_batch(hf: Any, batch: dict[str, list[Any]]) -> Any:
    """One `map` batch: the §4 template's ids and assistant masks of its conversations."""
    return hf_call(hf, batch["messages"])


def peers_child(source: Path, target: Path, tokenizer: Path) -> dict[str, Any]:
    """The datasets route, timed by phase (printed as JSON for the parent)."""
    start = time.perf_counter()
    hf = make_setup(tokenizer).hf
    ready = time.perf_counter()
    dataset = datasets.load_dataset("json", data_files=str(source), split="train")
    loaded = time.perf_counter()
    mapped = dataset.map(partial(peer_batch, hf), batched=True, num_proc=WORKERS)
    done = time.perf_counter()
    mapped.to_parquet(str(target))
    written = time.perf_counter()
    return {
        "rows": mapped.num_rows,
        "tokenizer_s": round(ready - start, 3),
        "load_dataset_s": round(loaded - ready, 3),
        "map_s": round(done - loaded, 3),
        "to_parquet_s": round(written - done, 3),
    }


def raw_run(inputs: Inputs, tokenizer: Path) -> dict[str, dict[str, float]]:
    """raw encode_batch over the 1x threads' pieces, in this process; and the text encoder
    mms run encodes with, on the same pieces, when it is not `tokenizers` (tiktoken)."""
    setup = make_setup(tokenizer)
    found = alternate(raw_jobs(setup, inputs.threads, BATCH_THREADS), 1)
    return {
        name: {"seconds": timed.seconds, "cpu_seconds": round(timed.cpu_seconds, 2)}
        for name, timed in found.items()
    }


def parquet_tokens(path: Path) -> tuple[int, int]:
    """Rows and tokens (`input_ids` lengths) of a Parquet file, read a batch at a time."""
    rows = tokens = 0
    for batch in pq.ParquetFile(path).iter_batches(columns=["input_ids"]):
        rows += batch.num_rows
        tokens += pc.sum(pc.list_value_length(batch.column(0))).as_py() or 0
    return rows, tokens


# --------------------------------------------------------------------------- report


def figures(
    inputs: Inputs,
    raw: dict[str, dict[str, float]],
    timed: dict[str, ChildRun],
    runs: dict[str, ChildRun],
    peers: dict[str, Any],
) -> dict[str, Any]:
    """tokens/s over the same tokens (the timed runs; 4x: its memory run), the ratios,
    targets and memory growth (the memory runs)."""
    counts = {scale: manifest_counts(inputs.outputs[scale]) for scale in inputs.outputs}
    tokens = counts[1]["tokens"]
    rates = {
        **{name: round(tokens / found["seconds"]) for name, found in raw.items()},
        "mms run 1x": round(tokens / timed["mms 1x"].seconds),
        "datasets + transformers": round(tokens / timed["peers"].seconds),
        f"mms run {GROWTH}x": round(counts[GROWTH]["tokens"] / runs[f"mms {GROWTH}x"].seconds),
    }
    over_raw = round(rates["mms run 1x"] / rates["raw encode_batch"], 3)
    own = next((name for name in raw if name != "raw encode_batch"), None)
    over_own = {"mms_over_own_encoder": round(rates["mms run 1x"] / rates[own], 3)} if own else {}
    over_peers = round(timed["peers"].seconds / timed["mms 1x"].seconds, 3)
    small, large = runs["mms 1x"], runs[f"mms {GROWTH}x"]
    added = inputs.built["threads"][f"{GROWTH}x"] - inputs.built["threads"]["1x"]
    pss = large.peak_pss_mb - small.peak_pss_mb
    return {
        "tokens_1x": tokens,
        "tokens_per_s": rates,
        "mms_over_raw": over_raw,
        **over_own,
        "mms_speedup_over_peers": over_peers,
        "targets": {
            f"mms run >= {TARGET_RAW}x raw tokens/s": over_raw >= TARGET_RAW,
            f"mms run >= {TARGET_PEERS}x as fast as datasets": over_peers >= TARGET_PEERS,
        },
        "memory_growth": {
            "peak_pss_mb": round(pss, 1),
            "pss_bytes_per_added_thread": round(pss * MIB / added),
            "largest_hwm_mb": round(large.largest_hwm_mb - small.largest_hwm_mb, 1),
        },
        "counts": {f"{scale}x": value for scale, value in counts.items()},
        "peers": peers,
    }


def print_results(result: dict[str, Any]) -> None:
    found, runs, raw = result["figures"], result["runs"], result["raw"]
    rates, threads = found["tokens_per_s"], result["built"]["threads"]
    tokens = {f"{s}x": found["counts"][f"{s}x"]["tokens"] for s in (1, GROWTH)}
    header = ("run", "threads", "tokens", "seconds", "CPU s", "tokens/s", "x raw")
    lines = [(*header, "peak PSS MiB", "largest MiB", "procs")]
    lines += [
        (
            name,
            f"{threads['1x']:,}",
            f"{tokens['1x']:,}",
            f"{found_raw['seconds']:.2f}",
            f"{found_raw['cpu_seconds']:.1f}",
            f"{rates[name]:,}",
            f"{rates[name] / rates['raw encode_batch']:.2f}",
            "",
            "",
            "",
        )
        for name, found_raw in raw.items()
    ]
    timed = result["timed"]
    for label, scale, run, clock in (
        ("mms run 1x", "1x", runs["mms 1x"], timed["mms 1x"]),
        ("datasets + transformers", "1x", runs["peers"], timed["peers"]),
        (f"mms run {GROWTH}x", f"{GROWTH}x", runs[f"mms {GROWTH}x"], runs[f"mms {GROWTH}x"]),
    ):
        lines.append(
            (
                label,
                f"{threads[scale]:,}",
                f"{tokens[scale]:,}",
                f"{clock.seconds:.2f}",
                f"{clock.cpu_seconds:.1f}",
                f"{rates[label]:,}",
                f"{rates[label] / rates['raw encode_batch']:.2f}",
                f"{run.peak_pss_mb:.1f}",
                f"{run.largest_hwm_mb:.1f}",
                f"{run.processes}",
            )
        )
    print()
    print_aligned(lines)
    print(
        f"seconds: the fastest of {result['repeat']} unsampled run(s) in turn "
        f"({result['all_seconds']}); {GROWTH}x and the memory columns: one run sampled every "
        f"{result['interval_s']} s"
    )
    peers, growth = found["peers"], found["memory_growth"]
    print(
        f"\nmms run / raw encode_batch: {found['mms_over_raw']:.2f}x tokens/s; mms run is "
        f"{found['mms_speedup_over_peers']:.2f}x as fast as datasets + transformers"
    )
    if "mms_over_own_encoder" in found:
        print(
            f"mms run / its own text encoder on the same text: "
            f"{found['mms_over_own_encoder']:.2f}x tokens/s"
        )
    for target, met in found["targets"].items():
        print(f"target {target}: {'met' if met else 'MISSED'}")
    print(
        f"datasets route: tokenizer {peers['tokenizer_s']:.2f} s, load_dataset "
        f"{peers['load_dataset_s']:.2f} s, map {peers['map_s']:.2f} s, to_parquet "
        f"{peers['to_parquet_s']:.2f} s; {peers['tokens']:,} tokens of its own "
        f"({peers['tokens'] - tokens['1x']:+,} against mms run's, which truncates at {MAX_TOKENS})"
    )
    print(
        f"mms run {GROWTH}x - 1x: peak PSS {growth['peak_pss_mb']:+.1f} MiB "
        f"({growth['pss_bytes_per_added_thread']:+,} B per added thread), largest process "
        f"{growth['largest_hwm_mb']:+.1f} MiB"
    )


def check(result: dict[str, Any]) -> list[str]:
    """Every input thread written once (none quarantined or dropped: no duplicated text), by
    both routes."""
    problems = []
    for scale, counts in result["figures"]["counts"].items():
        expected = result["built"]["threads"][scale]
        written = sum(counts["threads_written"].values())
        if written != expected or counts["threads_dropped"] or counts["records_quarantined"]:
            problems.append(
                f"mms run {scale} wrote {written:,} of {expected:,} threads (dropped "
                f"{counts['threads_dropped']}, quarantined {counts['records_quarantined']})"
            )
        if not counts["balanced"]:
            problems.append(f"mms run {scale}: the counts do not balance")
    peers = result["figures"]["peers"]
    if peers["rows"] != result["built"]["threads"]["1x"]:
        problems.append(f"the datasets route wrote {peers['rows']:,} rows")
    return problems


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="threads at 1x")
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke run: {QUICK_THREADS} threads at 1x"
    )
    add_data(parser)
    parser.add_argument(
        "--workdir", type=Path, help="build (and keep) the files here, not in a temp dir"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=SAMPLE_SECONDS,
        help="seconds between memory samples of a child's process tree",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time raw, mms run 1x and the datasets route this many times in turn; keep the "
        "fastest of each",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="cProfile mms run 1x: top N"
    )
    parser.add_argument(
        "--partition",
        choices=("auto", "always", "never"),
        help="mms run's engine.partition (default: the config's default, auto)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    # Internal: the datasets route's child.
    parser.add_argument("--peers-child", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.threads = QUICK_THREADS
    if args.threads < 1 or args.interval <= 0 or args.repeat < 1 or args.profile < 0:
        parser.error("--threads, --interval and --repeat must be positive, --profile not negative")
    if not args.peers_child and not args.realdata.is_dir():
        parser.error(f"no real data at {args.realdata}")
    return args


def benchmark(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Build; time raw, mms run 1x and the datasets route `--repeat` times in turn (the
    fastest of each kept); then run mms run 1x, the datasets route and mms run 4x once
    more with their memory sampled; gather the figures."""
    load_before = load_average()
    inputs = build(args, workdir)
    raws: list[dict[str, dict[str, float]]] = []
    timed: dict[str, list[ChildRun]] = {"mms 1x": [], "peers": []}
    for _ in range(args.repeat):
        raws.append(raw_run(inputs, args.tokenizer))
        timed["mms 1x"].append(mms_run(inputs, 1, workdir, None))
        timed["peers"].append(peers_run(inputs, args, workdir, None)[0])
    raw = {
        name: min((found[name] for found in raws), key=lambda run: run["seconds"])
        for name in raws[0]
    }
    best = {key: min(runs, key=lambda run: run.seconds) for key, runs in timed.items()}
    runs = {"mms 1x": mms_run(inputs, 1, workdir, args.interval)}
    runs["peers"], peers_file = peers_run(inputs, args, workdir, args.interval)
    runs[f"mms {GROWTH}x"] = mms_run(inputs, GROWTH, workdir, args.interval)
    peers = json.loads(last_json_line(workdir / "peers-1x.log"))
    peers["rows"], peers["tokens"] = parquet_tokens(peers_file)
    result = {
        "built": inputs.built,
        "raw": raw,
        "runs": runs,
        "timed": best,
        "all_seconds": {
            **{name: [found[name]["seconds"] for found in raws] for name in raws[0]},
            **{key: [run.seconds for run in found] for key, found in timed.items()},
        },
        "figures": figures(inputs, raw, best, runs, peers),
        "tokenizer": str(args.tokenizer),
        "partition": args.partition,
        "interval_s": args.interval,
        "repeat": args.repeat,
        "python": sys.version.split()[0],
        "versions": {"datasets": datasets.__version__},
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": load_average()},
    }
    print_results(result)
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_average()}")
    found = result["figures"]
    headline(
        lower={
            "mms run 1x s": best["mms 1x"].seconds,
            f"mms run {GROWTH}x s": runs[f"mms {GROWTH}x"].seconds,
            f"mms run {GROWTH}x peak PSS MiB": runs[f"mms {GROWTH}x"].peak_pss_mb,
        },
        higher={
            "mms run / raw encode_batch": found["mms_over_raw"],
            "mms run / datasets route": found["mms_speedup_over_peers"],
        },
    )
    if args.profile:
        print("profile: mms run 1x in-process, workers=1 ...", flush=True)
        config = load_run_config(inputs.configs[1])
        call = partial(run_pipeline, config, output=workdir / "out-profile", workers=1)
        result["profile"] = profiled(call, args.profile, repo_cumulative=True)
        print(
            f"\nprofile of mms run 1x, in-process, workers=1: {result['profile']['seconds']:.1f} s"
        )
        for key, title in (
            ("by_cumulative", "repository, by cumulative"),
            ("by_own", "by own time"),
        ):
            print()
            print_aligned(profile_table(title, result["profile"][key]))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peers_child:
        print(json.dumps(peers_child(*args.peers_child)))
        return 0
    with work_folder(args.workdir) as workdir:
        try:
            result = benchmark(args, workdir)
            problems = check(result)
        except RuntimeError as err:
            result, problems = {}, [str(err)]
    if result:
        result["runs"] = {key: asdict(run) for key, run in result["runs"].items()}
        result["timed"] = {key: asdict(run) for key, run in result["timed"].items()}
        write_json(args.json, {**result, "problems": problems})
    return fail(problems)


if __name__ == "__main__":
    sys.exit(main())
