"""Packing and the loader, side by side with TRL's `pack_dataset` (bfd) in one run.

1. Lengths: `--threads` (default 1,000,000) thread lengths drawn from the token lengths of a
   real output (`--lengths-from`, the num_tokens of its shards; else a lognormal with the
   realdata median), capped at `--seq-len`. The same seed gives the same lengths.
2. Packing: `mms pack`'s packer and Arrow builder (pipeline.loader) on a table of those
   threads, then TRL's `pack_dataset(strategy="bfd")` on the same rows as a `datasets`
   Dataset, each timed in this process, alternated `--repeat` times (best kept): fill =
   tokens / (rows x seq_len), seconds, threads/s, and whether every thread was kept whole.
3. Loader: an output folder of the packed rows (written once, and four times), iterated by
   OutputLoader in packed mode in child processes: tokens/s per process and peak RSS (which
   must stay flat from 1x to 4x), as the only consumer and as consumer 0 of 2 ranks x 2
   workers (row groups dealt strided, every consumer the same steps); then the threads
   themselves (unpacked) packed on the fly by consumer 0 of 2 x 2, where equal steps cost
   what `surplus_rows` counts.

Reports figures, asserts nothing about time."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness.procs import vm_status_kib
from harness.synthetic import lengths, token_table
from harness.trees import headline


def ours(table: pa.Table, seq_len: int) -> tuple[float, pa.Table]:
    from pipeline.packing.best_fit import pack_rows
    from pipeline.packing.rows import packed_table

    start = time.perf_counter()
    sequences = list(pack_rows(table["num_tokens"].to_numpy().tolist(), seq_len))
    packed = packed_table(table, sequences)
    return time.perf_counter() - start, packed


def trl(table: pa.Table, seq_len: int) -> tuple[float, pa.Table] | None:
    try:
        import datasets
        from trl.data_utils import pack_dataset
    except ImportError:
        return None
    dataset = datasets.Dataset(table.select(["input_ids", "labels"]))
    start = time.perf_counter()
    packed = pack_dataset(dataset, seq_len, strategy="bfd")
    elapsed = time.perf_counter() - start
    return elapsed, packed.data.table


def fill(packed: pa.Table, seq_len: int) -> float:
    tokens = pa.compute.sum(pa.compute.list_value_length(packed["input_ids"])).as_py()
    return tokens / (packed.num_rows * seq_len)


def loader_run(folder: Path, seq_len: int, world_size: int, num_workers: int) -> None:
    """Child process: iterate the output once as consumer 0 of `world_size x num_workers`,
    print tokens/s, peak RSS and what equal steps left out."""
    from pipeline.loader import OutputLoader

    loader = OutputLoader(
        folder,
        batch_size=8,
        mode="packed",
        seq_len=seq_len,
        pad_id=0,
        world_size=world_size,
        num_workers=num_workers,
    )
    start, tokens, batches = time.perf_counter(), 0, 0
    for batch in loader:
        tokens += int(batch["input_ids"].size)  # what a training step consumes, padding included
        batches += 1
    elapsed = time.perf_counter() - start
    report = {"seconds": elapsed, "tokens": tokens, "batches": batches}
    report |= {"peak_rss_mib": vm_status_kib("VmHWM") / 1024, "rows": loader.share().rows}
    report["surplus_rows"] = getattr(loader, "surplus_rows", None)
    print(json.dumps(report))


def write_output(packed: pa.Table, folder: Path, copies: int) -> None:
    data = folder / "data"
    data.mkdir(parents=True)
    for copy in range(copies):
        pq.write_table(
            packed, data / f"train-{copy:05d}-of-{copies:05d}.parquet", row_group_size=1000
        )


def loader_report(folder: Path, args: argparse.Namespace, world: int, workers: int) -> dict:
    command = [sys.executable, __file__, "--loader-run", str(folder)]
    command += ["--seq-len", str(args.seq_len), "--consumers", f"{world}x{workers}"]
    return json.loads(subprocess.run(command, check=True, capture_output=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1_000_000)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--lengths-from", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loader-run", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--consumers", default="1x1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loader_run is not None:
        world, workers = (int(n) for n in args.consumers.split("x"))
        loader_run(args.loader_run, args.seq_len, world, workers)
        return
    sizes = lengths(args.threads, args.seq_len, args.lengths_from, args.seed)
    table = token_table(sizes)
    print(f"{len(sizes):,} threads, {int(sizes.sum()):,} tokens, median {int(np.median(sizes))}")
    best: dict[str, float] = {}
    results: dict[str, pa.Table] = {}
    for _ in range(args.repeat):
        for name, run in (("mms pack", ours), ("trl pack_dataset bfd", trl)):
            outcome = run(table, args.seq_len)
            if outcome is None:
                continue
            seconds, packed = outcome
            best[name] = min(best.get(name, float("inf")), seconds)
            results[name] = packed
    for name, seconds in best.items():
        packed = results[name]
        print(
            f"{name:<22} {packed.num_rows:>9,} rows  fill {fill(packed, args.seq_len):.4%}  "
            f"{seconds:6.2f} s  {len(sizes) / seconds:>12,.0f} threads/s"
        )
    if len(best) == 2:
        print(
            f"mms pack is {best['trl pack_dataset bfd'] / best['mms pack']:.2f}x as fast as TRL's bfd"
        )
    rates: dict[str, float] = {}
    runs = [("packed rows", results["mms pack"], 1, 1), ("packed rows", results["mms pack"], 2, 2)]
    runs.append(("threads packed on the fly", table, 2, 2))
    with tempfile.TemporaryDirectory() as work:
        for number, (what, rows, world, workers) in enumerate(runs):
            for copies in (1, 4):
                folder = Path(work) / f"out-{number}-{copies}x"
                write_output(rows, folder, copies)
                report = loader_report(folder, args, world, workers)
                rate = report["tokens"] / report["seconds"]
                who = (
                    "the only consumer"
                    if world * workers == 1
                    else f"consumer 0 of {world}x{workers}"
                )
                surplus = report["surplus_rows"]
                left = f", {surplus:,} of {report['rows']:,} threads left out" if surplus else ""
                rates[f"loader, {what}, {who}, {copies}x tokens/s"] = round(rate)
                print(
                    f"loader, {what}, {who}, {copies}x: {report['tokens']:,} tokens in "
                    f"{report['batches']:,} batches, {report['seconds']:.2f} s = {rate:,.0f} "
                    f"tokens/s, peak RSS {report['peak_rss_mib']:.1f} MiB{left}"
                )
                shutil.rmtree(folder)
    headline(lower={"mms pack s": best["mms pack"]}, higher=rates)


if __name__ == "__main__":
    main()
