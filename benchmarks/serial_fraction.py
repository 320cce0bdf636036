"""Measure the serial fraction of `mms run` on a Ray cluster of several nodes simulated on
this machine: the driver process's CPU time as a share of the whole run's CPU (the driver,
every Ray worker, Ray's own daemons), the wall time, the CPU of each phase split between the
driver and the workers, and from those per-part costs the projection to a large dataset on a
real cluster (benchmarks/engines.py's method, per phase). This machine has 2 cores, so the
speed-up cannot be measured here; the share of the work that one process does alone can.

Run from the repository root, with the `ray` extra installed; the real files come from
$MMS_SHARED/realdata, the tokenizer from $MMS_SHARED/tokenizers (MMS_SHARED defaults to
../shared):

    python benchmarks/serial_fraction.py                    # 200,000 threads, ~5 min
    python benchmarks/serial_fraction.py --threads 20000    # quick check, ~1 min
    python benchmarks/serial_fraction.py --nodes 3 --cpus-per-node 1 --json figures.json
    python benchmarks/serial_fraction.py --before COMMIT    # that commit, then this tree

1. build (untimed): the real threads, cycled and made unique (harness/corpus.py),
   written as one MMS JSONL file (8 MiB parts), and the run benchmarks' config
   (lint, exact dedup, Llama-3 tokenizer with truncation, one split) on the ray engine with
   the cluster's address and one worker per CPU of the cluster.
2. a cluster (`ray.cluster_utils.Cluster`, started by this process): a head node with no
   CPU (GCS, the head's raylet; no task runs there) and `--nodes` worker nodes of
   `--cpus-per-node` CPUs each, each node its own raylet and object store, as on separate
   machines. The script waits until the cluster is idle before the run.
3. the run: `run_pipeline` in a child process (the driver, as `mms run` would be) connected
   to the cluster; it records, at every phase's end (its progress callback), the wall clock
   and its own CPU time. Meanwhile this process samples, every `--interval` seconds, the CPU
   time (user + system, /proc/PID/stat) of every process of the cluster: Ray's workers (the
   processes a raylet starts for tasks and actors, `ray::...`) and Ray's daemons (GCS,
   raylets, agents, monitors), counting only what each spent after the run began. The
   driver's CPU is its own (`wait4`'s resource usage: exact).
4. each phase (the map side "read, lint, tokenize", Ray's "partition keys", the ordered
   pass, the outputs after it; whatever phases the run reports, in the order they end)
   gets the driver's CPU and the workers' CPU spent in it.

5. the driver's cost of waiting: a child connected to the same cluster waits, through the
   engine's `map_tasks`, on one sleeping task per worker for WAITING_SECONDS; its CPU per
   second of waiting (Ray's threads in every driver, the wait loop) grows with the wall
   time, not with the threads, so it is taken out of every phase before the fit and
   projected as that rate times the phase's projected workers' time (counted as serial:
   an upper bound, the driver waits while the workers work).

With `--before COMMIT` (a commit, checked out in a temporary git worktree, or a folder
that is a checkout of it), the same inputs are measured first on a cluster whose
processes import `pipeline` from that checkout, then on a new cluster importing it from
this tree, and a last table puts the two side by side.

Three runs on each tree: `--small` threads, `--threads` threads, and the same `--threads`
threads spread over `--split-files` files (four times the parts): what grows from the
second to the third is a cost per part (a task planned, a part's results merged), what
grows from the first to the second beyond that a cost per thread.

The projection to `--simulate-gib` GiB on `--sim-nodes` x `--sim-cpus` CPUs: the map
side takes ceil(parts / workers) x its worker CPU per part (a part is one worker's task);
any other phase, its worker CPU per thread x threads / workers; the driver's CPU of every
phase, fixed + per part x parts + per thread x threads, on one CPU (it is one process). A phase's projected time is
the driver's plus the workers' (as if one waited for the other: an upper bound); the
driver's start (imports, before `run_pipeline`) is a fixed cost. The serial fraction is
the driver's projected seconds over the projected wall time. Goals: driver share
of the run's CPU <= 5%, projected serial fraction <= 10%. Timings are reported, never
asserted; the exit status is 1 when the run fails or writes other than one row per thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import MIB
from harness.corpus import sized_inputs, write_config
from harness.options import add_data, make_workdir, write_json
from harness.procs import tail
from harness.ray_cluster import (
    STARTUP,
    WAITING_SECONDS,
    ClusterCpu,
    Sampler,
    driver,
    settle,
    start_cluster,
    waiting,
)
from harness.table import print_aligned
from harness.trees import commit_of, headline, measured_tree, worktree

from pipeline.sources.parts import split_bytes_for

DEFAULT_THREADS = 200_000
MAP = "read, lint, tokenize"
"""The map side's progress stage: its cost is per part, one part per worker at a time."""
# --------------------------------------------------------------------------- figures


@dataclass
class Phase:
    """One phase of the run: its wall time, and the CPU seconds of the driver, of Ray's
    workers and of Ray's daemons in it."""

    name: str
    seconds: float
    driver_cpu: float
    workers_cpu: float
    daemons_cpu: float


def phases(marks: list[dict[str, Any]], cpu: ClusterCpu) -> list[Phase]:
    """The phases between the driver's marks (the first from the driver's start)."""
    found = []
    start = marks[0]
    found.append(Phase(STARTUP, 0.0, start["cpu"], 0.0, 0.0))
    before = start
    for mark in marks[1:]:
        workers_then, daemons_then = cpu.at(before["wall"])
        workers, daemons = cpu.at(mark["wall"])
        found.append(
            Phase(
                mark["phase"],
                mark["wall"] - before["wall"],
                mark["cpu"] - before["cpu"],
                workers - workers_then,
                daemons - daemons_then,
            )
        )
        before = mark
    return found


@dataclass
class Run:
    """One measured run: its size, wall time, the driver's CPU (wait4) and the phases."""

    threads: int
    bytes: int
    parts: int
    wall_s: float
    driver_rusage_cpu_s: float
    worker_processes: int
    phases: list[Phase]

    def phase(self, name: str) -> Phase | None:
        return next((phase for phase in self.phases if phase.name == name), None)

    def total(self, side: str) -> float:
        return sum(getattr(phase, side) for phase in self.phases)


def fitted(small: float, big: float, x_small: float, x_big: float) -> tuple[float, float]:
    """(fixed cost, cost per unit) through two measurements, neither negative: a cost that
    did not grow is all fixed, one that grew more than in proportion all per unit."""
    if x_big <= x_small:
        return 0.0, big / x_big
    slope = max(0.0, (big - small) / (x_big - x_small))
    fixed = big - slope * x_big
    if fixed < 0:
        return 0.0, big / x_big
    return fixed, slope


def fitted_driver(
    runs: tuple[Run, Run, Run], costs: tuple[float, float, float]
) -> tuple[float, float, float]:
    """The driver's (fixed, per part, per thread) cost of a phase through its `costs` in
    the small run, the big one and the big one in more parts (as many threads: what grew
    there is per part), none negative."""
    small, big, spread = runs
    per_part = 0.0
    if spread.parts > big.parts:
        per_part = max(0.0, (costs[2] - costs[1]) / (spread.parts - big.parts))
    rest = [max(0.0, cost - per_part * run.parts) for cost, run in zip(costs, runs, strict=True)]
    fixed, per_thread = fitted(rest[0], rest[1], small.threads, big.threads)
    return fixed, per_part, per_thread


def project(
    args: argparse.Namespace, small: Run, big: Run, spread: Run, waiting_rate: float = 0.0
) -> dict[str, Any]:
    """The run of `--simulate-gib` GiB on `--sim-nodes` x `--sim-cpus` CPUs, phase by
    phase: the driver's costs fitted through the three runs as fixed + per part + per
    thread (`fitted_driver`), the workers' through the small and the big run (the map side
    per part, the other phases per thread); beside it, every cost taken as per unit
    (benchmarks/engines.py's method: an upper bound, fixed costs scaled too, the driver's
    per thread). The projected parts are sized as a run plans them (`split_bytes_for`).
    What the driver spends waiting (`waiting_rate` CPU seconds per second, measured apart)
    grows with a phase's wall time, not its threads: it is taken out of each phase before
    the fit and projected as the rate times the phase's projected workers' time."""
    total_bytes = args.simulate_gib * 1024 * MIB
    sim_parts = math.ceil(total_bytes / split_bytes_for(total_bytes))
    sim_threads = round(big.threads * total_bytes / big.bytes)
    workers = args.sim_nodes * args.sim_cpus
    # a projected part holds more bytes than a measured one (parts grow past MAX_PARTS):
    # a worker's map-side CPU per part grows with them, the driver's per part does not
    part_scale = (total_bytes / sim_parts) / (big.bytes / big.parts)
    rows = []
    for phase in big.phases:
        other = small.phase(phase.name) or phase
        if phase.name == STARTUP:
            rows.append({"phase": phase.name, "driver_s": phase.driver_cpu, "workers_s": 0.0,
                         "proportional_driver_s": phase.driver_cpu,
                         "proportional_workers_s": 0.0})  # fmt: skip
            continue
        mapped = phase.name == MAP
        x_small, x_big = (small.parts, big.parts) if mapped else (small.threads, big.threads)
        # the map side: one part per worker at a time; the rest spreads per thread
        share = math.ceil(sim_parts / workers) * part_scale if mapped else sim_threads / workers
        more = spread.phase(phase.name) or phase
        d_fixed, d_part, d_thread = fitted_driver(
            (small, big, spread),
            (
                _working(other, waiting_rate),
                _working(phase, waiting_rate),
                _working(more, waiting_rate),
            ),
        )
        w_fixed, w_unit = fitted(other.workers_cpu, phase.workers_cpu, x_small, x_big)
        workers_s = w_fixed + w_unit * share
        rows.append(
            {
                "phase": phase.name,
                "driver_fixed_s": d_fixed,
                "driver_per_part_s": d_part,
                "driver_per_thread_s": d_thread,
                "workers_fixed_s": w_fixed,
                "workers_per_unit_s": w_unit,
                "unit": "part" if mapped else "thread",
                "driver_waiting_s": waiting_rate * workers_s,
                "driver_s": d_fixed
                + d_part * sim_parts
                + d_thread * sim_threads
                + waiting_rate * workers_s,
                "workers_s": workers_s,
                "proportional_driver_s": phase.driver_cpu / big.threads * sim_threads,
                "proportional_workers_s": phase.workers_cpu / x_big * share,
            }
        )
    figures: dict[str, Any] = {
        "dataset_gib": args.simulate_gib,
        "parts": sim_parts,
        "threads": sim_threads,
        "workers": workers,
        "driver_waiting_rate": waiting_rate,
        "phases": rows,
    }
    for prefix in ("", "proportional_"):
        serial = sum(row[f"{prefix}driver_s"] for row in rows)
        wall = serial + sum(row[f"{prefix}workers_s"] for row in rows)
        figures[f"{prefix}wall_s"] = wall
        figures[f"{prefix}serial_s"] = serial
        figures[f"{prefix}serial_fraction"] = serial / wall if wall else 0.0
    return figures


def _working(phase: Phase, waiting_rate: float) -> float:
    """The driver's CPU in a phase less what waiting for its wall time costs it."""
    return max(0.0, phase.driver_cpu - waiting_rate * phase.seconds)


def report(big: Run, small: Run, spread: Run, sim: dict[str, Any]) -> None:
    """The tables: the runs' phases and CPU shares, then the projection."""
    for run in (small, big, spread):
        rows = [["phase", "wall s", "driver CPU s", "workers CPU s", "Ray daemons CPU s"]]
        for p in run.phases:
            rows.append(
                [p.name, f"{p.seconds:.2f}", f"{p.driver_cpu:.2f}", f"{p.workers_cpu:.2f}",
                 f"{p.daemons_cpu:.2f}"]
            )  # fmt: skip
        driver, workers = run.total("driver_cpu"), run.total("workers_cpu")
        daemons = run.total("daemons_cpu")
        rows.append(
            ["all", f"{run.wall_s:.2f}", f"{driver:.2f}", f"{workers:.2f}", f"{daemons:.2f}"]
        )
        total = driver + workers + daemons
        print(f"\n{run.threads:,} threads, {run.bytes / MIB:.1f} MiB, {run.parts} parts:")
        print_aligned(rows)
        print(
            f"driver share of the run's CPU: {driver / total:.1%} ({driver:.1f} of "
            f"{total:.1f} CPU s; of the driver's and the workers' alone: "
            f"{driver / (driver + workers):.1%}); the driver's own CPU (wait4): "
            f"{run.driver_rusage_cpu_s:.1f} s; {run.worker_processes} Ray worker processes"
        )
    print(
        f"\nThe driver's CPU while it waits on the cluster's tasks: "
        f"{sim['driver_waiting_rate']:.3f} s per second (measured over {WAITING_SECONDS:g} s "
        "of sleeping tasks; taken out of each phase before the fit, projected per second of "
        "the workers' time)"
    )
    print(
        f"\nProjection (the driver's costs fitted through the three runs as fixed + per part + "
        f"per thread, the workers' as fixed + per part (map side) or per thread; not a cluster "
        f"run): {sim['dataset_gib']:g} GiB = {sim['parts']:,} parts, {sim['threads']:,} "
        f"threads, {sim['workers']} workers; in brackets, every cost per unit (engines.py's "
        "method)"
    )
    rows = [["phase", "driver fixed s", "driver ms/part", "driver us/thread",
             "driver waiting s", "driver s", "workers s"]]  # fmt: skip
    for row in sim["phases"]:
        fitted_row = "driver_per_part_s" in row
        rows.append(
            [row["phase"], f"{row.get('driver_fixed_s', row['driver_s']):.2f}",
             f"{row['driver_per_part_s'] * 1e3:.2f}" if fitted_row else "-",
             f"{row['driver_per_thread_s'] * 1e6:.2f}" if fitted_row else "-",
             f"{row['driver_waiting_s']:.0f}" if fitted_row else "-",
             f"{row['driver_s']:.0f} ({row['proportional_driver_s']:.0f})",
             f"{row['workers_s']:.0f} ({row['proportional_workers_s']:.0f})"]
        )  # fmt: skip
    print_aligned(rows)
    print(
        f"projected wall {sim['wall_s']:.0f} s, of which the driver alone "
        f"{sim['serial_s']:.0f} s: serial fraction {sim['serial_fraction']:.1%} "
        f"({sim['proportional_serial_fraction']:.1%} with every cost per unit). "
        "Goals: driver share <= 5%, serial fraction <= 10%."
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument(
        "--small", type=int, default=None, help="threads of the run that sets the fixed "
        "costs apart (default a tenth of --threads, at least 2,000)"
    )  # fmt: skip
    parser.add_argument(
        "--split-files", type=int, default=None, help="files of the third run (the big "
        "run's threads in more parts; default four times the big run's parts)"
    )  # fmt: skip
    parser.add_argument("--nodes", type=int, default=3, help="worker nodes of the cluster")
    parser.add_argument("--cpus-per-node", type=int, default=1)
    add_data(parser)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--interval", type=float, default=0.1, help="CPU sampling, seconds")
    parser.add_argument("--sim-nodes", type=int, default=4, help="projected cluster: machines")
    parser.add_argument("--sim-cpus", type=int, default=16, help="projected cluster: CPUs each")
    parser.add_argument("--simulate-gib", type=float, default=100.0, help="projected input")
    parser.add_argument(
        "--before", default=None, help="a commit, or a checkout of it: measured first, on "
        "its own cluster, then this tree"
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--driver", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--waiting", nargs=3, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_inputs(args: argparse.Namespace, workdir: Path, sizes: list[int]) -> list[Path]:
    """An MMS JSONL input for each size, then the largest's threads again over
    `--split-files` files (harness/corpus.py's `sized_inputs`)."""
    return sized_inputs(
        args.realdata,
        workdir,
        sizes,
        lambda largest: args.split_files or 4 * math.ceil(largest / split_bytes_for(0)),
    )


def write_configs(
    args: argparse.Namespace, sources: list[Path], address: str
) -> list[tuple[Path, int]]:
    """The run benchmark's config for each input on the cluster at `address`, one worker
    per CPU; each with its input's bytes."""
    import yaml

    configs = []
    for source in sources:
        config_path = source.with_name(f"run-{source.stem}.yaml")
        write_config(config_path, source, source.with_name("out"), args.tokenizer)
        config = yaml.safe_load(config_path.read_text())
        workers = args.nodes * args.cpus_per_node
        config["engine"] = {"kind": "ray", "address": address, "workers": workers}
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        size = (
            sum(path.stat().st_size for path in source.glob("*.jsonl"))
            if source.is_dir()
            else source.stat().st_size
        )
        configs.append((config_path, size))
    return configs


def measure_run(
    args: argparse.Namespace,
    workdir: Path,
    config_path: Path,
    threads: int,
    size: int,
    *,
    every_row: bool = True,
) -> Run:
    """One driver child on the cluster, its phases, and the cluster's CPU meanwhile;
    `every_row`: the run must write one row per thread (no dedup drops any)."""
    cpu = ClusterCpu()
    settle(cpu)
    marks_path, out, log = workdir / "marks.json", workdir / "out", workdir / "driver.log"
    shutil.rmtree(out, ignore_errors=True)
    sampler = Sampler(cpu, args.interval)
    script = os.path.abspath(__file__)
    command = [sys.executable, script, "--driver", str(config_path), str(out), str(marks_path)]
    # the driver runs in the measured tree: Ray puts the driver's working folder on its
    # workers' import path, so they import `pipeline` from the same tree
    tree = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    print(f"running {threads:,} threads ...", flush=True)
    with open(log, "wb") as log_file:
        cpu.begin()
        sampler.start()
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=tree)
        cpu.exclude.add(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        time.sleep(max(1.0, 3 * args.interval))  # the job's workers end after the driver
        sampler.stop()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the driver failed:\n{tail(log)}")
    manifest = json.loads((out / "manifest.json").read_text())
    rows = sum(split["rows"] for split in manifest["splits"].values())
    if every_row and rows != threads:
        raise RuntimeError(f"the run wrote {rows:,} rows for {threads:,} threads")
    recorded = json.loads(marks_path.read_text())
    if Path(recorded["pipeline"]) != Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]):
        raise RuntimeError(f"the driver imported pipeline from {recorded['pipeline']}")
    return Run(
        threads,
        size,
        recorded["parts"],
        seconds,
        usage.ru_utime + usage.ru_stime,
        cpu.workers_seen(),
        phases(recorded["marks"], cpu),
    )


def measure_waiting(args: argparse.Namespace, workdir: Path, address: str) -> float:
    """The driver's CPU seconds per second of waiting on the cluster's tasks (`waiting`,
    in a child process of the measured tree)."""
    out = workdir / "waiting.json"
    workers = args.nodes * args.cpus_per_node
    script = os.path.abspath(__file__)
    tree = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    command = [sys.executable, script, "--waiting", address, str(workers), str(out)]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"measuring the driver's waiting failed:\n{done.stderr[-2000:]}")
    found = json.loads(out.read_text())
    return float(found["cpu"]) / float(found["wall"])


def measure(
    args: argparse.Namespace, workdir: Path, tree: Path, sources: list[Path], sizes: list[int]
) -> tuple[Run, Run, Run, float]:
    """The small run, the big one, and the big one's threads in more parts, on a new
    cluster whose every process (and the driver) imports `pipeline` from `tree`; and the
    driver's CPU per second of waiting on that cluster."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), saved]))
    try:
        cluster = start_cluster(args.nodes, args.cpus_per_node)
        try:
            configs = write_configs(args, sources, cluster.address)
            print(
                f"{tree} ({commit_of(tree)}): cluster {cluster.address}, a head without CPUs "
                f"and {args.nodes} node(s) of {args.cpus_per_node} CPU(s)",
                flush=True,
            )
            small, big, spread = (
                measure_run(args, workdir, config_path, count, size)
                for count, (config_path, size) in zip([*sizes, sizes[-1]], configs, strict=True)
            )
            rate = measure_waiting(args, workdir, cluster.address)
        finally:
            cluster.shutdown()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return small, big, spread, rate


def side_by_side(results: list[dict[str, Any]]) -> None:
    """One line per tree: the driver's share, the wall time, the projection."""
    rows = [["tree", "threads", "wall s", "driver CPU s", "all CPU s", "driver share",
             "projected wall s", "serial fraction"]]  # fmt: skip
    for result in results:
        big = Run(**{**result["runs"][1], "phases": []})
        found = [Phase(**phase) for phase in result["runs"][1]["phases"]]
        driver = sum(p.driver_cpu for p in found)
        total = driver + sum(p.workers_cpu + p.daemons_cpu for p in found)
        sim = result["projection"]
        rows.append(
            [result["commit"], f"{big.threads:,}", f"{big.wall_s:.2f}", f"{driver:.2f}",
             f"{total:.2f}", f"{driver / total:.1%}", f"{sim['wall_s']:.0f}",
             f"{sim['serial_fraction']:.1%}"]
        )  # fmt: skip
    print()
    print_aligned(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.driver is not None:
        return driver(*args.driver)
    if args.waiting is not None:
        address, workers, out = args.waiting
        return waiting(address, int(workers), Path(out))
    workdir, created = make_workdir(args.workdir)
    sizes = [args.small or max(2_000, args.threads // 10), args.threads]
    results: list[dict[str, Any]] = []
    try:
        with contextlib.ExitStack() as stack:
            before = [stack.enter_context(worktree(args.before))] if args.before else []
            sources = build_inputs(args, workdir, sizes)
            for tree in [*before, measured_tree()]:
                small, big, spread, rate = measure(args, workdir, tree, sources, sizes)
                sim = project(args, small, big, spread, rate)
                print(f"\n== {tree} ({commit_of(tree)})")
                report(big, small, spread, sim)
                results.append(
                    {"tree": str(tree), "commit": commit_of(tree),
                     "runs": [asdict(small), asdict(big), asdict(spread)], "projection": sim}
                )  # fmt: skip
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    finally:
        if created:
            shutil.rmtree(workdir, ignore_errors=True)
    if len(results) > 1:
        side_by_side(results)
    last = results[-1]
    big = last["runs"][1]
    driver_cpu = sum(phase["driver_cpu"] for phase in big["phases"])
    headline(
        lower={
            "wall s": big["wall_s"],
            "driver CPU s": driver_cpu,
            "serial fraction": last["projection"]["serial_fraction"],
        }
    )
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
