"""Benchmark the Ray engine against the local one on this machine: the overhead of Ray for
the same `mms run`, the scaling of the map side from 1 to 2 CPUs, and, from the measured
per-part costs, what a cluster would do (a simulation, printed as such).

Run from the repository root, with the `ray` extra installed; the real files come from
$MMS_SHARED/realdata, the tokenizer from $MMS_SHARED/tokenizers (default ../shared):

    python benchmarks/engines.py                    # 40,000 threads in 8 MiB parts, ~4 min
    python benchmarks/engines.py --threads 4000     # smoke run
    python benchmarks/engines.py --json figures.json --repeat 2

1. build (untimed): the real threads, cycled and made unique (harness/corpus.py),
   written as one MMS JSONL file (split into 8 MiB parts by the planner), and the run
   config of the run benchmarks (lint, exact dedup, tokenize with truncation, one split).
2. Ray is started once in this process (`ray.init(num_cpus=2)`, timed on its own), so the
   runs below measure the engine, not Ray's start; then, in turn, `--repeat` times:
   local with 1 and 2 workers, Ray with 1 and 2 workers (`pipeline.jobs.run.run_pipeline`,
   a fresh output each, the tokenizer loaded again as a new process would). Each run's phases come from its progress callback: the map side
   (every part read, linted, tokenized), Ray's partition pass, and the rest (the ordered
   pass, reports, manifest; on the local engine it overlaps the map side).
3. Every output is compared byte for byte with the first local one (the manifest's engine
   aside); the exit status is 1 when one differs. Timings are reported, never asserted.

The simulation takes the Ray map side's cost per part with one worker (Ray's per-task
overhead included), its partition pass per thread, and the ordered pass per thread, and
projects them to `--nodes` machines of `--cpus` CPUs for a dataset of `--simulate-gib` GiB:
the map side and the partition pass divide by the workers, the ordered pass (one process
that writes every shard in plan order) does not.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from harness import MIB
from harness.corpus import real_threads, unique_threads, write_config, write_threads
from harness.options import add_data, add_run, work_folder, write_json
from harness.table import print_aligned
from harness.trees import headline

from pipeline.jobs.run import run_pipeline
from pipeline.jobs.run.config import RunConfig, load_run_config
from pipeline.sources.parts import DEFAULT_SPLIT_BYTES
from pipeline.stages.tokenize import _RENDERERS

DEFAULT_THREADS = 40_000
MAP = "read, lint, tokenize"
PARTITION = "partition keys"


@dataclasses.dataclass
class Timing:
    """One run's wall time and its phases (seconds)."""

    engine: str
    workers: int
    seconds: float = 0.0
    map_side: float = 0.0
    partition: float = 0.0

    @property
    def rest(self) -> float:
        return self.seconds - self.map_side - self.partition


def timed_run(config: RunConfig, out: Path, engine: str, workers: int) -> Timing:
    """Run `config` on `engine` into a fresh `out`, timing its phases."""
    shutil.rmtree(out, ignore_errors=True)
    _RENDERERS.clear()  # every run loads its tokenizer, as a new `mms run` process does
    config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, kind=engine))
    timing = Timing(engine, workers)
    marks: dict[str, float] = {}
    start = time.perf_counter()

    def progress(stage: str, done: int, total: int, _: object = None) -> None:
        if done >= total and stage not in marks:
            marks[stage] = time.perf_counter() - start

    run_pipeline(config, output=out, workers=workers, progress=progress)
    timing.seconds = time.perf_counter() - start
    timing.map_side = marks.get(MAP, 0.0)
    if PARTITION in marks:
        timing.partition = marks[PARTITION] - timing.map_side
    return timing


def output_bytes(out: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(out.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "manifest.json":
                data = data.replace(b'"kind": "ray"', b'"kind": "local"')
            files[str(path.relative_to(out))] = data
    return files


def best(timings: list[Timing], engine: str, workers: int) -> Timing:
    chosen = [t for t in timings if (t.engine, t.workers) == (engine, workers)]
    return min(chosen, key=lambda t: t.seconds)


def simulate(
    args: argparse.Namespace, ray_one: Timing, parts: int, threads: int, size: int
) -> dict[str, Any]:
    """A cluster's run of a larger dataset, projected from the measured per-part costs."""
    per_part = ray_one.map_side / parts
    per_thread_partition = ray_one.partition / threads
    per_thread_rest = ray_one.rest / threads
    scale = args.simulate_gib * 1024 * MIB / size
    sim_parts = math.ceil(args.simulate_gib * 1024 * MIB / DEFAULT_SPLIT_BYTES)
    sim_threads = round(threads * scale)
    workers = args.nodes * args.cpus
    map_side = math.ceil(sim_parts / workers) * per_part
    partition = per_thread_partition * sim_threads / workers
    rest = per_thread_rest * sim_threads
    one_machine = math.ceil(sim_parts / 2) * per_part + per_thread_partition * sim_threads / 2
    return {
        "dataset_gib": args.simulate_gib,
        "parts": sim_parts,
        "threads": sim_threads,
        "workers": workers,
        "seconds_per_part": per_part,
        "map_side_s": map_side,
        "partition_s": partition,
        "ordered_pass_s": rest,
        "total_s": map_side + partition + rest,
        "two_cpus_total_s": one_machine + rest,
    }


def report(timings: list[Timing], sim: dict[str, Any], ray_start: float, args: Any) -> None:
    rows = [["run", "workers", "seconds", "map side", "partition", "rest", "x local"]]
    for engine in ("local", "ray"):
        for workers in (1, 2):
            t = best(timings, engine, workers)
            local = best(timings, "local", workers).seconds
            rows.append(
                [engine, str(workers), f"{t.seconds:.2f}", f"{t.map_side:.2f}",
                 f"{t.partition:.2f}", f"{t.rest:.2f}", f"{t.seconds / local:.2f}"]
            )  # fmt: skip
    print()
    print_aligned(rows)
    ray_one, ray_two = best(timings, "ray", 1), best(timings, "ray", 2)
    print(f"\nray.init(num_cpus=2) in this process: {ray_start:.2f} s (not in the runs)")
    print(f"Ray map side, 1 -> 2 CPUs: {ray_one.map_side / ray_two.map_side:.2f}x faster")
    print(
        f"\nSimulation (from the measured costs, not a cluster run): {sim['dataset_gib']:g} GiB "
        f"= {sim['parts']:,} parts, {sim['threads']:,} threads, on {args.nodes} nodes x "
        f"{args.cpus} CPUs = {sim['workers']} workers: map side {sim['map_side_s']:.0f} s "
        f"({sim['seconds_per_part']:.2f} s per part), partition pass "
        f"{sim['partition_s']:.0f} s, ordered pass {sim['ordered_pass_s']:.0f} s (one "
        f"process), {sim['total_s']:.0f} s in all, against {sim['two_cpus_total_s']:.0f} s "
        "on this machine's 2 CPUs."
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    add_data(parser)
    add_run(parser, repeat=1)
    parser.add_argument("--nodes", type=int, default=4, help="simulated cluster: machines")
    parser.add_argument("--cpus", type=int, default=16, help="simulated cluster: CPUs each")
    parser.add_argument("--simulate-gib", type=float, default=100.0, help="simulated input")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import ray

    with work_folder(args.workdir) as workdir:
        real, _ = real_threads(args.realdata)
        source = workdir / "input.jsonl"
        size = write_threads(unique_threads(real, args.threads), source)
        config_path = workdir / "run.yaml"
        write_config(config_path, source, workdir / "unused", args.tokenizer)
        config = load_run_config(config_path)
        parts = max(1, math.ceil(size / DEFAULT_SPLIT_BYTES))
        print(f"{args.threads:,} threads, {size / MIB:.1f} MiB, about {parts} parts", flush=True)
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - start
        timings: list[Timing] = []
        expected: dict[str, bytes] | None = None
        differs = False
        runs: list[tuple[str, int]] = [("local", 1), ("ray", 1), ("local", 2), ("ray", 2)]
        for _ in range(args.repeat):
            for engine, workers in runs:
                out = workdir / f"{engine}-{workers}" / "out"  # one name: the card names it
                print(f"{engine}, {workers} worker(s) ...", flush=True)
                timings.append(timed_run(config, out, engine, workers))
                if expected is None:
                    expected = output_bytes(out)
                elif output_bytes(out) != expected:
                    print(f"  the {engine} output with {workers} worker(s) differs", flush=True)
                    differs = True
        ray.shutdown()
    sim = simulate(args, best(timings, "ray", 1), parts, args.threads, size)
    report(timings, sim, ray_start, args)
    headline(
        lower={
            f"{engine} {workers} worker(s) s": best(timings, engine, workers).seconds
            for engine, workers in runs
        }
    )
    figures = {"timings": [dataclasses.asdict(t) for t in timings], "simulation": sim}
    write_json(args.json, figures)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
