"""A Ray cluster of several nodes simulated on this machine; the CPU time of every one of its
processes sampled from /proc, Ray's workers (what a raylet starts for tasks and actors)
apart from Ray's daemons (GCS, raylets, agents, monitors); and the two children that run on
it as drivers do: a run marking its phases' ends, and a driver that only waits."""

from __future__ import annotations

import cProfile
import functools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import MIB

OBJECT_STORE_BYTES = 256 * MIB
"""Each node's object store (Ray's default, 30% of the memory, times the nodes, would ask
for more shared memory than the machine has)."""
SYSTEM_NAMES = ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent")
"""Processes of Ray itself (with the Python daemons: dashboard, monitor, log monitor)."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STARTUP = "driver start"
ORDERED_END = "ordered pass's end (lint report, shuffled split)"
FILES = "reports, tokenizer, stats, card, manifest, publish"
VERIFY = "verify"
OUTPUTS = "the rest"
"""What the driver does after the last phase it marks."""
WAITING_SECONDS = 10.0
"""How long the driver waits on sleeping tasks to measure what waiting costs it."""
PROFILE_ENV = "MMS_BENCH_DRIVER_PROFILE"
"""Names a file the driver writes its cProfile statistics of `run_pipeline` to (unset:
not profiled; profiling adds to the driver's CPU, so a profiled run's times are not
figures)."""


@dataclass(slots=True)
class Proc:
    """A process of the cluster: its kind, and its CPU seconds when first and last seen."""

    kind: str
    first: float
    last: float


@dataclass
class ClusterCpu:
    """Samples the CPU time of every process under this one (the cluster's), but the
    driver's; a series of (wall clock, workers' CPU, daemons' CPU) spent since `begin`."""

    exclude: set[int] = field(default_factory=set)
    procs: dict[tuple[int, int], Proc] = field(default_factory=dict)
    baseline: dict[tuple[int, int], float] = field(default_factory=dict)
    series: list[tuple[float, float, float]] = field(default_factory=list)

    def sample(self) -> None:
        now = time.time()
        for key, cpu, kind in _tree(os.getpid(), self.exclude):
            seen = self.procs.get(key)
            if seen is None:
                self.procs[key] = Proc(kind, cpu, cpu)
            else:
                seen.last = cpu
        workers = daemons = 0.0
        for key, proc in self.procs.items():
            spent = proc.last - self.baseline.get(key, 0.0)
            if proc.kind == "worker":
                workers += spent
            else:
                daemons += spent
        self.series.append((now, workers, daemons))

    def begin(self) -> None:
        """From now on: what the processes alive now spent so far is not counted."""
        self.sample()
        self.baseline = {key: proc.last for key, proc in self.procs.items()}
        self.series = [(self.series[-1][0], 0.0, 0.0)]

    def at(self, when: float) -> tuple[float, float]:
        """(workers' CPU, daemons' CPU) spent from `begin` to `when`, interpolated."""
        before = self.series[0]
        for sample in self.series:
            if sample[0] >= when:
                span = sample[0] - before[0]
                share = (when - before[0]) / span if span > 0 else 1.0
                return tuple(  # type: ignore[return-value]
                    b + (s - b) * share for b, s in zip(before[1:], sample[1:], strict=True)
                )
            before = sample
        return before[1], before[2]

    def workers_seen(self) -> int:
        return sum(1 for key, proc in self.procs.items() if proc.kind == "worker")


def _tree(root: int, exclude: set[int]) -> list[tuple[tuple[int, int], float, str]]:
    """Every process under `root` (not `root`, nor the `exclude`d and theirs): its key (pid,
    start time), CPU seconds, and kind (`worker` or `daemon`)."""
    children: dict[int, list[tuple[int, list[bytes]]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append((int(entry.name), fields))
    found = []
    todo = [root]
    while todo:
        for pid, fields in children.get(todo.pop(), ()):
            if pid in exclude:
                continue
            todo.append(pid)
            cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
            found.append(((pid, int(fields[19])), cpu, _kind(pid)))
    return found


_KINDS: dict[int, str] = {}


def _kind(pid: int) -> str:
    """`worker`: a process a raylet started for tasks and actors; `daemon`: Ray's own."""
    if pid not in _KINDS:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            command = ""
        name = command.split(" ", 1)[0]
        daemon = any(name.endswith(system) for system in SYSTEM_NAMES) or not name.startswith(
            "ray::"
        )
        worker = "default_worker.py" in command  # a worker before it names itself
        _KINDS[pid] = "worker" if worker or not daemon else "daemon"
    return _KINDS[pid]


class Sampler(threading.Thread):
    """Samples `cpu` every `interval` seconds until stopped."""

    def __init__(self, cpu: ClusterCpu, interval: float) -> None:
        super().__init__(daemon=True)
        self.cpu, self.interval, self.stopped = cpu, interval, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.cpu.sample()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self.cpu.sample()


def start_cluster(nodes: int, cpus_per_node: int) -> Any:
    """A head node without CPUs (no task runs beside the driver) and `nodes` worker nodes
    of `cpus_per_node` CPUs, each its own raylet and object store, as on separate machines."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # this machine's processes only
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "object_store_memory": OBJECT_STORE_BYTES,
        },
    )
    for _ in range(nodes):
        cluster.add_node(num_cpus=cpus_per_node, object_store_memory=OBJECT_STORE_BYTES)
    cluster.wait_for_nodes()
    return cluster


def settle(cpu: ClusterCpu, quiet: float = 0.1, longest: float = 60.0) -> None:
    """Wait until the cluster spends less than `quiet` CPU seconds per second (its
    daemons and prestarted workers done starting)."""
    deadline = time.monotonic() + longest
    cpu.begin()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        cpu.sample()
        _, workers, daemons = cpu.series[-1]
        if workers + daemons < quiet:
            return
        cpu.begin()


# --------------------------------------------------------------------------- children on the cluster


def driver(config_path: Path, output: Path, marks_path: Path) -> int:
    """The driver (in a child process): run the config, recording every phase's end. Its
    start (Python, the imports) counts from the process's beginning, as a `mms run`'s."""
    from pipeline.jobs.run import job
    from pipeline.jobs.run.config import load_run_config

    marks: list[dict[str, Any]] = []

    def mark(phase: str) -> None:
        if all(mark["phase"] != phase for mark in marks):
            marks.append({"phase": phase, "wall": time.time(), "cpu": time.process_time()})

    def progress(stage: str, done: int, total: int, _: object = None) -> None:
        if done >= total:
            mark(stage)

    mark(STARTUP)
    _mark_calls(job, mark)
    profile_path = os.environ.get(PROFILE_ENV)
    # the main thread's CPU, not the wall: a wait for the workers costs the driver nothing
    profiler = cProfile.Profile(time.thread_time) if profile_path else None
    if profiler is not None:
        profiler.enable()
    result = job.run_pipeline(load_run_config(config_path), output=output, progress=progress)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile_path))
    mark(OUTPUTS)
    parts = getattr(result, "parts", 0)
    recorded = {"parts": parts, "pipeline": str(Path(job.__file__).parents[3]), "marks": marks}
    marks_path.write_text(json.dumps(recorded, indent=2) + "\n")
    return 0


def waiting(address: str, workers: int, out: Path) -> int:
    """The driver's cost of waiting (in a child process, connected as a run's driver is):
    its CPU while `map_tasks` waits WAITING_SECONDS for a sleeping task on every worker.
    Ray's own threads in the driver and the wait loop spend it whatever the run does, per
    second of waiting, not per thread."""
    from pipeline.engine.ray import RayRunner, RaySettings

    with RayRunner(RaySettings(address, None, workers)) as runner:
        runner.map_tasks([functools.partial(time.sleep, 0.1)] * workers)  # workers started
        wall, cpu = time.time(), time.process_time()
        runner.map_tasks([functools.partial(time.sleep, WAITING_SECONDS)] * workers)
        found = {"wall": time.time() - wall, "cpu": time.process_time() - cpu}
    out.write_text(json.dumps(found) + "\n")
    return 0


def _mark_calls(job: Any, mark: Callable[[str], None]) -> None:
    """Mark the ends of the driver's steps after the last part that report no progress:
    the ordered pass's end (the lint report, the shuffled split's shards), the files after
    it, and the output's verification. A step the run no longer has is not marked."""
    steps = {"write_shards": (None, ORDERED_END), "verify_output": (FILES, VERIFY)}
    for name, (before, after) in steps.items():
        function = getattr(job, name, None)
        if function is None:
            continue

        def marked(
            *args: Any, _function: Any = function, _names: Any = (before, after), **kwargs: Any
        ) -> Any:
            if _names[0] is not None:
                mark(_names[0])
            found = _function(*args, **kwargs)
            mark(_names[1])
            return found

        setattr(job, name, functools.wraps(function)(marked))
