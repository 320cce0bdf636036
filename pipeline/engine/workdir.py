"""The work directory every engine runs parts into: the plan it was made for, one directory
per finished part (marked `DONE`, published atomically), and the locks that keep two runs
(and the workers of a killed one) apart. Engines differ only in where parts run."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol, TextIO

from pipeline import storage
from pipeline.output.files import atomic_text_output, file_sha256

PLAN_FILE = "plan.json"
PARTS_DIR = "parts"
OLD_PARTS_DIRS = ("units",)
"""Where plans of an earlier version kept their finished parts: such a work directory is
refused (its plan's version differs), never read, and `--fresh` removes them too."""
PARTIAL_DIR = "partial"
DONE_FILE = "DONE"
RUN_LOCK = "run.lock"
WORKERS_LOCK = "workers.lock"
PLAN_VERSION = "mms-local-engine-2"
"""The plan's layout (named for the first engine; every engine writes the same plan, so a
run stopped on one engine resumes on another). Version 1 listed its `units` and kept them in
`units/`; version 2 names them parts, in `parts/`."""
WORKERS_GONE_SECONDS = 60.0
"""How long a run waits for the workers of a killed earlier run to exit."""
_HELD: list[TextIO] = []
"""Lock files a worker holds for its lifetime."""


class Part(Protocol):
    """What an engine knows of a piece of work: a stable id (its directory's name) and a
    description for messages. A part is a frozen dataclass, recorded in the plan; what it
    reads is the per-part function's business, never the engine's."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def id(self) -> str: ...

    def describe(self) -> str: ...


Process = Callable[[Any, Path], None]
"""Writes the outputs of one part into the (empty) directory given. With workers it is
pickled: a module-level function, a functools.partial of one, or a picklable object."""


class WorkdirError(RuntimeError):
    """The work directory cannot be used: it holds another plan, or another run uses it."""


class PartFailed(RuntimeError):
    """A part's process function raised; the message names the part and its input."""

    def __init__(self, part: Part, error: BaseException | str, others: int = 0) -> None:
        more = f" (and {others} other part(s) failed)" if others else ""
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(f"part {part.id} ({part.describe()}) failed: {reason}{more}")
        self.part = part


def reset_workdir(workdir: Path) -> None:
    """Forget every part and the plan (`--fresh`); other files in `workdir` are left alone."""
    if not workdir.exists():
        return
    with run_lock(workdir):
        for name in (PARTS_DIR, *OLD_PARTS_DIRS, PARTIAL_DIR):
            shutil.rmtree(workdir / name, ignore_errors=True)
        (workdir / PLAN_FILE).unlink(missing_ok=True)


def run_part(process: Process, part: Part, workdir: Path) -> None:
    """Run one part into a directory of its own under `partial/`, mark it DONE (outputs
    and marker fsync'd) and rename it into `parts/`: a part's directory appears whole or
    not at all. Running a part twice (a retried task, a worker of a killed run) is
    harmless: the output is the same, and the first to be published stays. A failed part
    leaves nothing behind."""
    temp = workdir / PARTIAL_DIR / f"{part.id}.{uuid.uuid4().hex}"
    temp.mkdir(parents=True)
    try:
        process(part, temp)
        _sync_tree(temp)
        with open(temp / DONE_FILE, "w", encoding="utf-8") as marker:
            marker.write(done_record(part.id, temp))
            marker.flush()
            os.fsync(marker.fileno())
        _sync_path(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    parts_dir = workdir / PARTS_DIR
    target = parts_dir / part.id
    try:
        os.rename(temp, target)
    except OSError:
        if not (target / DONE_FILE).is_file():
            shutil.rmtree(temp, ignore_errors=True)
            raise
        shutil.rmtree(temp, ignore_errors=True)  # published already, by another attempt
    _sync_path(parts_dir)


def pending_parts(parts: Sequence[Part], workdir: Path) -> list[Part]:
    """The parts not yet DONE (a leftover without its marker is removed)."""
    parts_dir = workdir / PARTS_DIR
    pending = []
    for part in parts:
        target = parts_dir / part.id
        if not (target / DONE_FILE).is_file():
            shutil.rmtree(target, ignore_errors=True)
            pending.append(part)
    return pending


def done_record(part_id: str, directory: Path) -> str:
    """A part's DONE marker: its id, then a line per file of the part (sha256, bytes, path),
    so that a run resuming from it knows a file damaged since (`CheckPart`)."""
    lines = [part_id]
    for directory_name, subfolders, files in os.walk(directory):
        subfolders.sort()
        for name in sorted(files):
            path = Path(directory_name, name)
            if path != directory / DONE_FILE:
                relative = path.relative_to(directory).as_posix()
                lines.append(f"{file_sha256(path)} {path.stat().st_size} {relative}")
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class CheckPart:
    """A task: whether a finished part's files are as its DONE marker records them; the
    first that is not, and how, else None (picklable: any runner runs it)."""

    directory: str

    def __call__(self) -> str | None:
        folder = Path(self.directory)
        recorded = (folder / DONE_FILE).read_text(encoding="utf-8").splitlines()[1:]
        for line in recorded:
            digest, size, relative = line.split(" ", 2)
            path = folder / relative
            if not path.is_file():
                return f"{path} is missing"
            if path.stat().st_size != int(size) or file_sha256(path) != digest:
                return f"{path} is not as the part wrote it"
        return None


def _sync_tree(root: Path) -> None:
    """fsync every file and directory under `root`, deepest first."""
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            _sync_path(Path(directory, name))
        _sync_path(Path(directory))


def _sync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def hold_workers_lock(workdir: Path) -> None:
    """In a worker: hold the work directory's workers lock (shared) until exiting, so that
    a later run waits for the workers of a killed one."""
    lock = open(workdir / WORKERS_LOCK, "a")  # noqa: SIM115 - held until the worker exits
    fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
    _HELD.append(lock)


@contextmanager
def run_lock(workdir: Path) -> Iterator[None]:
    """One run at a time per work directory."""
    with open(workdir / RUN_LOCK, "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkdirError(f"{workdir} is in use by another run") from None
        yield


def wait_for_old_workers(workdir: Path) -> None:
    """Wait until no worker of an earlier run (one that was killed) holds the workers lock."""
    deadline = time.monotonic() + WORKERS_GONE_SECONDS
    with open(workdir / WORKERS_LOCK, "a") as lock:
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WorkdirError(
                        f"worker processes of an earlier run still use {workdir}; "
                        "end them and start again"
                    ) from None
                time.sleep(0.05)


@contextmanager
def workers_lock(workdir: Path) -> Iterator[None]:
    """Held shared by whoever runs parts (this process, or each pool worker)."""
    with open(workdir / WORKERS_LOCK, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
        yield


def plan_document(
    parts: Sequence[Part], config_digest: str, watched: Sequence[str] = ()
) -> dict[str, Any]:
    """What a work directory was planned for: the parts, the config digest, and the size
    and modification time (a stored file: its content tag) of every watched file (the job names the files its parts read
    and depend on)."""
    return {
        "version": PLAN_VERSION,
        "config_digest": config_digest,
        "files": {path: _stamp(path) for path in watched},
        "parts": [dataclasses.asdict(part) for part in parts],
    }


def _stamp(path: str) -> dict[str, Any]:
    """What tells a version of a watched file: its size and modification time (a stored
    file: its content tag)."""
    if storage.is_url(path):
        return storage.stamp(path)
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def check_unchanged(workdir: Path, watched: Sequence[str]) -> None:
    """Refuse the work when a watched file changed since the work directory was planned
    (an input appended to while its parts were read): the parts read one version of it,
    and its sha256 might be of another."""
    planned = json.loads((workdir / PLAN_FILE).read_text(encoding="utf-8"))["files"]
    for path in dict.fromkeys(watched):
        try:
            now: dict[str, Any] | None = _stamp(path)
        except FileNotFoundError:
            now = None
        if now != planned.get(path):
            how = "removed" if now is None else "its size or modification time differs"
            raise WorkdirError(
                f"{path} changed while the run read it ({how}); nothing was published: "
                "start over with --fresh once it no longer changes"
            )


def check_plan(workdir: Path, plan: dict[str, Any]) -> None:
    """Write plan.json, or refuse a work directory planned differently."""
    path = workdir / PLAN_FILE
    if not path.is_file():
        with atomic_text_output(path) as out:
            out.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        old = {"unreadable": str(err)}
    if old != plan:
        raise WorkdirError(
            f"{workdir} holds the work of another run ({_difference(old, plan)}); "
            "start over with --fresh, or use another work directory"
        )


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The first way two plans differ, for the error message."""
    if "unreadable" in old:
        return f"its {PLAN_FILE} cannot be read: {old['unreadable']}"
    if old.get("version") != new["version"]:
        return f"it was planned by {old.get('version')}, not {new['version']}"
    if old.get("config_digest") != new["config_digest"]:
        return f"the config changed: {old.get('config_digest')} -> {new['config_digest']}"
    old_files = old.get("files", {})
    for path, stat in new["files"].items():
        if old_files.get(path) != stat:
            return f"{path} is new or changed since"
    for path in old_files:
        if path not in new["files"]:
            return f"{path} is no longer read"
    return f"the parts differ ({len(old.get('parts', []))} then, {len(new['parts'])} now)"
