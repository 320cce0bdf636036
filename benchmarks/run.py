"""Benchmark `mms run` end to end on real threads (MMS JSONL in, tokenized Parquet shards out):
tokens/s against raw `tokenizers.Tokenizer.encode_batch` over the same bodies and against the
usual route, `datasets.load_dataset("json")` -> `map(apply_chat_template)` -> `to_parquet`; the
peak memory of both routes, and of `mms run` at 1x and 4x the input.

Run from the repository root, with the package, datasets and transformers installed; the real
files come from ../shared/realdata, the tokenizer from ../shared/tokenizers:

    python benchmarks/run.py                   # 20,000 threads (80,000 for memory), ~4 min
    python benchmarks/run.py --quick           # smoke run: 500 threads, ~50 s
    python benchmarks/run.py --workdir /tmp/mms-run-bench --json figures.json --profile 25

1. build (untimed): the real threads, cycled and made unique as benchmarks/tokenizing.py does
   (every message content already used anywhere gets ` [N.K]`; each thread its own id), written
   as MMS JSONL: --threads of them (the 1x file) and GROWTH times as many (the 4x file, whose
   first --threads lines are the 1x file). A config per file (YAML): that file read as `mms`;
   lint with the default rules, `fail_on: never`; `min_trained_tokens: 0`, so that every thread
   is written; dedup; tokenize (--tokenizer, max_tokens 32768, overlong truncate); one `train`
   split; engine workers 2.
2. runs, one after the other, each once:
   raw: `Tokenizer.encode_batch(pieces, add_special_tokens=False)` in this process, per batch
   of 1,024 threads, `pieces` being the distinct texts the Renderer encodes for that batch
   (benchmarks/tokenizing.py's `raw_job`), built before timing; and, when mms run encodes
   with tiktoken (the tokenizer is one it reproduces exactly), tiktoken on the same pieces;
   mms run 1x: `python -m pipeline.cli run CONFIG -o OUT --fresh` in a child process;
   datasets: in a child process, `load_dataset("json", data_files=1x)`, `.map(batched=True,
   num_proc=2)` of `apply_chat_template(messages, chat_template=TEMPLATE, tokenize=True,
   return_dict=True, return_assistant_tokens_mask=True)` (TEMPLATE being DESIGN §4, from
   benchmarks/tokenizing.py) and `.to_parquet`, with HF_DATASETS_CACHE in a fresh folder;
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
import cProfile
import json
import os
import pstats
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import datasets
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml
from convert import make_workdir, tail
from ingest import DEFAULT_REALDATA, MIB, REPO_ROOT
from lint import where
from table import print_aligned
from tokenizing import (
    BATCH_THREADS,
    DEFAULT_TOKENIZER,
    Data,
    Frame,
    encoder_job,
    hf_call,
    make_setup,
    raw_job,
    real_threads,
    unique_threads,
)
from transformers import PreTrainedTokenizerFast

from pipeline.jobs.run import run_pipeline
from pipeline.jobs.run.config import load_run_config
from pipeline.mms import Thread

DEFAULT_THREADS = 20_000
QUICK_THREADS = 500
GROWTH = 4
"""The memory run reads a file GROWTH times as large as the 1x file."""
MAX_TOKENS = 32768
"""Long enough that no real thread is truncated with any tokenizer (Phi-3 makes some of them
longer than 8,192 tokens), so every route encodes the same threads whole."""
WORKERS = 2
"""`engine.workers` of mms run and `num_proc` of the datasets map."""
SAMPLE_SECONDS = 0.05
TARGET_RAW = 0.6
"""mms run's tokens/s must be at least this share of raw encode_batch's."""
TARGET_PEERS = 2.0
"""mms run must be at least this many times as fast as the datasets route."""
PEERS_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


# --------------------------------------------------------------------------- input


def write_threads(threads: Sequence[Thread], path: Path) -> int:
    """`threads` as MMS JSONL at `path`; the bytes written."""
    written = 0
    with open(path, "wb", buffering=MIB) as out:
        for thread in threads:
            written += out.write(thread.to_json_line())
    return written


def write_config(
    path: Path,
    source: Path,
    output: Path,
    tokenizer: Path,
    partition: str | None = None,
    *,
    max_tokens: int = MAX_TOKENS,
    workers: int = WORKERS,
) -> None:
    """The pipeline config (YAML) of a benchmark run on `source` (`partition`: the
    engine's, when given)."""
    config = {
        "name": f"run-benchmark-{source.stem}",
        "inputs": [{"path": str(source), "format": "mms"}],
        "stages": {
            # the real threads' media point at files ../shared does not hold: text only
            "normalize": {"multimodal": "drop"},
            "lint": {"fail_on": "never"},
            "filters": {"min_trained_tokens": 0},
            "dedup": {"enabled": True},
            "tokenize": {
                "tokenizer": str(tokenizer.resolve()),
                "max_tokens": max_tokens,
                "overlong": "truncate",
            },
            "shard": {"splits": {"train": 1.0}},
        },
        "output": str(output),
        "engine": {"workers": workers, **({"partition": partition} if partition else {})},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


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


# --------------------------------------------------------------------------- process trees


def descendants(root: int) -> list[int]:
    """`root` and every process under it, from the parent ids in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def kib(text: str, name: str) -> int:
    """The `name:` line of a /proc file, in KiB (0 when absent, as for a zombie)."""
    for line in text.splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return 0


@dataclass(slots=True)
class TreePeak:
    """The memory peaks of a process tree, sampled."""

    pss_kib: int = 0
    """Highest sum of the processes' PSS in one sample."""
    rss_kib: int = 0
    """Highest sum of the processes' RSS in one sample (shared pages counted in each)."""
    hwm_kib: int = 0
    """Highest VmHWM of one process (the kernel's peak RSS of that process)."""
    pids: set[int] = field(default_factory=set)
    samples: int = 0

    def sample(self, root: int) -> None:
        pss = rss = 0
        for pid in descendants(root):
            try:
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:  # ended meanwhile
                continue
            self.pids.add(pid)
            pss += kib(rollup, "Pss:")
            rss += kib(rollup, "Rss:")
            self.hwm_kib = max(self.hwm_kib, kib(status, "VmHWM:"))
        self.pss_kib, self.rss_kib = max(self.pss_kib, pss), max(self.rss_kib, rss)
        self.samples += 1


@dataclass(frozen=True, slots=True)
class TreeRun:
    """A child process run: wall and CPU time (the child's and its reaped descendants'), and
    its process tree's memory peaks."""

    name: str
    returncode: int
    seconds: float
    cpu_seconds: float
    peak_pss_mb: float
    peak_rss_sum_mb: float
    largest_hwm_mb: float
    processes: int
    samples: int


def run_tree(
    name: str, argv: Sequence[str], log: Path, env: dict[str, str], interval: float | None
) -> TreeRun:
    """Run `argv` (stdout and stderr to `log`), sampling its process tree every `interval`
    seconds until it ends; with `interval` None, only timed (reading /proc costs CPU the
    child would otherwise have: timed runs are not sampled)."""
    with open(log, "wb") as log_file:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT
        )
        peak = TreePeak()
        ended = os.pidfd_open(proc.pid)
        try:
            while interval is not None:
                peak.sample(proc.pid)
                if select.select([ended], [], [], interval)[0]:
                    break
        finally:
            os.close(ended)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
    return TreeRun(
        name=name,
        returncode=proc.returncode,
        seconds=round(seconds, 3),
        cpu_seconds=round(usage.ru_utime + usage.ru_stime, 2),
        peak_pss_mb=round(peak.pss_kib / 1024, 1),
        peak_rss_sum_mb=round(peak.rss_kib / 1024, 1),
        largest_hwm_mb=round(peak.hwm_kib / 1024, 1),
        processes=len(peak.pids),
        samples=peak.samples,
    )


def checked(run: TreeRun, log: Path) -> TreeRun:
    """`run`, or RuntimeError with the end of its log when it failed."""
    if run.returncode != 0:
        raise RuntimeError(f"{run.name} exited with {run.returncode}:\n{tail(log)}")
    return run


# --------------------------------------------------------------------------- runs


def mms_run(inputs: Inputs, scale: int, workdir: Path, interval: float | None) -> TreeRun:
    """`mms run` of the `scale`x config in a child process (sampled every `interval` s)."""
    name = f"mms run {scale}x"
    print(f"{name} ({'memory' if interval else 'timed'}) ...", flush=True)
    argv = [sys.executable, "-m", "pipeline.cli", "run", str(inputs.configs[scale])]
    argv += ["-o", str(inputs.outputs[scale]), "--fresh"]
    log = workdir / f"mms-run-{scale}x.log"
    return checked(run_tree(name, argv, log, dict(os.environ), interval), log)


def peers_run(
    inputs: Inputs, args: argparse.Namespace, workdir: Path, interval: float | None
) -> tuple[TreeRun, Path]:
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
    return checked(run_tree(name, argv, log, env, interval), log), target


def peer_batch(hf: PreTrainedTokenizerFast, batch: dict[str, list[Any]]) -> Any:
    """One `map` batch: the §4 template's ids and assistant masks of its conversations."""
    return hf_call(hf, batch["messages"])


def peers_child(source: Path, target: Path, tokenizer: Path) -> dict[str, Any]:
    """The datasets route, timed by phase (printed as JSON for the parent)."""
    start = time.perf_counter()
    hf = make_setup(tokenizer, Data([], [], [], [], [], [])).hf
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
    print("raw encode_batch ...", flush=True)
    setup = make_setup(tokenizer, Data(inputs.threads, [], [], [], [], []))
    encoder = setup.loaded.text_encoder.name
    jobs = {"raw encode_batch": raw_job(setup, BATCH_THREADS)}
    if encoder != "tokenizers":
        jobs[f"raw {encoder}"] = encoder_job(setup, BATCH_THREADS)
    found = {}
    for name, run in jobs.items():
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        seconds = time.perf_counter() - start
        cpu = time.process_time() - start_cpu
        found[name] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 2)}
    return found


def manifest_counts(output: Path) -> dict[str, Any]:
    """The counts of a finished mms run, from its manifest."""
    counts: dict[str, Any] = json.loads((output / "manifest.json").read_text())["counts"]
    return counts


def parquet_tokens(path: Path) -> tuple[int, int]:
    """Rows and tokens (`input_ids` lengths) of a Parquet file, read a batch at a time."""
    rows = tokens = 0
    for batch in pq.ParquetFile(path).iter_batches(columns=["input_ids"]):
        rows += batch.num_rows
        tokens += pc.sum(pc.list_value_length(batch.column(0))).as_py() or 0
    return rows, tokens


# --------------------------------------------------------------------------- profile


def profile_run(config: Path, output: Path, top: int) -> dict[str, Any]:
    """cProfile of `run_pipeline` in this process with one worker: the `top` functions by own
    time, and the `top` repository functions by cumulative time (the stages)."""
    print("profile: mms run 1x in-process, workers=1 ...", flush=True)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(run_pipeline, load_run_config(config), output=output, workers=1)
    seconds = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [
        {
            "where": f"{where(Frame(file, line))}({name})" if line else name,
            "calls": calls,
            "own_s": round(own, 3),
            "cumulative_s": round(cumulative, 3),
            "in_repo": str(REPO_ROOT) in file,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in stats.items()
    ]
    by_own = sorted(rows, key=lambda row: row["own_s"], reverse=True)[:top]
    repo = [row for row in rows if row["in_repo"]]
    by_cumulative = sorted(repo, key=lambda row: row["cumulative_s"], reverse=True)[:top]
    return {"seconds": round(seconds, 2), "by_own": by_own, "by_cumulative": by_cumulative}


def print_profile(found: dict[str, Any]) -> None:
    print(f"\nprofile of mms run 1x, in-process, workers=1: {found['seconds']:.1f} s")
    for key, title in (("by_cumulative", "repository, by cumulative"), ("by_own", "by own time")):
        print()
        print_aligned(
            [(title, "calls", "own s", "cumulative s")]
            + [
                (p["where"], f"{p['calls']:,}", f"{p['own_s']:.3f}", f"{p['cumulative_s']:.3f}")
                for p in found[key]
            ]
        )


# --------------------------------------------------------------------------- report


def figures(
    inputs: Inputs,
    raw: dict[str, dict[str, float]],
    timed: dict[str, TreeRun],
    runs: dict[str, TreeRun],
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
    parser.add_argument(
        "--tokenizer", type=Path, default=DEFAULT_TOKENIZER, help="the base tokenizer"
    )
    parser.add_argument(
        "--realdata", type=Path, default=DEFAULT_REALDATA, help="the real files' folder"
    )
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
    load_before = os.getloadavg()
    inputs = build(args, workdir)
    raws: list[dict[str, dict[str, float]]] = []
    timed: dict[str, list[TreeRun]] = {"mms 1x": [], "peers": []}
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
    peers = json.loads((workdir / "peers-1x.log").read_text().splitlines()[-1])
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
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }
    print_results(result)
    print(f"load average (1, 5, 15 min): before {load_before}, after {os.getloadavg()}")
    if args.profile:
        result["profile"] = profile_run(inputs.configs[1], workdir / "out-profile", args.profile)
        print_profile(result["profile"])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peers_child:
        print(json.dumps(peers_child(*args.peers_child)))
        return 0
    workdir, created = make_workdir(args.workdir)
    try:
        result = benchmark(args, workdir)
        problems = check(result)
    except RuntimeError as err:
        result, problems = {}, [str(err)]
    finally:
        if args.workdir is None and created:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept the files in {workdir}")
    if args.json and result:
        result["runs"] = {key: asdict(run) for key, run in result["runs"].items()}
        result["timed"] = {key: asdict(run) for key, run in result["timed"].items()}
        args.json.write_text(json.dumps({**result, "problems": problems}, indent=2) + "\n")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
