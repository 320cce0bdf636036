"""The map side of `mms run` over every part (DESIGN §8): each part read, normalized and
through every stage's map in its own task on the engine (pipeline/jobs/run/part.py),
resumably (a part finished by an earlier run of the same config is reused, one damaged
since is run again). The parts' directories come in plan order, each as soon as it and
every part before it are done, so the next phases take them while the map goes on."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from pipeline.engine import iter_parts
from pipeline.engine.stored_work import MirroredProcess, upload_plan
from pipeline.engine.workdir import Part, Process
from pipeline.jobs.run.claim import Claim
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.part import PART_FORMAT, PartJob
from pipeline.jobs.run.phases import MAP_PARTS, Progress
from pipeline.jobs.run.stages import Side, run_stages
from pipeline.sources import expand_inputs, is_hf_input
from pipeline.sources.parts import InputPart
from pipeline.stages.tokenize import renderer_for
from pipeline.tokenize.loading import tokenizer_files


@dataclass
class MapSide:
    """The map side under way: the parts' directories in plan order (a generator: the map
    side runs as they are taken; closing it stops the workers), the files the parts read
    or depend on (`watched`), and, once it has begun, the parts an earlier run had
    finished (`resumed`) and those found damaged and run again (`redone`)."""

    part_dirs: Generator[Path, None, None]
    watched: list[str]
    resumed: list[int]
    redone: list[str]


def map_parts(
    config: RunConfig, claim: Claim, parts: list[InputPart], progress: Progress | None
) -> MapSide:
    """The map side of every part into the claim's work directory, on its runner (a stored
    output's finished parts uploaded by the worker that ran them, the plan once the run
    holds the work directory)."""
    resumed: list[int] = []
    redone: list[str] = []

    def damaged(part: Part, what: str) -> None:
        redone.append(f"part {part.id} ({part.describe()}): {what}")

    def parts_progress(done: int, total: int) -> None:
        if not resumed:
            resumed.append(done)  # the parts already done when the run starts
        if progress is not None:
            progress(MAP_PARTS, done, total, None)

    job: Process = PartJob(config, ships_tokenizer=parts[0].id)
    watched = _watched_files(parts, config)
    work_url = claim.work_url
    part_dirs = iter_parts(
        parts,
        MirroredProcess(job, work_url),
        claim.work,
        config_digest=f"{PART_FORMAT}:{config.digest()}",
        runner=claim.runner,
        progress=parts_progress,
        prepare_workers=lambda: prepare_workers(config),
        watched=watched,
        on_claimed=None if work_url is None else lambda: upload_plan(work_url, claim.work),
        on_damaged=damaged,
    )
    return MapSide(part_dirs, watched, resumed, redone)


def prepare_workers(config: RunConfig) -> None:
    """Load what every worker needs before the workers start: the tokenizer, and each map
    stage's models and indexes (the local engine's forked workers inherit them, once in
    memory; a Ray worker process loads them before its first part of the run)."""
    if config.stages.tokenize is not None:
        renderer_for(config.stages.tokenize)
    for each in run_stages(config, Side()):
        each.prepare()


def _watched_files(parts: list[InputPart], config: RunConfig) -> list[str]:
    """The local files the parts read, and the tokenizer files their tokens depend on: a
    resumed run refuses parts made from other versions of them."""
    inputs = [part.path for part in parts if not is_hf_input(part.path)]
    decontaminate = config.stages.curation.decontaminate
    if decontaminate is not None and decontaminate.against:
        found = expand_inputs(list(decontaminate.against)).files
        inputs += [path for path in found if not is_hf_input(path)]
    if config.stages.tokenize is None:
        return inputs
    files = tokenizer_files(config.stages.tokenize.tokenizer)
    return inputs + [str(file) for file in files if file is not None and file.is_file()]
