"""Child processes measured: wall time, CPU time (the child's and its reaped descendants',
from `wait4`), the peak RSS of its largest process, and, when sampled, the memory of its
whole process tree from /proc (PSS: a page shared by k processes counts 1/k in each)."""

from __future__ import annotations

import hashlib
import os
import resource
import select
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import MIB
from harness.trees import measured_tree


@dataclass(frozen=True, slots=True)
class ChildRun:
    """One measured child process (the memory of its tree only when it was sampled)."""

    name: str
    returncode: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    """wait4's `ru_maxrss`: the largest single process, the child or a reaped descendant."""
    parent_rss_mb: float = 0.0
    """This process's peak RSS at spawn: Linux charges it to the child until `exec`, so it
    is a floor under `peak_rss_mb` (a script that compares RSS keeps itself small)."""
    peak_pss_mb: float = 0.0
    """The highest sum of the tree's PSS in one sample."""
    peak_rss_sum_mb: float = 0.0
    """The highest sum of the tree's RSS in one sample (shared pages counted in each)."""
    largest_hwm_mb: float = 0.0
    """The highest VmHWM (the kernel's peak RSS) of one process of the tree."""
    processes: int = 0
    samples: int = 0
    all_seconds: tuple[float, ...] = ()
    """With several runs (`best_of`): the wall time of each; `seconds` is the fastest."""


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
    rss_kib: int = 0
    hwm_kib: int = 0
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


PYCACHE = Path(tempfile.gettempdir()) / "mms-benchmarks-pycache"
"""Where children keep their bytecode when this environment forbids writing it beside the
sources (PYTHONDONTWRITEBYTECODE): each run would otherwise compile every module again,
half a second of a small run that no installed copy pays."""


def cached_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """`env` (default: this one) with bytecode kept: under PYCACHE when it says not to
    write it beside the sources."""
    chosen = dict(os.environ if env is None else env)
    if chosen.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        chosen.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
    return chosen


def run_child(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    interval: float | None = None,
) -> ChildRun:
    """Run `argv` (stdout and stderr to `log`, in `cwd`, by default the measured tree, so
    that `python -m pipeline.cli` imports the tree measured) and measure it; with
    `interval`, sample its process tree's memory every `interval` seconds until it ends
    (reading /proc costs CPU the child would otherwise have: timed runs are not sampled)."""
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(log, "wb") as log_file:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=cached_bytecode(env),
            cwd=cwd or measured_tree(),
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
    return ChildRun(
        name=name,
        returncode=proc.returncode,
        seconds=round(seconds, 3),
        cpu_seconds=round(usage.ru_utime + usage.ru_stime, 2),
        peak_rss_mb=round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
        parent_rss_mb=round(parent_rss, 1),
        peak_pss_mb=round(peak.pss_kib / 1024, 1),
        peak_rss_sum_mb=round(peak.rss_kib / 1024, 1),
        largest_hwm_mb=round(peak.hwm_kib / 1024, 1),
        processes=len(peak.pids),
        samples=peak.samples,
    )


def checked(run: ChildRun, log: Path) -> ChildRun:
    """`run`, or RuntimeError with the end of its log when it failed."""
    if run.returncode != 0:
        raise RuntimeError(f"{run.name} exited with {run.returncode}:\n{tail(log)}")
    return run


def best_of(runs: Sequence[ChildRun]) -> ChildRun:
    """The fastest run, with the worst exit status and the highest peaks of them all."""
    fastest = min(runs, key=lambda run: run.seconds)
    failed = [run.returncode for run in runs if run.returncode != 0]
    return replace(
        fastest,
        returncode=failed[0] if failed else 0,
        peak_rss_mb=max(run.peak_rss_mb for run in runs),
        all_seconds=tuple(round(run.seconds, 2) for run in runs),
    )


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log."""
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def last_json_line(path: Path) -> str:
    """The last line of a child's log, where a child prints its figures as JSON."""
    return path.read_text().splitlines()[-1]


def count_lines(path: Path) -> int:
    """Newlines in `path`, read in small blocks so this process stays small."""
    count = 0
    with open(path, "rb", buffering=0) as stream:
        while block := stream.read(MIB):
            count += block.count(b"\n")
    return count


def file_digest(path: Path) -> str:
    """The sha256 of a file (empty when it is missing), read in blocks."""
    if not path.exists():
        return ""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as stream:
        while block := stream.read(MIB):
            digest.update(block)
    return digest.hexdigest()


def vm_status_kib(name: str) -> int:
    """A `VmRSS`/`VmHWM` line of /proc/self/status, in KiB: this process's own memory,
    unlike ru_maxrss, which also counts the parent's pages before exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")


def cpu_seconds() -> float:
    """CPU time of this process and of its children waited for (worker processes)."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages, for the record: the machine may be shared."""
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)
