"""Parts in plan order, whatever runs them: `iter_parts` claims the work directory, checks
its plan, hands the parts not yet DONE to a runner (local processes, or Ray) and yields
every part's directory in plan order, each as soon as it and the parts before it are done."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pipeline.engine.local import LocalRunner
from pipeline.engine.workdir import (
    PARTIAL_DIR,
    PARTS_DIR,
    CheckPart,
    Part,
    Process,
    check_plan,
    pending_parts,
    plan_document,
    run_lock,
    wait_for_old_workers,
)

T = TypeVar("T")


class Runner(Protocol):
    """Runs parts (each with `workdir.run_part`), yielding each part as it is DONE, in any
    order; raises `PartFailed` for a failed part once the parts already running are done.
    Closing the iterator early stops the parts not yet started. A runner is a context
    manager: entered, it is ready to run (connected to its cluster). `map_tasks` runs any
    other work of a job in parallel (the partition pass, pipeline/engine/keys.py; a run's
    parts' decisions and shard writes): every task's result in the tasks' order."""

    name: str

    def __enter__(self) -> Runner: ...

    def __exit__(self, *_: object) -> None: ...

    def run(
        self,
        pending: list[Part],
        process: Process,
        workdir: Path,
        prepare_workers: Callable[[], object] | None,
    ) -> Generator[Part, None, None]: ...

    def map_tasks(
        self, tasks: Sequence[Callable[[], T]], done: Callable[[int], None] | None = None
    ) -> list[T]: ...


APART_ENGINES = frozenset({"ray"})
"""The engines whose workers run outside the process that runs the job (on other machines):
work of the job that grows with the data goes to them however small, for that process is
the cluster's one serial step."""


def workers_apart(runner: Runner) -> bool:
    """Whether `runner`'s workers run apart from this process (see APART_ENGINES)."""
    return runner.name in APART_ENGINES


def run_parts(parts: Sequence[Part], process: Process, workdir: Path, **options: Any) -> list[Path]:
    """Run every part (as `iter_parts`, with its keyword `options`) and return the part
    directories in plan order."""
    return list(iter_parts(parts, process, workdir, **options))


def iter_parts(
    parts: Sequence[Part],
    process: Process,
    workdir: Path,
    *,
    config_digest: str = "",
    workers: int = 1,
    runner: Runner | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_claimed: Callable[[], None] | None = None,
    prepare_workers: Callable[[], object] | None = None,
    watched: Sequence[str] = (),
    on_damaged: Callable[[Part, str], None] | None = None,
) -> Generator[Path, None, None]:
    """Run `process` for every part not yet DONE in `workdir`, yielding the part
    directories in plan order, each as soon as it and every part before it are DONE (the
    later parts keep running meanwhile, so a caller can reduce while the map goes on).
    `runner` runs them (default: local processes, `workers` of them). `config_digest`
    names what the caller does with the parts: a work directory planned with other parts,
    inputs or digest is refused (WorkdirError). `progress(done, total)` is called as parts
    finish; `on_claimed()` once this run holds the work directory, before any part runs;
    `prepare_workers()` where the runner starts workers, to load what every worker needs
    once. `watched` names the files the parts' output depends on (the inputs they read, a
    tokenizer): a change to one refuses the work directory. A finished part whose files
    are not as its DONE marker records them (damaged since) is run again, after
    `on_damaged(part, what)` names the file. A failing part raises PartFailed once the
    parts already running have finished; finished parts stay DONE."""
    ids = [part.id for part in parts]
    if len(set(ids)) != len(ids):
        raise ValueError("part ids are not unique")
    workdir.mkdir(parents=True, exist_ok=True)
    with run_lock(workdir):
        check_plan(workdir, plan_document(parts, config_digest, watched))
        if on_claimed is not None:
            on_claimed()
        (workdir / PARTS_DIR).mkdir(exist_ok=True)
        wait_for_old_workers(workdir)
        shutil.rmtree(workdir / PARTIAL_DIR, ignore_errors=True)
        chosen = runner or LocalRunner(workers)
        pending = pending_parts(parts, workdir)
        pending += _damaged_parts(chosen, parts, pending, workdir, on_damaged)
        total = len(parts)
        ready = set(ids) - {part.id for part in pending}
        if progress is not None:
            progress(len(ready), total)
        finishing = chosen.run(pending, process, workdir, prepare_workers)
        try:
            for part_id in ids:
                while part_id not in ready:
                    ready.add(next(finishing).id)
                    if progress is not None:
                        progress(len(ready), total)
                yield workdir / PARTS_DIR / part_id
        finally:
            finishing.close()


def _damaged_parts(
    runner: Runner,
    parts: Sequence[Part],
    pending: Sequence[Part],
    workdir: Path,
    on_damaged: Callable[[Part, str], None] | None,
) -> list[Part]:
    """The finished parts whose files are damaged (checked as tasks on `runner`: the check
    reads them), their directories removed so that they run again."""
    waiting = {part.id for part in pending}
    finished = [part for part in parts if part.id not in waiting]
    checks = [CheckPart(str(workdir / PARTS_DIR / part.id)) for part in finished]
    damaged = []
    for part, found in zip(finished, runner.map_tasks(checks), strict=True):
        if found is not None:
            shutil.rmtree(workdir / PARTS_DIR / part.id)
            damaged.append(part)
            if on_damaged is not None:
                on_damaged(part, found)
    return damaged
