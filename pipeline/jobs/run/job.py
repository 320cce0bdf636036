"""`run_pipeline`: the staged job of a pipeline config (DESIGN §7, §8), its phases in run
order, each one call into the module that does it:

claim (claim.py) -> plan (planning.py) -> map (map_side.py, each part by part.py) ->
partition (partition.py) -> repeated rows (repeated_pass.py) -> decisions
(decisions.py) -> shards (shard_tasks.py) -> check the inputs -> outputs (outputs.py:
reports, tokenizer, stats, card, manifest) -> publish -> clean up -> verify
(pipeline/jobs/verify/).

The map side is lazy: it runs on the engine's workers as the partition pass (which waits
for all of it) or the pass over repeated rows (which takes the parts as they become
ready) takes the parts' directories. The phase a fault happens in names it
(pipeline/jobs/run/phases.py)."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import storage
from pipeline.accounting import Account
from pipeline.engine.stored_work import worker_retries
from pipeline.engine.workdir import check_unchanged
from pipeline.jobs.run.claim import claimed
from pipeline.jobs.run.config import RunConfig
from pipeline.jobs.run.decisions import Decided, decide_parts
from pipeline.jobs.run.file_hashes import engine_hashes
from pipeline.jobs.run.map_side import MapSide, map_parts
from pipeline.jobs.run.outputs import write_outputs
from pipeline.jobs.run.partition import partition_pass
from pipeline.jobs.run.phases import (
    CHECK_INPUTS,
    CLAIM,
    CLEAN_UP,
    PLAN,
    PUBLISH,
    VERIFY,
    Phases,
    Progress,
)
from pipeline.jobs.run.planning import plan_run
from pipeline.jobs.run.repeated_pass import repeated_rows
from pipeline.jobs.run.shard_tasks import Written, write_shards
from pipeline.jobs.verify import Verification, verify_output
from pipeline.lint import LintReport
from pipeline.output.folder import Publication
from pipeline.output.shards import Shard


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
    prefix on an object store (pipeline/output/stored.py), its work directory there too:
    the run works in a local scratch folder whose work directory the store's mirrors (a
    stopped run resumes from the store), and uploads the output at the end."""
    retries_before = storage.retry_count()
    phases = Phases(CLAIM)
    named = phases.progress(progress)
    target = output if output is not None else config.output
    with phases.guard(), claimed(config, target, workers, overwrite) as run:
        phases.enter(PLAN)
        planned = plan_run(config, run.out, run.runner)
        parts = planned.parts
        if fresh:
            run.forget_work()
        elif run.finished_before(config, parts):
            phases.enter(CLEAN_UP)
            run.finish()
            return FinishedBefore(run.out)
        run.fetch_work(parts)
        mapped = map_parts(config, run, parts, progress)
        with closing(mapped.part_dirs):  # a failed pass stops the workers, frees the work dir
            ready, repeated = partition_pass(
                config, run.runner, parts, mapped.part_dirs, run.work, named
            )
            first = repeated_rows(config, parts, ready, repeated, run.work, named, run.runner)
        decided = decide_parts(
            config,
            run.staging,
            parts,
            first,
            run.runner,
            run.work,
            named,
            planned.skipped,
            planned.refused,
        )
        written = write_shards(config, decided, run.staging, run.runner, run.work, named)
        phases.enter(CHECK_INPUTS)
        check_unchanged(run.work, mapped.watched)  # the parts' reading and hashing are over
        tokenizer = write_outputs(
            config,
            run.staging,
            run.out.name,
            parts,
            decided,
            written,
            run.work,
            phases.enter,
            engine_hashes(run.runner),
        )
        result = _result(config, run.out, len(parts), mapped, decided, written, tokenizer)
        phases.enter(PUBLISH)
        result.publication = run.publish()
        phases.enter(CLEAN_UP)
        run.finish()  # the output is complete: the parts' files are no longer needed
        if result.shards:  # the published bytes (a stored output's, as uploaded from here)
            phases.enter(VERIFY)
            result.verification = verify_output(
                run.published, render=False, template=False, hash_files=engine_hashes(run.runner)
            )
    result.storage_retries += storage.retry_count() - retries_before
    return result


def _result(
    config: RunConfig,
    out: Path | storage.StoredPath,
    planned: int,
    mapped: MapSide,
    decided: Decided,
    written: Written,
    tokenizer: dict[str, Any] | None,
) -> RunResult:
    """What the run wrote and found, for the summary (its publication and verification
    follow)."""
    encoder = tokenizer["text_encoder"] if tokenizer else None
    configured = [name for name, _ in config.stages.shard.splits] if config.stages.shard else []
    empty = tuple(
        name for name in configured if name not in written.shards and not decided.gate_failed
    )
    return RunResult(
        out,
        decided.counts,
        written.shards,
        decided.report,
        decided.gate_failed,
        encoder,
        empty,
        None,
        written.packing,
        parts=planned,
        resumed=mapped.resumed[0] if mapped.resumed else 0,
        storage_retries=worker_retries(decided.part_dirs),
        redone=mapped.redone,
    )
