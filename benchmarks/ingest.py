"""Benchmark ingesting OpenAI-format records (`pipeline.read`) against plain JSON parsing.

Run from the repository root; the real files come from $MMS_SHARED/realdata (default
../shared/realdata):

    python benchmarks/ingest.py                   # 20,000 records, best of 3
    python benchmarks/ingest.py --records 2000    # smoke run
    python benchmarks/ingest.py --repeat 5 --json figures.json

What it does, in one process:

1. build: the OpenAI-shaped real files (fine-tuning chat and tool calls, evals samples,
   functionary tool conversations, LLaMA-Factory SFT/DPO/KTO/multimodal/reasoning-with-tools
   records, torchtune preference pairs), their records taken in turn, one file after the
   other, --records of them written as JSONL, each with its own `id` (harness/corpus.py);
2. baseline: reads that file line by line and `orjson.loads` each line: the floor any
   reader pays;
3. read --from openai: `pipeline.read(path, pipeline.ReadSpec(format="openai"))`, every
   thread consumed;
4. read auto: `pipeline.read(path)`, which also sniffs the file's first records.

The three runs alternate --repeat times and the fastest of each is reported, as
records/s, threads/s (preference records give two threads) and MiB/s, with the time
ratio to the baseline. The exit status is 1 when a run quarantines a record or the two
reads disagree on the thread count. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson
from harness import MIB
from harness.corpus import OPENAI_SOURCES, openai_records
from harness.options import add_data, fail, write_json
from harness.table import print_aligned
from harness.timing import Timed, alternate
from harness.trees import headline

import pipeline

DEFAULT_RECORDS = 20_000


def baseline(path: Path) -> tuple[int, int]:
    """The floor: parse every line with orjson, nothing else; (records, threads)."""
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
    """A job's fastest run: its counts, rates and time over the baseline's."""

    name: str
    records: int
    threads: int
    seconds: float
    records_per_s: float
    threads_per_s: float
    mb_per_s: float
    time_ratio: float
    all_seconds: tuple[float, ...]


def figures(found: dict[str, Timed], size: int) -> list[Figures]:
    """Each job's figures; the first job is the baseline the others are divided by."""
    base = next(iter(found.values())).seconds
    rows = []
    for name, timed in found.items():
        records, threads = timed.result
        seconds = timed.seconds
        rows.append(
            Figures(
                name,
                records,
                threads,
                seconds,
                round(records / seconds),
                round(threads / seconds),
                round(size / MIB / seconds, 1),
                round(seconds / base, 2),
                timed.all_seconds,
            )
        )
    return rows


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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records to build")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each job; fastest kept")
    add_data(parser, tokenizer=False)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be positive")
    missing = [name for name in OPENAI_SOURCES if not (args.realdata / name).is_file()]
    if missing:
        parser.error(f"real files missing under {args.realdata}: {', '.join(missing)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mms-ingest-bench-") as workdir:
        source = Path(workdir) / "openai.jsonl"
        built = openai_records(args.realdata, source, args.records)
        size = built["bytes"]
        print(
            f"built {built['records']:,} records ({size / MIB:.1f} MiB) from "
            f"{built['source_records']:,} records of {len(OPENAI_SOURCES)} real files"
        )
        jobs = {
            "baseline": lambda: baseline(source),
            "read --from openai": lambda: read_threads(source, "openai"),
            "read auto": lambda: read_threads(source, "auto"),
        }
        try:
            rows = figures(alternate(jobs, args.repeat), size)
        except RuntimeError as err:
            return fail([str(err)])
    print()
    print_table(rows)
    base, named, auto = rows
    problems = []
    if named.threads != auto.threads:
        problems.append(f"--from openai gave {named.threads:,} threads, auto {auto.threads:,}")
    print(
        f"\nread --from openai / baseline: {named.time_ratio:.2f}x the time "
        f"({named.threads_per_s:,.0f} threads/s against {base.records_per_s:,.0f} "
        "parsed lines/s)"
    )
    headline(
        lower={"read --from openai s": named.seconds, "read auto s": auto.seconds},
        higher={"read --from openai threads/s": named.threads_per_s},
    )
    runs = [asdict(row) for row in rows]
    result = {**built, "repeat": args.repeat, "runs": runs, "python": sys.version.split()[0]}
    write_json(args.json, {**result, "cpus": os.cpu_count(), "problems": problems})
    return fail(problems)


if __name__ == "__main__":
    sys.exit(main())
