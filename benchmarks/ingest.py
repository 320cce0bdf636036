"""Benchmark ingesting OpenAI-format records (`pipeline.read`) against plain JSON parsing.

Run from the repository root, with the package installed (`pip install -e .`); the real
files come from ../shared/realdata:

    python benchmarks/ingest.py                   # 20,000 records, best of 3
    python benchmarks/ingest.py --records 2000    # smoke run
    python benchmarks/ingest.py --repeat 5 --json figures.json

What it does, in one process:

1. build: reads the OpenAI-shaped real files (fine-tuning chat and tool calls, evals
   samples, functionary tool conversations, LLaMA-Factory SFT/DPO/KTO/multimodal/
   reasoning-with-tools records, torchtune preference pairs), takes their records in
   turn, one file after the other, and writes --records of them as JSONL lines to a
   temporary file, each with its own `id` (`bench-0000001` ...) so no thread repeats;
2. baseline: reads that file line by line and `orjson.loads` each line: the floor any
   reader pays;
3. read --from openai: `pipeline.read(path, pipeline.ReadSpec(format="openai"))`, every thread consumed;
4. read auto: `pipeline.read(path)`, which also sniffs the file's first records.

The three runs alternate --repeat times and the fastest of each is reported, as
records/s, threads/s (preference records give two threads) and MiB/s, with the time
ratio to the baseline. The exit status is 1 when a run quarantines a record or the two
reads disagree on the thread count. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
from table import print_aligned

import pipeline

REPO_ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
DEFAULT_RECORDS = 20_000
DEFAULT_REALDATA = REPO_ROOT.parent / "shared" / "realdata"
SOURCES = (
    "openai_finetune_examples/toy_chat_fine_tuning.jsonl",
    "openai_finetune_examples/weather_chat_fine_tuning.jsonl",
    "openai_finetune_examples/evals_older_samples.jsonl",
    "functionary/test_case.json",
    "functionary/test_case_v1.json",
    "functionary/test_case_v2.json",
    "functionary/test_case_vision.json",
    "llamafactory/kto_en_demo.json",
    "llamafactory/mllm_demo.json",
    "llamafactory/mllm_video_audio_demo.json",
    "llamafactory/reason_tool_use_demo_50.jsonl",
    "llamafactory/v1_sft_demo.jsonl",
    "llamafactory/v1_multimodal_demo.jsonl",
    "llamafactory/v1_dpo_demo.jsonl",
    "torchtune_assets/hh_rlhf_tiny.json",
)
"""The real files the records come from (all read by the `openai` format)."""


# --------------------------------------------------------------------------- input


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file, a JSON array, or a single JSON object."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return [orjson.loads(line) for line in data.splitlines() if line.strip()]
    value = orjson.loads(data)
    return value if isinstance(value, list) else [value]


def build_input(realdata: Path, target: Path, count: int) -> dict[str, Any]:
    """Write `count` records to `target`, taking one record from each source file in
    turn (cycling each file's records), every record with a distinct `id`."""
    pools = [load_records(realdata / name) for name in SOURCES]
    written = 0
    with open(target, "wb") as out:
        for number in range(count):
            pool = pools[number % len(pools)]
            record = pool[(number // len(pools)) % len(pool)]
            line = orjson.dumps(
                {"id": f"bench-{number:07d}", **record}, option=orjson.OPT_APPEND_NEWLINE
            )
            out.write(line)
            written += len(line)
    return {"records": count, "bytes": written, "source_records": sum(map(len, pools))}


# --------------------------------------------------------------------------- runs


def baseline(path: Path) -> tuple[int, int]:
    """The floor: parse every line with orjson, nothing else."""
    records = 0
    with open(path, "rb", buffering=MIB) as stream:
        for line in stream:
            if line.strip():
                orjson.loads(line)
                records += 1
    return records, records


def read_threads(path: Path, fmt: str) -> tuple[int, int]:
    """Every thread `pipeline.read` yields; raises if a record was quarantined."""
    stats = pipeline.Account()
    threads = sum(1 for _ in pipeline.read(str(path), pipeline.ReadSpec(format=fmt), stats=stats))
    if stats.quarantined_total or not stats.read_balanced:
        raise RuntimeError(f"read --from {fmt} quarantined {dict(stats.quarantined)}")
    return stats.records_read, threads


@dataclass(frozen=True, slots=True)
class Figures:
    name: str
    records: int
    threads: int
    seconds: float
    records_per_s: float
    threads_per_s: float
    mb_per_s: float
    time_ratio: float
    all_seconds: tuple[float, ...]


def measure(
    runs: dict[str, Callable[[], tuple[int, int]]], repeat: int, size: int
) -> list[Figures]:
    """Run every job `repeat` times, alternating; keep each one's fastest time."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    counts: dict[str, tuple[int, int]] = {}
    for attempt in range(1, repeat + 1):
        for name, run in runs.items():
            print(f"run {attempt}/{repeat}: {name} ...", flush=True)
            start = time.perf_counter()
            counts[name] = run()
            times[name].append(time.perf_counter() - start)
    base = min(times["baseline"])
    figures = []
    for name, seconds in times.items():
        best = min(seconds)
        records, threads = counts[name]
        figures.append(
            Figures(
                name=name,
                records=records,
                threads=threads,
                seconds=round(best, 3),
                records_per_s=round(records / best),
                threads_per_s=round(threads / best),
                mb_per_s=round(size / MIB / best, 1),
                time_ratio=round(best / base, 2),
                all_seconds=tuple(round(s, 3) for s in seconds),
            )
        )
    return figures


def print_table(rows: Sequence[Figures]) -> None:
    header = ("run", "records", "threads", "seconds", "records/s", "threads/s", "MiB/s", "x base")
    lines = [header] + [
        (
            r.name,
            f"{r.records:,}",
            f"{r.threads:,}",
            f"{r.seconds:.3f}",
            f"{r.records_per_s:,.0f}",
            f"{r.threads_per_s:,.0f}",
            f"{r.mb_per_s:.1f}",
            f"{r.time_ratio:.2f}",
        )
        for r in rows
    ]
    print_aligned(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records to build")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each job; fastest kept")
    parser.add_argument(
        "--realdata", type=Path, default=DEFAULT_REALDATA, help="the real files' folder"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be positive")
    missing = [name for name in SOURCES if not (args.realdata / name).is_file()]
    if missing:
        parser.error(f"real files missing under {args.realdata}: {', '.join(missing)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mms-ingest-bench-") as workdir:
        source = Path(workdir) / "openai.jsonl"
        built = build_input(args.realdata, source, args.records)
        size = built["bytes"]
        print(
            f"built {built['records']:,} records ({size / MIB:.1f} MiB) from "
            f"{built['source_records']:,} records of {len(SOURCES)} real files"
        )
        runs = {
            "baseline": lambda: baseline(source),
            "read --from openai": lambda: read_threads(source, "openai"),
            "read auto": lambda: read_threads(source, "auto"),
        }
        try:
            figures = measure(runs, args.repeat, size)
        except RuntimeError as err:
            print(f"FAIL: {err}", file=sys.stderr)
            return 1
    print()
    print_table(figures)
    named, auto = figures[1], figures[2]
    problems = []
    if named.threads != auto.threads:
        problems.append(f"--from openai gave {named.threads:,} threads, auto {auto.threads:,}")
    print(
        f"\nread --from openai / baseline: {named.time_ratio:.2f}x the time "
        f"({named.threads_per_s:,.0f} threads/s against {figures[0].records_per_s:,.0f} "
        "parsed lines/s)"
    )
    if args.json:
        result = {
            **built,
            "repeat": args.repeat,
            "runs": [asdict(f) for f in figures],
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "problems": problems,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
