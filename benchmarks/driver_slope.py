"""Measure the slope of the driver's CPU on Ray: the CPU of the process that runs `mms run`
(the driver) on a Ray cluster started apart (no worker is the driver's child), at several
sizes of the same real threads and on the largest one's threads spread over more parts,
fitted as fixed + per part + per thread; and the serial fraction that slope gives a run on
`--cpus` CPUs. With near dedup off and on (`stages.dedup.near: true`).

Run from the repository root, with the `ray` extra installed; the real files come from
$MMS_SHARED/realdata, the tokenizer from $MMS_SHARED/tokenizers:

    python benchmarks/driver_slope.py                         # 5k, 20k, 80k threads
    python benchmarks/driver_slope.py --threads 2000,8000 --near off   # quick check

1. build (untimed): the real threads, cycled and made unique (harness/corpus.py), one MMS
   JSONL file per size (the smaller the first threads of the largest), and the largest's
   threads again over `--spread` times its parts' count of files (as many threads, more
   parts: what grows there is a cost per part); the run benchmarks' config on each, on
   the ray engine, one worker per CPU of the cluster.
2. a cluster (harness/ray_cluster.py): a head without CPUs and `--nodes` nodes of
   `--cpus-per-node` CPUs, each its own raylet and object store, as on separate machines.
3. each run: a driver child (serial_fraction.py's, as `mms run` would run) connected to
   the cluster; its CPU is its own (`wait4`: exact), the workers' sampled from /proc
   (serial_fraction.measure_run). What the driver spends waiting (Ray's threads in it,
   per second of wall time, measured on sleeping tasks apart) is taken out: it grows with
   the wall time, and the driver spends it while the workers work.
4. the fit: the driver's CPU less its waiting, through every run by least squares, as
   fixed + ms per part + us per thread; the workers' CPU per thread from the largest run.
   The projection: `--simulate-gib` GiB (parts sized as a run plans them) on `--cpus`
   CPUs, serial = the driver's fitted CPU, parallel = the workers' CPU / `--cpus`; the
   serial fraction serial / (serial + parallel). At 64 CPUs a fraction of 10% needs the
   driver at <= 0.5 us per thread and <= 1 ms per part.

With `--profile DIR`, each driver writes its cProfile statistics to DIR (one `.prof` per
run, named by its input and near dedup; `python -m pstats FILE` reads one): what grows
from one size to the next shows there; the times of a profiled run are not figures.

Timings are reported, never asserted; the exit status is 1 when a run fails or writes
other than one row per thread (near dedup off; with it, near duplicates are dropped)."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from harness import MIB
from harness.corpus import sized_inputs, write_config
from harness.options import add_data, make_workdir, write_json
from harness.ray_cluster import PROFILE_ENV, start_cluster
from harness.table import print_aligned
from harness.trees import commit_of, headline, measured_tree
from serial_fraction import Run, measure_run, measure_waiting

from pipeline.sources.parts import split_bytes_for

DEFAULT_THREADS = "5000,20000,80000"
PER_THREAD_GOAL_US = 0.5
PER_PART_GOAL_MS = 1.0


@dataclass
class Measured:
    """One run: its threads, parts, bytes, wall and CPU seconds (the driver's own, less
    its waiting, and the workers')."""

    name: str
    threads: int
    parts: int
    bytes: int
    wall_s: float
    driver_cpu_s: float
    driver_working_s: float
    workers_cpu_s: float


def build_inputs(args: argparse.Namespace, workdir: Path, sizes: list[int]) -> list[Path]:
    """One MMS JSONL file per size, and the largest size's threads over more files."""
    return sized_inputs(
        args.realdata,
        workdir,
        sizes,
        lambda largest: args.spread * math.ceil(largest / split_bytes_for(largest)),
    )


def write_run_config(
    args: argparse.Namespace, source: Path, address: str, near: bool
) -> tuple[Path, int]:
    """The run benchmarks' config on `source` (near dedup on or off) on the cluster at
    `address`, one worker per CPU; and the input's bytes."""
    label = "near" if near else "exact"
    path = source.with_name(f"run-{source.stem}-{label}.yaml")
    stages = {"dedup": {"enabled": True, "near": True}} if near else None
    write_config(path, source, source.with_name("out"), args.tokenizer, stages=stages)
    config = yaml.safe_load(path.read_text())
    workers = args.nodes * args.cpus_per_node
    config["engine"] = {"kind": "ray", "address": address, "workers": workers}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    files = sorted(source.glob("*.jsonl")) if source.is_dir() else [source]
    return path, sum(file.stat().st_size for file in files)


def measured(name: str, run: Run, waiting_rate: float) -> Measured:
    """A run's figures, the driver's waiting taken out of its CPU."""
    workers = sum(phase.workers_cpu for phase in run.phases)
    working = max(0.0, run.driver_rusage_cpu_s - waiting_rate * run.wall_s)
    return Measured(
        name,
        run.threads,
        run.parts,
        run.bytes,
        run.wall_s,
        run.driver_rusage_cpu_s,
        working,
        workers,
    )


def fit(runs: list[Measured]) -> tuple[float, float, float]:
    """(fixed s, s per part, s per thread) of the driver's working CPU, least squares
    through every run, none negative (a negative term is dropped and the rest refitted)."""
    terms = [0, 1, 2]
    while True:
        rows = np.array([[1.0, run.parts, run.threads] for run in runs])[:, terms]
        found, *_ = np.linalg.lstsq(rows, np.array([run.driver_working_s for run in runs]))
        negative = [term for term, value in zip(terms, found, strict=True) if value < 0]
        if not negative or len(terms) == 1:
            result = [0.0, 0.0, 0.0]
            for term, value in zip(terms, found, strict=True):
                result[term] = max(0.0, float(value))
            return result[0], result[1], result[2]
        terms.remove(negative[0])


def project(args: argparse.Namespace, runs: list[Measured]) -> dict[str, Any]:
    """The fitted slope, and the serial fraction it gives `--simulate-gib` GiB on `--cpus`
    CPUs (and the same run with the driver at the goals)."""
    fixed, per_part, per_thread = fit(runs)
    largest = max(runs, key=lambda run: (run.threads, -run.parts))
    total = args.simulate_gib * 1024 * MIB
    parts = math.ceil(total / split_bytes_for(total))
    threads = round(largest.threads * total / largest.bytes)
    parallel = largest.workers_cpu_s / largest.threads * threads / args.cpus

    def fraction(part_s: float, thread_s: float) -> float:
        serial = fixed + part_s * parts + thread_s * threads
        return serial / (serial + parallel)

    return {
        "fixed_s": fixed,
        "per_part_ms": per_part * 1e3,
        "per_thread_us": per_thread * 1e6,
        "workers_per_thread_us": largest.workers_cpu_s / largest.threads * 1e6,
        "simulated_gib": args.simulate_gib,
        "simulated_parts": parts,
        "simulated_threads": threads,
        "cpus": args.cpus,
        "serial_fraction": fraction(per_part, per_thread),
        "serial_fraction_at_goals": fraction(PER_PART_GOAL_MS / 1e3, PER_THREAD_GOAL_US / 1e6),
    }


def report(label: str, runs: list[Measured], figures: dict[str, Any]) -> None:
    """The runs, then the slope and the projection."""
    rows = [["run", "threads", "parts", "MiB", "wall s", "driver CPU s", "less waiting s",
             "workers CPU s"]]  # fmt: skip
    for run in runs:
        rows.append(
            [run.name, f"{run.threads:,}", str(run.parts), f"{run.bytes / MIB:.1f}",
             f"{run.wall_s:.2f}", f"{run.driver_cpu_s:.2f}", f"{run.driver_working_s:.2f}",
             f"{run.workers_cpu_s:.2f}"]
        )  # fmt: skip
    print(f"\n== near dedup {label}")
    print_aligned(rows)
    print(
        f"driver: {figures['fixed_s']:.2f} s fixed + {figures['per_part_ms']:.2f} ms per part "
        f"+ {figures['per_thread_us']:.2f} us per thread (goals: <= {PER_PART_GOAL_MS:g} ms, "
        f"<= {PER_THREAD_GOAL_US:g} us); workers {figures['workers_per_thread_us']:.0f} us "
        f"per thread.\nProjected {figures['simulated_gib']:g} GiB "
        f"({figures['simulated_parts']:,} parts, {figures['simulated_threads']:,} threads) "
        f"on {figures['cpus']} CPUs: serial fraction {figures['serial_fraction']:.1%} "
        f"(with the driver at the goals: {figures['serial_fraction_at_goals']:.1%})"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default=DEFAULT_THREADS, help="sizes, comma-separated")
    parser.add_argument(
        "--spread", type=int, default=4, help="the largest size again in this many times "
        "its parts"
    )  # fmt: skip
    parser.add_argument("--near", choices=["off", "on", "both"], default="both")
    parser.add_argument("--nodes", type=int, default=2, help="worker nodes of the cluster")
    parser.add_argument("--cpus-per-node", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=64, help="projected cluster's CPUs")
    parser.add_argument("--simulate-gib", type=float, default=100.0, help="projected input")
    parser.add_argument("--interval", type=float, default=0.1, help="CPU sampling, seconds")
    add_data(parser)
    parser.add_argument("--profile", type=Path, default=None, help="cProfile each driver")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sorted(int(size) for size in args.threads.split(","))
    labels = {"off": [False], "on": [True], "both": [False, True]}[args.near]
    workdir, created = make_workdir(args.workdir)
    tree = measured_tree()
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), saved]))
    results: dict[str, Any] = {"commit": commit_of(tree), "sizes": sizes}
    try:
        sources = build_inputs(args, workdir, sizes)
        cluster = start_cluster(args.nodes, args.cpus_per_node)
        try:
            print(f"{tree} ({commit_of(tree)}): cluster {cluster.address}", flush=True)
            rate = measure_waiting(args, workdir, cluster.address)
            results["driver_waiting_rate"] = rate
            for near in labels:
                label = "on" if near else "off"
                runs = []
                for source, count in zip(sources, [*sizes, sizes[-1]], strict=True):
                    config, size = write_run_config(args, source, cluster.address, near)
                    if args.profile is not None:
                        args.profile.mkdir(parents=True, exist_ok=True)
                        target = args.profile / f"{source.stem}-near-{label}.prof"
                        os.environ[PROFILE_ENV] = str(target.resolve())
                    run = measure_run(args, workdir, config, count, size, every_row=not near)
                    runs.append(measured(source.stem, run, rate))
                figures = project(args, runs)
                report(label, runs, figures)
                results[f"near_{label}"] = {"runs": [asdict(r) for r in runs], **figures}
        finally:
            cluster.shutdown()
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    finally:
        if created:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nthe driver's CPU while waiting: {results['driver_waiting_rate']:.3f} s per second")
    first = results[f"near_{'off' if False in labels else 'on'}"]
    headline(
        lower={
            "driver us/thread": first["per_thread_us"],
            "driver ms/part": first["per_part_ms"],
            "serial fraction": first["serial_fraction"],
        }
    )
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
