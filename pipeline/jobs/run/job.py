"""`run_pipeline`: the staged job of a pipeline config (DESIGN §7, §8).

A source (the plan of parts: input files, big JSON Lines files as byte ranges), the run's
stages (pipeline/jobs/run/stages.py) and a sink (shards, reports, tokenizer, manifest, card).
The engine (pipeline/engine/local.py) runs every part's map side in parallel and resumably
(pipeline/jobs/run/part.py); the dataset side takes the parts in plan order as they become
ready (the rows whose keys repeat, in the driver), then decides each part in its own task
and the workers write the shards (pipeline/jobs/run/reduce.py). Then the reports, the tokenizer, the manifest and the card
(pipeline/jobs/run/outputs.py)."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterable
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import storage
from pipeline.accounting import Account
from pipeline.engine import LocalRunner, Runner, iter_parts, reset_workdir
from pipeline.engine.ray import RayRunner, RaySettings
from pipeline.engine.stored_work import (
    MirroredProcess,
    fetch_work,
    reset_stored_work,
    upload_plan,
    worker_retries,
)
from pipeline.engine.workdir import Part, Process, check_unchanged
from pipeline.formats import AUTO
from pipeline.formats.detect import detect
from pipeline.jobs.parallel import splits_by_record
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.decisions import FINDINGS_DIR
from pipeline.jobs.run.file_hashes import engine_hashes
from pipeline.jobs.run.outputs import (
    STATS_REPORTS,
    input_records,
    ship_tokenizer,
    write_card,
    write_reports,
    write_run_manifest,
    write_stats,
)
from pipeline.jobs.run.part import PART_FORMAT, PART_TOKENIZER, PartJob
from pipeline.jobs.run.partition import RepeatedRows, mark_repeated, partitioned
from pipeline.jobs.run.phases import Phases
from pipeline.jobs.run.reduce import Progress, reduce_parts
from pipeline.jobs.run.stages import Side, run_stages, shard_schema
from pipeline.jobs.verify import Verification, verify_output
from pipeline.lint import LintReport
from pipeline.output.files import discard_if_none, remove_stale_temps
from pipeline.output.folder import OutputFolder, Publication
from pipeline.output.manifest import listed_files, versions
from pipeline.output.shards import Shard
from pipeline.output.stored import StoredOutput
from pipeline.quarantine import DROPPED_FILE, REJECTED_FILE
from pipeline.sources import DEFAULT_SPLIT, Record, expand_inputs, is_hf_input
from pipeline.sources.parts import (
    CountLines,
    InputPart,
    LineWindow,
    WindowLines,
    count_here,
    file_size,
    input_files,
    iter_part_records,
    plan_parts,
)
from pipeline.stages.normalize import SNIFF_RECORDS
from pipeline.stages.tokenize import renderer_for
from pipeline.tokenize.loading import tokenizer_files

LOCAL_WORKERS = 2
"""Worker processes of the local engine when neither the config nor --workers says."""
PARTITION_BYTES = 1 << 30
"""Inputs from which the local engine partitions keys by default (`engine.partition: auto`)."""
COUNT_HERE_BYTES = 1 << 30
"""Split files from which the planner counts their lines on the engine's workers."""
CLAIM = "claim the output folder"
PLAN = "plan the parts"
CHECK_INPUTS = "check the inputs"
REPORTS = "write the lint reports"
TOKENIZER = "ship the tokenizer"
STATS_AND_CARD = "write the stats and the card"
MANIFEST = "write the manifest"
PUBLISH = "publish the output"
CLEAN_UP = "remove the work directory"
VERIFY = "verify the output"
"""The phases of a run named here (pipeline/jobs/run/phases.py); the partition pass and
the dataset side are named by their progress reports, and the map side's faults by the
part (PartFailed)."""


@dataclass(frozen=True)
class FinishedBefore:
    """The folder held the finished output of this config and these inputs: nothing done."""

    output: Path | storage.StoredPath


@dataclass
class RunResult:
    """What a run wrote, and its lint report (for the gate and the summary)."""

    output: Path | storage.StoredPath
    counts: Account
    shards: dict[str, list[Shard]]
    report: LintReport
    """The run's lint report: its counts, examples and the findings that failed the gate;
    every finding is in the output's reports/lint.json (`report.diagnostics` read the
    parts' files in the work directory, gone once the output is published)."""
    gate_failed: bool
    text_encoder: str | None = None
    """Which library encoded the text (`tiktoken` or `tokenizers`); None: not tokenized."""
    empty_splits: tuple[str, ...] = ()
    """Configured splits that got no rows: not written, not declared in the card."""
    verification: Verification | None = None
    """The cheap part of `mms verify` (hashes, row counts, the card), run on the output."""
    packing: dict[str, Any] | None = None
    """What the pack stage did (seq_len, sequences, fill ...), None without one."""
    parts: int = 0
    """Parts the run planned."""
    resumed: int = 0
    """Parts an earlier, stopped run of the same config had finished: reused, not redone."""
    publication: Publication | None = None
    """What publishing removed of an earlier output (and took over with --overwrite)."""
    storage_retries: int = 0
    """Object-store operations this run tried again after a transient error
    (pipeline/storage/retry.py), in its own process and in the workers that ran its parts."""
    redone: list[str] = field(default_factory=list)
    """Finished parts of an earlier run found damaged and run again: which part, which file
    and how."""


def plan(
    config: RunConfig,
    output: Path | storage.StoredPath | None = None,
    runner: Runner | None = None,
) -> list[InputPart]:
    """The run's parts, never from its output folder (default: the config's). A big
    JSON Lines file is split into parts only when its format is named and converts record
    by record: a detected format could differ between parts, and a grouped one (OASST
    messages) has conversations across records. Its lines are counted on `runner`'s
    workers when the split files hold COUNT_HERE_BYTES or more (else here)."""
    return plan_parts(
        [(spec.path, spec.format) for spec in config.inputs],
        can_split=splits_by_record,
        exclude=output or config.output,
        count_lines=count_here if runner is None else _counted_on(runner),
    )


def _counted_on(runner: Runner) -> CountLines:
    """Count windows' newlines as tasks on `runner`, or here when they are few bytes."""

    def count(windows: list[LineWindow]) -> list[WindowLines]:
        if sum(window.end - window.start for window in windows) < COUNT_HERE_BYTES:
            return count_here(windows)
        return runner.map_tasks(windows)

    return count


def passed_over(
    config: RunConfig, output: Path | storage.StoredPath
) -> tuple[list[str], dict[str, str]]:
    """The files in the inputs' folders and globs that no part reads: not data files (a
    README, a licence), and refused ones (devices, symlinks out of the folder), with why;
    the summary and the report list them."""
    found = [input_files(spec.path, output) for spec in config.inputs]
    skipped = [path for files in found for path in files.skipped]
    refused = {path: why for files in found for path, why in files.refused.items()}
    return skipped, refused


def detected_format(config: RunConfig, part: InputPart) -> str:
    """The format a part is read as: the named one, or what detection finds in its first
    records (for `--dry-run`)."""
    if part.format != AUTO:
        return part.format
    spec = config.inputs[part.input_index]
    items = iter_part_records(part, split=spec.split or DEFAULT_SPLIT, hf_config=spec.hf_config)
    head = itertools.islice((i.value for i in items if isinstance(i, Record)), SNIFF_RECORDS)
    return f"auto -> {detect(head).label}"


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


def engine_runner(config: RunConfig, workers: int | None = None) -> Runner:
    """The runner of the config's engine (`workers` overrides its `workers`)."""
    engine = config.engine
    if engine.kind == "ray":
        return RayRunner(RaySettings(engine.address, engine.num_cpus, workers or engine.workers))
    return LocalRunner(workers or engine.workers or LOCAL_WORKERS)


def partitions(config: RunConfig, runner: Runner, parts: list[InputPart]) -> bool:
    """Whether the run finds shared keys in a partition pass (`engine.partition`): `auto`
    does on a distributed engine, and locally when the inputs hold PARTITION_BYTES or more
    (below that, the driver deciding every row as parts finish costs less than waiting for
    the map)."""
    choice = config.engine.partition or "auto"
    if choice == "never":
        return False
    if choice == "always":
        return True
    return not isinstance(runner, LocalRunner) or input_bytes(parts) >= PARTITION_BYTES


def input_bytes(parts: list[InputPart]) -> int:
    """The bytes the parts read (a part its range, a local or stored file its size; a Hub
    dataset counts nothing)."""
    total = 0
    for part in parts:
        if part.start is not None and part.end is not None:
            total += part.end - part.start
        elif not is_hf_input(part.path):
            total += file_size(part.path)
    return total


def _partition(
    config: RunConfig,
    runner: Runner,
    parts: list[InputPart],
    part_dirs: Iterable[Path],
    workdir: Path,
    progress: Progress | None,
) -> tuple[Iterable[Path], RepeatedRows | None]:
    """When the run partitions (`partitions`), let the map side finish, then find the rows
    whose keys repeat (pipeline/jobs/run/partition.py); otherwise the driver takes the parts
    as they become ready and decides every row, keeping every key itself."""
    if not partitions(config, runner, parts):
        return part_dirs, None
    stages = partitioned(run_stages(config, Side()))
    if not stages:
        return part_dirs, None
    ready = list(part_dirs)
    if progress is not None:
        progress("partition keys", 0, len(stages), None)
    repeated = mark_repeated(runner, stages, ready, workdir)
    if progress is not None:
        progress("partition keys", len(stages), len(stages), None)
    return ready, repeated


def run_pipeline(
    config: RunConfig,
    *,
    output: Path | str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    fresh: bool = False,
    overwrite: bool = False,
) -> RunResult | FinishedBefore:
    """Run every stage of `config` on its engine; output under `output` (default: the
    config's). The folder is claimed first (pipeline/output/folder.py: nothing is written
    through a link, nor over files mms did not write unless `overwrite`); the output is
    written into its staging folder and published at the end. `fresh` forgets the work
    parts of an earlier run; without it they are reused, and a finished output of the same
    config and inputs is left as it is (FinishedBefore). An output URL (`s3://...`) is a
    prefix on an object store (pipeline/output/stored.py), its work directory there too."""
    target = output if output is not None else config.output
    if storage.is_url(str(target)):
        return _run_stored(config, str(target), workers, progress, fresh, overwrite)
    out = Path(target).resolve()
    retries_before = storage.retry_count()
    phases = Phases(CLAIM)
    with phases.guard(), ExitStack() as engine:
        with OutputFolder(out, overwrite=overwrite) as folder:
            runner = engine.enter_context(engine_runner(config, workers))
            phases.enter(PLAN)
            parts = plan(config, out, runner)
            if fresh:
                reset_workdir(folder.work)
            elif finished_before(config, folder, parts):
                phases.enter(CLEAN_UP)
                folder.finish()
                return FinishedBefore(out)
            result = _run(config, runner, folder, out, parts, progress, phases)
            phases.enter(PUBLISH)
            publication = folder.publish()
            phases.enter(CLEAN_UP)
            folder.finish()  # the output is complete: the parts' files are no longer needed
        result.publication = publication
        result.storage_retries += storage.retry_count() - retries_before
        if result.shards:
            phases.enter(VERIFY)
            result.verification = verify_output(
                out, render=False, template=False, hash_files=engine_hashes(runner)
            )
    return result


def _run_stored(
    config: RunConfig,
    url: str,
    workers: int | None,
    progress: Progress | None,
    fresh: bool,
    overwrite: bool,
) -> RunResult | FinishedBefore:
    """`run_pipeline` into a prefix of an object store: claimed there, run in a local
    scratch folder whose work directory the store's mirrors (a stopped run resumes from
    the store), and uploaded at the end, the manifest last."""
    retries_before = storage.retry_count()
    phases = Phases(CLAIM)
    with (
        phases.guard(),
        StoredOutput(url, overwrite=overwrite) as stored,
        engine_runner(config, workers) as runner,
    ):
        out = stored.root
        phases.enter(PLAN)
        parts = plan(config, out, runner)
        if fresh:
            reset_stored_work(stored.work_url)
        elif finished_before(config, stored, parts):
            phases.enter(CLEAN_UP)
            stored.finish()
            return FinishedBefore(out)
        folder = stored.local
        fetch_work(stored.work_url, folder.work, parts)
        result = _run(config, runner, folder, out, parts, progress, phases, stored.work_url)
        phases.enter(PUBLISH)
        publication = stored.publish()
        if result.shards:  # the published bytes, as uploaded from here
            phases.enter(VERIFY)
            result.verification = verify_output(
                folder.root, render=False, template=False, hash_files=engine_hashes(runner)
            )
        phases.enter(CLEAN_UP)
        stored.finish()
    result.publication = publication
    result.storage_retries += storage.retry_count() - retries_before
    return result


def _run(
    config: RunConfig,
    runner: Runner,
    folder: OutputFolder,
    out: Path | storage.StoredPath,
    parts: list[InputPart],
    progress: Progress | None,
    phases: Phases,
    work_url: str | None = None,
) -> RunResult:
    """The run's stages on `runner` into the claimed folder's staging folder, its manifest
    last; `out` is where the output is published (the folder, or a stored prefix whose
    work directory `work_url` keeps every finished part). Each stage after the map side
    enters its phase in `phases`, those that report progress through their reports."""
    staging = folder.staging
    resumed: list[int] = []  # the parts already done when the run starts (its first report)
    redone: list[str] = []

    def damaged(part: Part, what: str) -> None:
        redone.append(f"part {part.id} ({part.describe()}): {what}")

    def parts_progress(done: int, total: int) -> None:
        if not resumed:
            resumed.append(done)
        if progress is not None:
            progress("read, lint, tokenize", done, total, None)

    job: Process = PartJob(config, ships_tokenizer=parts[0].id)
    watched = _watched_files(parts, config)
    part_dirs = iter_parts(
        parts,
        MirroredProcess(job, work_url),
        folder.work,
        config_digest=f"{PART_FORMAT}:{config.digest()}",
        runner=runner,
        progress=parts_progress,
        prepare_workers=lambda: prepare_workers(config),
        watched=watched,
        on_claimed=None if work_url is None else lambda: upload_plan(work_url, folder.work),
        on_damaged=damaged,
    )
    named = phases.progress(progress)
    with closing(part_dirs):  # a failed reduce stops the workers and frees the work dir
        ready, repeated = _partition(config, runner, parts, part_dirs, folder.work, named)
        reduced = reduce_parts(
            config,
            staging,
            parts,
            ready,
            runner,
            folder.work,
            named,
            *passed_over(config, out),
            repeated=repeated,
        )
    phases.enter(CHECK_INPUTS)
    check_unchanged(folder.work, watched)  # the parts' reading and hashing are over
    counts, shards, report = reduced.counts, reduced.shards, reduced.report
    phases.enter(REPORTS)
    remove_stale_temps(staging)  # a killed worker's half-written shard or media copy
    discard_if_none(staging / REJECTED_FILE, counts.quarantined_total)
    discard_if_none(staging / DROPPED_FILE, counts.dropped_total)
    reports = write_reports(staging, report)
    shutil.rmtree(folder.work / FINDINGS_DIR, ignore_errors=True)  # the reports hold them
    tokenizer = None
    if config.stages.tokenize is not None and not reduced.gate_failed:
        phases.enter(TOKENIZER)
        tokenizer = ship_tokenizer(
            reduced.part_dirs[0] / PART_TOKENIZER, staging, config if reduced.media else None
        )
    packing = reduced.packing
    phases.enter(STATS_AND_CARD)
    figures = write_stats(staging, reduced.tables, counts, packing)
    if figures is not None:
        reports += STATS_REPORTS
        schema = shard_schema(config, reduced.media)
        write_card(
            staging, out.name, config, report, counts, shards, schema, tokenizer, packing, figures
        )
    phases.enter(MANIFEST)
    write_run_manifest(
        staging,
        config,
        parts,
        reduced.part_dirs,
        counts,
        shards,
        tokenizer,
        reports,
        report,
        packing,
        reduced.media_files,
    )
    encoder = tokenizer["text_encoder"] if tokenizer else None
    configured = [name for name, _ in config.stages.shard.splits] if config.stages.shard else []
    empty = tuple(name for name in configured if name not in shards and not reduced.gate_failed)
    return RunResult(
        out,
        counts,
        shards,
        report,
        reduced.gate_failed,
        encoder,
        empty,
        None,
        packing,
        parts=len(parts),
        resumed=resumed[0] if resumed else 0,
        storage_retries=worker_retries(reduced.part_dirs),
        redone=redone,
    )


def finished_before(
    config: RunConfig, folder: OutputFolder | StoredOutput, parts: list[InputPart]
) -> bool:
    """Whether the folder holds the finished output of this config and these inputs, as
    this version of mms writes it: its manifest has the config's digest, the same versions
    and inputs (sha256), a passed gate, and every file it lists is as it was written."""
    manifest = folder.earlier
    if manifest is None or any(is_hf_input(part.path) for part in parts):
        return False
    if manifest.get("config_sha256") != config.digest() or manifest.get("versions") != versions():
        return False
    if (manifest.get("gate") or {}).get("passed") is not True:
        return False
    if set(listed_files(manifest)) - folder.unchanged:
        return False
    inputs = [record.to_dict() for record in input_records(config, parts)]
    return manifest.get("inputs") == inputs
