"""Benchmark `mms convert` on a large MMS JSONL file against an orjson round-trip baseline.

Run from the repository root:

    python benchmarks/convert.py                  # 1 GiB input (a few minutes)
    python benchmarks/convert.py --size-mb 20     # smoke run
    python benchmarks/convert.py --json out.json --keep --workdir /tmp/mms-bench
    python benchmarks/convert.py --repeat 3       # best of 3 runs each
    python benchmarks/convert.py --workers 1,2,4  # convert with 1, 2 and 4 workers

Child processes, one after the other:

1. generate: writes a seeded, deterministic MMS JSONL file of about --size-mb MiB of
   varied threads (harness/synthetic.py) into the work directory (never the repo);
2. baseline: reads that file line by line, `orjson.loads` + `orjson.dumps` each line
   to an output file: the floor any converter pays;
3. convert: `mms convert INPUT -o OUT --from mms --quarantine Q --workers N`, once for
   each N of --workers (default 1 and 2); with N > 1 the file is read in parts of about
   8 MiB by N worker processes, and every N must write the same bytes.

Peak RSS and CPU time come from `os.wait4` on the child. Linux charges a child the RSS of
its parent at spawn time, so this script keeps itself small: generation runs in a child
too, and the script never imports `pipeline`.

The exit status is 1 when convert fails, writes a different number of threads than were
generated, quarantines anything, writes other bytes with other workers, or peaks at >= 300
MiB RSS in a process (it must stream). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from harness import DEFAULT_SEED, MIB
from harness.options import fail, make_workdir, write_json
from harness.procs import ChildRun, best_of, count_lines, file_digest, load_average, run_child, tail
from harness.synthetic import generate
from harness.table import print_aligned
from harness.trees import headline, mms_command

RSS_LIMIT_MB = 300
"""Convert must stay below this peak RSS (MiB) whatever the input size."""
DEFAULT_SIZE_MB = 1024
DEFAULT_WORKERS = "1,2"
WORK_FILES = ("input.jsonl", "baseline.jsonl", "baseline.log")


def baseline(src: Path, dst: Path) -> int:
    """The floor: parse and re-serialise every line with orjson, nothing else."""
    count = 0
    with open(src, "rb", buffering=MIB) as fin, open(dst, "wb", buffering=MIB) as fout:
        for line in fin:
            if line.strip():
                fout.write(orjson.dumps(orjson.loads(line), option=orjson.OPT_APPEND_NEWLINE))
                count += 1
    return count


def row(run: ChildRun, threads: int, size_bytes: int) -> dict[str, Any]:
    """A run's figures: time, CPU, throughput and peak RSS."""
    mb = size_bytes / MIB
    return {
        "name": run.name,
        "threads": threads,
        "mb": round(mb, 1),
        "seconds": round(run.seconds, 2),
        "cpu_seconds": round(run.cpu_seconds, 2),
        "threads_per_s": round(threads / run.seconds),
        "mb_per_s": round(mb / run.seconds, 1),
        "peak_rss_mb": run.peak_rss_mb,
        "parent_rss_mb": run.parent_rss_mb,
        "all_seconds": run.all_seconds,
    }


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = ("run", "threads", "MiB", "seconds", "CPU s", "threads/s", "MiB/s", "peak RSS MiB")
    keys = ("threads", "mb", "seconds", "cpu_seconds", "threads_per_s", "mb_per_s", "peak_rss_mb")
    formats = ("{:,}", "{:,.1f}", "{:.2f}", "{:.2f}", "{:,.0f}", "{:.1f}", "{:.1f}")
    lines = [header] + [
        (r["name"], *(f.format(r[k]) for f, k in zip(formats, keys, strict=True))) for r in rows
    ]
    print_aligned(lines)


def check(run: ChildRun, expected: int, written: int, quarantined: int) -> list[str]:
    problems = []
    if run.returncode != 0:
        problems.append(f"{run.name} exited with {run.returncode}")
    if written != expected:
        problems.append(f"{run.name} wrote {written:,} threads, expected {expected:,}")
    if quarantined:
        problems.append(f"{run.name} quarantined {quarantined:,} records")
    if run.peak_rss_mb >= RSS_LIMIT_MB:
        problems.append(
            f"{run.name} peaked at {run.peak_rss_mb:.1f} MiB RSS "
            f"(limit {RSS_LIMIT_MB} MiB): it is not streaming"
        )
    return problems


def convert_files(workdir: Path, workers: int) -> tuple[Path, Path, Path]:
    """The output, quarantine and log of the convert run with `workers`."""
    stem = workdir / f"convert-w{workers}"
    return stem.with_suffix(".jsonl"), stem.with_suffix(".rejected.jsonl"), stem.with_suffix(".log")


def benchmark(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[str]]:
    script = [sys.executable, str(Path(__file__).resolve())]
    source, base_out = workdir / "input.jsonl", workdir / "baseline.jsonl"
    print(f"generating ~{args.size_mb:g} MiB of MMS threads in {source} (seed {args.seed}) ...")
    start = time.perf_counter()
    argv = [*script, "--generate-child", str(source), "--size-mb", str(args.size_mb)]
    done = subprocess.run([*argv, "--seed", str(args.seed)], check=True, capture_output=True)
    gen = {**json.loads(done.stdout), "seconds": round(time.perf_counter() - start, 2)}
    size = gen["bytes"]
    print(
        f"generated {gen['threads']:,} threads, {gen['messages']:,} messages, "
        f"{size / MIB:,.1f} MiB in {gen['seconds']:.1f} s"
    )
    load_before = load_average()
    base_runs: list[ChildRun] = []
    conv_runs: dict[int, list[ChildRun]] = {workers: [] for workers in args.workers}
    for attempt in range(1, args.repeat + 1):
        print(f"run {attempt}/{args.repeat}: baseline (orjson loads + dumps per line) ...")
        base_argv = [*script, "--baseline-child", str(source), str(base_out)]
        base_runs.append(run_child("baseline", base_argv, workdir / "baseline.log"))
        for workers in args.workers:
            out, rejected, log = convert_files(workdir, workers)
            print(f"run {attempt}/{args.repeat}: mms convert --workers {workers} ...")
            conv_argv = [*mms_command(), "convert", str(source), "-o", str(out), "--from", "mms"]
            conv_argv += ["--quarantine", str(rejected), "--workers", str(workers)]
            conv_runs[workers].append(run_child(f"convert --workers {workers}", conv_argv, log))
    load_after = load_average()
    base = best_of(base_runs)
    convs = {workers: best_of(runs) for workers, runs in conv_runs.items()}

    baseline_written = count_lines(base_out) if base_out.exists() else 0
    problems = []
    if base.returncode != 0 or baseline_written != gen["threads"]:
        problems.append(f"baseline exited with {base.returncode}, wrote {baseline_written:,}")
    outputs = {}
    for workers, conv in convs.items():
        out, rejected, log = convert_files(workdir, workers)
        written = count_lines(out) if out.exists() else 0
        quarantined = count_lines(rejected) if rejected.exists() else 0
        problems += check(conv, gen["threads"], written, quarantined)
        if conv.returncode != 0:
            print(tail(log), file=sys.stderr)
        outputs[str(workers)] = {
            "threads": written,
            "quarantined": quarantined,
            "mb": round(out.stat().st_size / MIB, 1) if out.exists() else 0,
            "sha256": file_digest(out),
            "quarantine_sha256": file_digest(rejected),
        }
    if len({(o["sha256"], o["quarantine_sha256"]) for o in outputs.values()}) > 1:
        problems.append("mms convert wrote other bytes with other --workers")

    rows = [row(base, gen["threads"], size)]
    rows += [row(conv, gen["threads"], size) for conv in convs.values()]
    ratio = {str(w): round(conv.seconds / base.seconds, 2) for w, conv in convs.items()}
    result = {
        "size_mb": round(size / MIB, 1),
        "seed": args.seed,
        "repeat": args.repeat,
        "generate": gen,
        "runs": rows,
        "baseline_output_threads": baseline_written,
        "convert_outputs": outputs,
        "time_ratio": ratio,
        "load_average": {"before": load_before, "after": load_after},
        "rss_limit_mb": RSS_LIMIT_MB,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "problems": problems,
    }
    print()
    print_table(rows)
    print()
    for workers, conv in convs.items():
        print(
            f"convert --workers {workers} / baseline: {ratio[str(workers)]:.2f}x the time, "
            f"{base.seconds / conv.seconds:.1%} of the throughput; "
            f"peak RSS {conv.peak_rss_mb:.1f} MiB (limit {RSS_LIMIT_MB} MiB)"
        )
    print(f"load average before the runs: {load_before}; after: {load_after}")
    headline(
        lower={
            **{f"convert --workers {w} s": c.seconds for w, c in convs.items()},
            **{f"convert --workers {w} / baseline": ratio[str(w)] for w in convs},
            "convert peak RSS MiB": max(c.peak_rss_mb for c in convs.values()),
        }
    )
    return result, problems


def _worker_counts(text: str) -> tuple[int, ...]:
    """`1,2` -> (1, 2): positive and distinct."""
    counts = tuple(int(part) for part in text.split(","))
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"expected distinct positive counts like 1,2, not {text}")
    return counts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=DEFAULT_SIZE_MB, help="input MiB")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workdir", type=Path, help="where to write (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of baseline and convert, alternating"
    )
    parser.add_argument(
        "--workers",
        type=_worker_counts,
        default=DEFAULT_WORKERS,
        help=f"convert with each of these --workers, comma-separated (default {DEFAULT_WORKERS})",
    )
    parser.add_argument("--generate-child", nargs=1, metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-child", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.size_mb <= 0:
        parser.error("--repeat and --size-mb must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.generate_child:
        counts = generate(Path(args.generate_child[0]), int(args.size_mb * MIB), args.seed)
        print(json.dumps(counts))
        return 0
    if args.baseline_child:
        src, dst = args.baseline_child
        print(f"baseline wrote {baseline(Path(src), Path(dst)):,} lines")
        return 0
    workdir, created = make_workdir(args.workdir)
    try:
        result, problems = benchmark(args, workdir)
    finally:
        if args.keep:
            print(f"kept the files in {workdir}")
        elif created:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            for path in [workdir / name for name in WORK_FILES] + [
                p for w in args.workers for p in convert_files(workdir, w)
            ]:
                path.unlink(missing_ok=True)
    write_json(args.json, result)
    return fail(problems)


if __name__ == "__main__":
    sys.exit(main())
