"""Benchmark `mms lint` (every rule) on real threads: throughput against reading the same
MMS JSONL, and peak memory at 1x and 4x the data.

Run from the repository root, with the package installed (`pip install -e .`); the real
files come from $MMS_SHARED/realdata (default ../shared/realdata):

    python benchmarks/lint.py                  # 20,000 threads (80,000 for memory), best of 3
    python benchmarks/lint.py --quick          # smoke run: 300 threads, one run, seconds
    python benchmarks/lint.py --data /tmp/mms-lint-bench --json figures.json

1. build: converts the real files to MMS JSONL with `pipeline.jobs.convert` (about 6,900
   threads), then writes --threads of them, cycling through them, each with its own id
   (`bench-0000000` ...): the 1x file. The 4x file holds the 1x threads four times over,
   again with fresh ids. Every thread gets `[copy N]` after its first user message, so
   all are distinct, as in a real dataset, and MMS501's hash table grows with the data.
2. throughput, in this process, the runs alternating --repeat times, fastest kept:
   baseline (`orjson.loads` per line), `pipeline.read(path, pipeline.ReadSpec(format="mms"))`, `lint` with
   no rule selected (reading, the thread view and the dataset profile), `lint` with one
   rule family selected (MMS1 ... MMS5), `lint` with every rule, and `lint` with every rule
   and --workers worker processes (default 2: the file's parts of about 8 MiB read and
   linted side by side, the dataset rules in this process); its report must be the same
   bytes as one process's.
3. memory, each run in a fresh child process: reading and linting the 1x and the 4x
   file, once for peak RSS (`VmHWM` of the child) and once under `tracemalloc` (peak of
   Python allocations, and a snapshot at the end of the lint run, after the dataset
   rules' `finish`, while their state is alive). The growth from 1x to 4x per added
   thread shows what the linter keeps per thread; the snapshots' difference says where.

Timings are reported, never asserted. The exit status is 1 when a read quarantines a
record, a run sees a different number of threads than were written, a child fails, or the
workers' report differs from one process's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import MIB
from harness.corpus import converted_realdata, write_copies
from harness.options import add_data, fail, work_folder, write_json
from harness.procs import (
    checked,
    count_lines,
    cpu_seconds,
    last_json_line,
    run_child,
    vm_status_kib,
)
from harness.table import print_aligned
from harness.timing import alternate, where
from harness.trees import headline
from ingest import Figures, baseline, figures, read_threads

import pipeline
from pipeline.jobs.lint import lint
from pipeline.jobs.read import ReadSpec
from pipeline.lint import LintConfig, LintReport
from pipeline.lint.reports import write_report

DEFAULT_THREADS = 20_000
QUICK_THREADS = 300
DEFAULT_WORKERS = 2
ALL_RULES = "lint, all rules"
GROWTH = 4
"""The memory runs lint the 1x file and one GROWTH times as large."""
FAMILIES = ("MMS1", "MMS2", "MMS3", "MMS4", "MMS5")
ONE_CORE_ENV = {"OMP_NUM_THREADS": "1"}
"""Set for the children, so that numpy's OpenBLAS (imported with pyarrow) starts no pool of
threads; the timed runs are single-threaded Python, but for the one with workers (see
cpu_per_wall)."""
TRACE_FRAMES = 1
TOP_LINES = 10
"""Source lines to report from the tracemalloc snapshots."""
LISTED = ("memory", "throughput", "rule_costs")
"""The result's lists of dataclasses (turned into dicts for the JSON file)."""


# --------------------------------------------------------------------------- runs


def lint_run(
    path: Path, select: tuple[str, ...], keep: dict[int, LintReport], workers: int = 1
) -> tuple[int, int]:
    """`lint` of `path` with the `select`ed rules in `workers` processes; raises if a record
    was quarantined. The report is kept under `keep[workers]` for the summary."""
    config = LintConfig(select=select)
    report = lint(str(path), ReadSpec("mms"), config=config, workers=workers)
    stats = report.stats
    if stats.quarantined_total:
        raise RuntimeError(f"lint quarantined {dict(stats.quarantined)}")
    keep[workers] = report
    return stats.records_read, stats.threads


def parallel_name(workers: int) -> str:
    return f"{ALL_RULES}, {workers} workers"


def throughput_runs(
    path: Path, keep: dict[int, LintReport], workers: int
) -> dict[str, Callable[[], tuple[int, int]]]:
    """The timed jobs, in the order they alternate; `baseline` is what `measure` divides by."""
    runs: dict[str, Callable[[], tuple[int, int]]] = {
        "baseline": lambda: baseline(path),
        "read --from mms": lambda: read_threads(path, "mms"),
        "lint, no rules": lambda: lint_run(path, (), {}),
    }
    for family in FAMILIES:
        runs[f"lint {family}"] = lambda family=family: lint_run(path, (family,), {})
    runs[ALL_RULES] = lambda: lint_run(path, ("ALL",), keep)
    runs[parallel_name(workers)] = lambda: lint_run(path, ("ALL",), keep, workers)
    return runs


@dataclass(frozen=True, slots=True)
class RuleCost:
    """A run's cost over reading: time ratio and microseconds per thread."""

    name: str
    x_read: float
    us_per_thread_over_read: float


def rule_costs(figures: Sequence[Figures]) -> list[RuleCost]:
    """Every read and lint run against `read --from mms`: what the rules add."""
    read = next(f for f in figures if f.name == "read --from mms")
    return [
        RuleCost(
            f.name,
            round(f.seconds / read.seconds, 2),
            round((f.seconds - read.seconds) / f.threads * 1e6, 1),
        )
        for f in figures
        if f.name.startswith(("read", "lint"))
    ]


def print_throughput(figures: Sequence[Figures], costs: Sequence[RuleCost]) -> None:
    cost = {c.name: c for c in costs}
    header = ("run", "threads", "seconds", "threads/s", "MiB/s", "x baseline", "x read", "us/thr")
    lines = [header]
    for f in figures:
        extra = cost.get(f.name)
        lines.append(
            (
                f.name,
                f"{f.threads:,}",
                f"{f.seconds:.3f}",
                f"{f.threads_per_s:,.0f}",
                f"{f.mb_per_s:.1f}",
                f"{f.time_ratio:.2f}",
                f"{extra.x_read:.2f}" if extra else "",
                f"{extra.us_per_thread_over_read:,.1f}" if extra else "",
            )
        )
    print_aligned(lines)


# --------------------------------------------------------------------------- children


def child(job: str, path: Path, snapshot: Path | None, traced: bool) -> dict[str, Any]:
    """Read or lint `path` once; this process's memory figures. With `snapshot`, dump a
    tracemalloc snapshot when the linter has seen every thread and run `finish`."""
    expected = count_lines(path)
    start_kib = vm_status_kib("VmRSS")
    if traced:
        tracemalloc.start(TRACE_FRAMES)

    def at_end(stats: pipeline.Account, report: LintReport) -> None:
        if snapshot is not None and stats.threads == expected:  # the last call wins
            untraced = (tracemalloc.__file__, "<frozen importlib._bootstrap>", "<unknown>")
            taken = tracemalloc.take_snapshot()
            taken.filter_traces([tracemalloc.Filter(False, name) for name in untraced]).dump(
                str(snapshot)
            )

    findings = 0
    if job == "read":
        records, threads = read_threads(path, "mms")
    else:
        report = lint(str(path), ReadSpec("mms"), progress=at_end)
        records, threads = report.stats.records_read, report.stats.threads
        findings = len(report.diagnostics)
    traced_peak = tracemalloc.get_traced_memory()[1] if traced else 0
    return {
        "records": records,
        "threads": threads,
        "findings": findings,
        "start_rss_kib": start_kib,
        "peak_rss_kib": vm_status_kib("VmHWM"),
        "traced_peak_bytes": traced_peak,
    }


@dataclass(frozen=True, slots=True)
class MemoryRun:
    """A job on one file, in two fresh children: plain (RSS) and under tracemalloc."""

    name: str
    scale: int
    threads: int
    findings: int
    seconds: float
    start_rss_mb: float
    """After the imports, before the run: the floor under peak_rss_mb."""
    peak_rss_mb: float
    ru_maxrss_mb: float
    """wait4's figure, which also counts this script's pages before exec."""
    traced_peak_mb: float


def spawn(argv: list[str], name: str, workdir: Path) -> tuple[float, float, dict[str, Any]]:
    """Run a child; its wall time, wait4 peak RSS (MiB) and the JSON it printed last."""
    log = workdir / f"{name}.log"
    run = checked(run_child(name, argv, log), log)
    return run.seconds, run.peak_rss_mb, json.loads(last_json_line(log))


def memory_run(job: str, scale: int, path: Path, workdir: Path, snapshot: Path | None) -> MemoryRun:
    script = [sys.executable, str(Path(__file__).resolve()), "--child", job, str(path)]
    name = f"{job} {scale}x"
    print(f"memory: {name} ...", flush=True)
    seconds, ru_maxrss, plain = spawn(script, f"{job}-{path.stem}", workdir)
    traced_argv = [*script, "--trace", *(["--snapshot", str(snapshot)] if snapshot else [])]
    _, _, traced = spawn(traced_argv, f"{job}-{path.stem}-traced", workdir)
    return MemoryRun(
        name=name,
        scale=scale,
        threads=plain["threads"],
        findings=plain["findings"],
        seconds=round(seconds, 2),
        start_rss_mb=round(plain["start_rss_kib"] / 1024, 1),
        peak_rss_mb=round(plain["peak_rss_kib"] / 1024, 1),
        ru_maxrss_mb=round(ru_maxrss, 1),
        traced_peak_mb=round(traced["traced_peak_bytes"] / MIB, 2),
    )


def growth(small: MemoryRun, large: MemoryRun) -> dict[str, float]:
    """What `large` needs beyond `small`, in all and per added thread."""
    added = large.threads - small.threads
    rss, traced = large.peak_rss_mb - small.peak_rss_mb, large.traced_peak_mb - small.traced_peak_mb
    return {
        "peak_rss_mb": round(rss, 1),
        "rss_bytes_per_thread": round(rss * MIB / added),
        "traced_peak_mb": round(traced, 2),
        "traced_bytes_per_thread": round(traced * MIB / added),
    }


def overhead(read: MemoryRun, linted: MemoryRun) -> dict[str, float]:
    """What linting a file needs beyond reading it: peak RSS and traced peak, MiB."""
    return {
        "peak_rss_mb": round(linted.peak_rss_mb - read.peak_rss_mb, 1),
        "traced_peak_mb": round(linted.traced_peak_mb - read.traced_peak_mb, 2),
    }


def top_lines(snapshot: Path, against: Path | None, per: int) -> list[dict[str, Any]]:
    """The source lines holding the most live memory in `snapshot` (or, with `against`,
    whose live memory grew most since that one), with bytes per `per` threads."""
    taken = tracemalloc.Snapshot.load(str(snapshot))
    if against is None:
        lines = [(s.traceback[0], s.size, s.count) for s in taken.statistics("lineno")]
    else:
        older = tracemalloc.Snapshot.load(str(against))
        lines = [
            (s.traceback[0], s.size_diff, s.count_diff) for s in taken.compare_to(older, "lineno")
        ]
    top = sorted(lines, key=lambda line: line[1], reverse=True)[:TOP_LINES]
    return [
        {
            "where": where(frame.filename, frame.lineno),
            "kib": round(size / 1024),
            "objects": count,
            "bytes_per_thread": round(size / per, 1),
        }
        for frame, size, count in top
    ]


def live_mb(snapshot: Path) -> dict[str, float]:
    """Live Python memory in `snapshot`, and the part the diagnostics spool holds (a
    SpooledTemporaryFile: in memory up to its size limit, then on disk)."""
    taken = tracemalloc.Snapshot.load(str(snapshot))
    spool = taken.filter_traces([tracemalloc.Filter(True, tempfile.__file__)])
    total = sum(stat.size for stat in taken.statistics("filename"))
    in_spool = sum(stat.size for stat in spool.statistics("filename"))
    return {"live_mb": round(total / MIB, 2), "spool_mb": round(in_spool / MIB, 2)}


def print_memory(runs: Sequence[MemoryRun]) -> None:
    header = ("run", "threads", "findings", "seconds", "start RSS", "peak RSS", "traced peak")
    lines = [header] + [
        (
            r.name,
            f"{r.threads:,}",
            f"{r.findings:,}",
            f"{r.seconds:.2f}",
            f"{r.start_rss_mb:.1f}",
            f"{r.peak_rss_mb:.1f}",
            f"{r.traced_peak_mb:.2f}",
        )
        for r in runs
    ]
    print_aligned(lines)


def print_lines(title: str, top: Sequence[dict[str, Any]]) -> None:
    header = (title, "KiB", "objects", "B/thread")
    lines = [header] + [
        (g["where"], f"{g['kib']:,}", f"{g['objects']:,}", f"{g['bytes_per_thread']:,.1f}")
        for g in top
    ]
    print_aligned(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="threads at 1x")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each job; best kept")
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"worker processes of the parallel lint run (default {DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke run: {QUICK_THREADS} threads, one run each"
    )
    add_data(parser, tokenizer=False)
    parser.add_argument(
        "--data", type=Path, help="build (and keep) the files here, not in a temp dir"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    # Internal: the memory children.
    parser.add_argument("--child", nargs=2, metavar=("JOB", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeat < 1 or args.workers < 2:
        parser.error("--threads and --repeat must be positive, --workers at least 2")
    if args.quick:
        args.threads, args.repeat = QUICK_THREADS, 1
    if not args.child and not args.realdata.is_dir():
        parser.error(f"no real data at {args.realdata}")
    return args


def build(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], dict[int, Path]]:
    """The real threads as MMS JSONL, then the 1x and GROWTH x files."""
    real = converted_realdata(args.realdata, workdir)
    files = {1: workdir / "lint-1x.jsonl", GROWTH: workdir / f"lint-{GROWTH}x.jsonl"}
    sizes = {
        1: write_copies(Path(real["path"]), files[1], args.threads),
        GROWTH: write_copies(files[1], files[GROWTH], args.threads * GROWTH),
    }
    print(
        f"converted {real['records']:,} records of {real['files']} real files to "
        f"{real['threads']:,} threads ({real['quarantined']:,} records quarantined); wrote "
        f"{args.threads:,} threads ({sizes[1] / MIB:.1f} MiB) and "
        f"{args.threads * GROWTH:,} ({sizes[GROWTH] / MIB:.1f} MiB)"
    )
    return {"realdata": real, "bytes": {f"{k}x": v for k, v in sizes.items()}}, files


def json_report(report: LintReport) -> str:
    out = io.StringIO()
    write_report(report, "json", out)
    return out.getvalue()


def throughput(args: argparse.Namespace, path: Path, size: int) -> dict[str, Any]:
    """The timed runs in this process (and the lint workers), best of --repeat each, with
    the rules' costs, the load average around them, and whether the workers' report is
    one process's."""
    keep: dict[int, LintReport] = {}
    load_before = os.getloadavg()
    wall, cpu = time.perf_counter(), cpu_seconds()
    found = figures(alternate(throughput_runs(path, keep, args.workers), args.repeat), size)
    cpu_share = (cpu_seconds() - cpu) / (time.perf_counter() - wall)
    return {
        "throughput": found,
        "rule_costs": rule_costs(found),
        "cpu_per_wall": round(cpu_share, 3),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "lint_summary": keep[1].summary(),
        "same_report_with_workers": json_report(keep[args.workers]) == json_report(keep[1]),
    }


def memory(args: argparse.Namespace, files: dict[int, Path], workdir: Path) -> dict[str, Any]:
    """The children's peaks at 1x and GROWTH x, and what the lint snapshots hold."""
    snapshots = {scale: workdir / f"lint-{scale}x.snapshot" for scale in files}
    runs = {
        (job, scale): memory_run(
            job, scale, path, workdir, snapshots[scale] if job == "lint" else None
        )
        for job in ("read", "lint")
        for scale, path in files.items()
    }
    added = args.threads * (GROWTH - 1)
    held = {f"{scale}x": live_mb(path) for scale, path in snapshots.items()}
    small, large = held["1x"], held[f"{GROWTH}x"]
    kept = (large["live_mb"] - large["spool_mb"]) - (small["live_mb"] - small["spool_mb"])
    return {
        "memory": list(runs.values()),
        "growth": {job: growth(runs[(job, 1)], runs[(job, GROWTH)]) for job in ("read", "lint")},
        "lint_over_read": {
            f"{scale}x": overhead(runs[("read", scale)], runs[("lint", scale)]) for scale in files
        },
        "live_after_finish": held,
        "live_growth_without_spool_bytes_per_thread": round(kept * MIB / added, 1),
        "live_lines": top_lines(snapshots[GROWTH], None, args.threads * GROWTH),
        "grown_lines": top_lines(snapshots[GROWTH], snapshots[1], added),
    }


def check(threads: int, result: dict[str, Any]) -> list[str]:
    """Every run must have seen every thread written; workers must not change the report."""
    seen = [(f.name, f.threads, threads) for f in result["throughput"]]
    seen += [(r.name, r.threads, threads * r.scale) for r in result["memory"]]
    problems = [
        f"{name} saw {got:,} threads, expected {want:,}" for name, got, want in seen if got != want
    ]
    if not result["same_report_with_workers"]:
        problems.append("lint with workers wrote another JSON report than one process")
    return problems


def print_results(result: dict[str, Any]) -> None:
    print()
    print_throughput(result["throughput"], result["rule_costs"])
    runs = {f.name: f for f in result["throughput"]}
    full, summary = (
        next(c for c in result["rule_costs"] if c.name == ALL_RULES),
        result["lint_summary"],
    )
    print(
        f"\nlint, all rules: {runs[ALL_RULES].threads_per_s:,.0f} threads/s, "
        f"{full.x_read:.2f}x the time of reading, {full.us_per_thread_over_read:,.1f} us per "
        f"thread for the rules; CPU/wall over the timed runs {result['cpu_per_wall']:.2f}"
    )
    for name in (ALL_RULES, parallel_name(result["workers"])):
        run = runs[name]
        print(
            f"{name}: {run.mb_per_s:.1f} MiB/s, {1 / run.time_ratio:.1%} of the baseline's "
            f"({runs['baseline'].mb_per_s:.1f} MiB/s)"
        )
    same = "the same" if result["same_report_with_workers"] else "ANOTHER"
    load = result["load_average"]
    print(
        f"speed-up with {result['workers']} workers: "
        f"{runs[ALL_RULES].seconds / runs[parallel_name(result['workers'])].seconds:.2f}x, "
        f"{same} JSON report; load average before {load['before'][0]:.2f}, "
        f"after {load['after'][0]:.2f}"
    )
    print(f"findings at 1x: {summary['findings']:,} {summary['by_code']}\n")
    print_memory(result["memory"])
    for job, g in result["growth"].items():
        print(
            f"{job} {GROWTH}x - 1x: peak RSS {g['peak_rss_mb']:+.1f} MiB "
            f"({g['rss_bytes_per_thread']:+,} B/thread), traced peak "
            f"{g['traced_peak_mb']:+.2f} MiB ({g['traced_bytes_per_thread']:+,} B/thread)"
        )
    over = "; ".join(
        f"{scale} {o['peak_rss_mb']:+.1f} MiB RSS, {o['traced_peak_mb']:+.2f} MiB traced"
        for scale, o in result["lint_over_read"].items()
    )
    print(f"lint - read peaks: {over}")
    held = ", ".join(
        f"{scale} {v['live_mb']:.2f} MiB ({v['spool_mb']:.2f} in the spool)"
        for scale, v in result["live_after_finish"].items()
    )
    growth_b = result["live_growth_without_spool_bytes_per_thread"]
    print(f"lint, live after finish: {held}; without the spool {growth_b:+,.1f} B/added thread\n")
    print_lines(f"live after finish, lint {GROWTH}x", result["live_lines"])
    print()
    print_lines(f"grown from lint 1x to {GROWTH}x", result["grown_lines"])


def benchmark(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[str]]:
    built, files = build(args, workdir)
    result = {
        **built,
        "threads": args.threads,
        "repeat": args.repeat,
        "workers": args.workers,
        **memory(args, files, workdir),
        **throughput(args, files[1], built["bytes"]["1x"]),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    print_results(result)
    problems = check(args.threads, result)
    runs = {f.name: f for f in result["throughput"]}
    linted = {(r.name): r for r in result["memory"]}
    headline(
        lower={
            f"{ALL_RULES} s": runs[ALL_RULES].seconds,
            f"{parallel_name(args.workers)} s": runs[parallel_name(args.workers)].seconds,
            "lint 1x peak RSS MiB": linted["lint 1x"].peak_rss_mb,
            f"lint {GROWTH}x peak RSS MiB": linted[f"lint {GROWTH}x"].peak_rss_mb,
        }
    )
    listed = {key: [asdict(v) for v in value] for key, value in result.items() if key in LISTED}
    return {**result, **listed, "problems": problems}, problems


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        job, path = args.child
        print(json.dumps(child(job, Path(path), args.snapshot, args.trace)))
        return 0
    os.environ.update(ONE_CORE_ENV)
    with work_folder(args.data) as workdir:
        try:
            result, problems = benchmark(args, workdir)
        except RuntimeError as err:
            result, problems = {}, [str(err)]
    if result:
        write_json(args.json, result)
    return fail(problems)


if __name__ == "__main__":
    sys.exit(main())
