"""`mms run`: a pipeline config to a training-ready output folder, resumably."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import click

from pipeline import api
from pipeline.accounting import Account, InputAccount, most_first
from pipeline.arrow_pandas import skip_pandas_probe
from pipeline.cli.options import (
    embed_media_option,
    media_options,
    media_roots,
    media_settings,
    overwrite_option,
)
from pipeline.cli.output import (
    ConfigProblem,
    Refusal,
    check_mark,
    exit_unbalanced,
    input_table,
    output_argument,
    print_error,
    print_publication,
    print_refused,
    safe,
    some,
    stage_progress,
    stderr,
)
from pipeline.cli.push import push_and_report
from pipeline.cli.writes import writes
from pipeline.config_file import ConfigFileError
from pipeline.engine import PartFailed, WorkdirError
from pipeline.engine.ray import RayUnavailable
from pipeline.jobs.run import (
    LOCAL_WORKERS,
    SHARD_WRITES,
    WORK_DIR,
    FinishedBefore,
    RunResult,
    detected_format,
    plan,
)
from pipeline.jobs.run.config import PushSettings, RunConfig
from pipeline.jobs.run.phases import RunFault
from pipeline.output.card import local_dataset_path
from pipeline.output.files import OutputPathError
from pipeline.output.folder import OutputFolderError
from pipeline.output.guard import check_output_folder
from pipeline.quarantine import DROPPED_FILE
from pipeline.sources import InputError
from pipeline.storage import StorageError, StoredPath, is_url
from pipeline.tokenize.overlong import OverlongThreadError
from pipeline.wording import plural, visible


@writes(output="output-folder")
@click.command(
    "run",
    epilog="\b\nExamples:\n"
    "  mms run configs/quickstart.yaml\n"
    "  mms run configs/tool_calling.yaml -o out/tools --workers 2\n"
    "  mms run configs/mix.yaml --fresh\n"
    "  mms run configs/quickstart.yaml --engine ray\n"
    "  mms run configs/quickstart.yaml --dry-run",
)
@click.argument("config_file", type=click.Path(exists=True, dir_okay=False), metavar="CONFIG")
@click.option(
    "-o",
    "--output",
    metavar="DIR",
    default=None,
    help="Output directory [default: the config's `output`].",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default=None,
    help="Where the stages run [default: the config's engine.kind]: `local` is processes on "
    "this machine; `ray` is a Ray cluster (pip install 'mms-pipeline[ray]'), started here "
    "unless --ray-address or RAY_ADDRESS names one. Same output bytes either way.",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDRESS",
    help="With --engine ray: `local` (start Ray here), `auto` (the cluster this machine "
    "joined with `ray start`) or ray://HOST:PORT [default: the config's engine.address].",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Parts run in parallel [default: the config's engine.workers]; the output is the "
    "same for any number.",
)
@click.option(
    "--resume/--fresh",
    default=True,
    show_default=True,
    help="Reuse the finished parts of an interrupted run, or start over.",
)
@overwrite_option
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (inputs, parts, stages); write nothing."
)
@click.option(
    "--push/--no-push",
    default=True,
    show_default=True,
    help="Publish the output to the config's output.push_to_hub repository when the run "
    "succeeds (as mms push does); --no-push writes it locally only.",
)
@embed_media_option
@media_options
def run_command(
    config_file: str,
    output: str | None,
    engine: str | None,
    ray_address: str | None,
    workers: int | None,
    resume: bool,
    overwrite: bool,
    dry_run: bool,
    push: bool,
    media_flags: dict[str, object],
    embed_media: bool | None,
) -> None:
    """Run a pipeline CONFIG: ingest, normalize, lint, filter, dedup, tokenize, shard.

    Writes the output directory: data/ shards per split, tokenizer/,
    reports/lint.{json,md,html}, quarantine/rejected.jsonl, manifest.json and a Hugging
    Face dataset card (README.md). A run resumes part by part: one that is stopped and
    started again finishes with the same bytes. When the lint gate (stages.lint.fail_on,
    judged on the threads kept) fails, no shards, card or tokenizer are written and the
    manifest says why. Exit status: 0 done, 1 the lint gate failed or the run failed
    part-way (run it again to resume), 2 a usage or config error.
    """
    config, out = _config_and_output(config_file, output, engine, ray_address)
    media = media_settings(config.stages.media, {**media_flags, "embed": embed_media})
    if media != config.stages.media:  # the flags are the config's stages.media, recorded so
        config = dataclasses.replace(config, stages=config.stages.replace(media=media))
    # each input's media_root, then these; recorded in the manifest's inputs
    config = api.run_config(config, media_roots=[root.path for root in media_roots(media_flags)])
    if dry_run:
        _print_dry_run(config, out, workers)
        return
    result = _run(config, out, workers, resume=resume, overwrite=overwrite)
    if isinstance(result, FinishedBefore):
        stderr.print(
            f"Nothing to do: {safe(result.output)} is the finished output of this config and "
            "these inputs (its manifest.json says so, and every file it lists is as written); "
            "--fresh runs it again"
        )
        if config.push is not None and push:
            _push(result.output, config.push)
        return
    _print_summary(result)
    print_publication(result.publication)
    _exit_if_failed(result, config)
    if config.push is not None and push:
        _push(result.output, config.push)
    if result.shards:
        _print_next_steps(result, config.push is not None and push)


# What `mms run` says of a run that raised: errors of the config or inputs (a usage
# error, exit 2), then the other failures with their exit status and what follows the
# message.
_CONFIG_ERRORS = (InputError, WorkdirError, OutputFolderError, ValueError)
_RUN_FAILURES: tuple[tuple[type[Exception], int, str], ...] = (
    (RayUnavailable, 2, ""),
    (PartFailed, 1, "; finished parts are kept: run again to resume"),
    (StorageError, 1, "; finished parts are kept"),
    (RunFault, 1, "; finished parts are kept: run again to resume"),
    (OverlongThreadError, 1, "; nothing was written (overlong: error)"),
)


def _config_and_output(
    config_file: str, output: str | None, engine: str | None, ray_address: str | None
) -> tuple[RunConfig, Path | StoredPath]:
    """The run config with the command line's engine, and the output folder (checked)."""
    try:
        config = api.run_config(config_file, engine=engine, ray_address=ray_address)  # type: ignore[arg-type]
    except ConfigFileError as err:
        raise ConfigProblem(str(err)) from None
    except ValueError:  # the one setting run_config refuses beyond the file's
        raise click.UsageError("--ray-address applies only with --engine ray") from None
    if _hands_pyarrow_no_pandas(config):
        skip_pandas_probe()  # pyarrow would import pandas on its first array (0.2 s)
    out: Path | StoredPath = (
        (StoredPath(output.rstrip("/")) if is_url(output) else Path(output))
        if output
        else config.output
    )
    if isinstance(out, StoredPath):
        return config, out  # a prefix of a store: claiming it checks it
    try:
        check_output_folder(out)
    except OutputPathError as err:
        raise Refusal(f"{'-o' if output else 'output'}: {err}") from None
    return config, out


def _print_dry_run(config: RunConfig, out: Path | StoredPath, workers: int | None) -> None:
    """--dry-run: the plan, the engine and the push, without running."""
    try:
        _print_plan(config, out)
    except InputError as err:
        raise ConfigProblem(str(err)) from None
    click.echo(f"engine: {_describe_engine(config, workers)}")
    if config.push is not None:
        click.echo(f"push: {visible(config.push.repo)} when the run succeeds (--no-push: not)")


def _run(
    config: RunConfig,
    out: Path | StoredPath,
    workers: int | None,
    *,
    resume: bool,
    overwrite: bool,
) -> RunResult | FinishedBefore:
    """The run, with progress; a failure is told (`_CONFIG_ERRORS`, `_RUN_FAILURES`)."""
    try:
        with stage_progress({SHARD_WRITES: "shard"}) as update:
            return api.run(
                config,
                output=out,
                workers=workers,
                progress=update,
                fresh=not resume,
                overwrite=overwrite,
            )
    except _CONFIG_ERRORS as err:
        raise ConfigProblem(str(err)) from None
    except tuple(kind for kind, _, _ in _RUN_FAILURES) as err:
        told = _told(err)
        status, after = next((s, a) for kind, s, a in _RUN_FAILURES if isinstance(told, kind))
        print_error(told, after)
        sys.exit(status)


def _told(error: Exception) -> Exception:
    """The error to tell: a part its store stopped is told as the store's error (naming
    the object, as one that stops a publication is), any other as it is."""
    if isinstance(error, PartFailed) and isinstance(error.__cause__, StorageError):
        return error.__cause__
    return error


def _exit_if_failed(result: RunResult, config: RunConfig) -> None:
    """Exit 1 when the output does not match its manifest, the counts do not balance or
    the lint gate failed."""
    if result.verification is not None and not result.verification.passed:
        for problem in result.verification.problems:
            stderr.print(f"  [red]✗[/] {safe(problem.where)}: {safe(problem.what)}")
        stderr.print("[red]error:[/] the output does not match its manifest; this is a bug")
        sys.exit(1)
    if not result.counts.balanced:
        exit_unbalanced()
    if result.gate_failed:
        _print_gate_failure(result, config)
        if config.push is not None:
            stderr.print(f"nothing was pushed to {safe(config.push.repo)}: the gate failed")
        sys.exit(1)


def _push(output: Path | StoredPath, settings: PushSettings) -> None:
    """Publish the output to the config's output.push_to_hub repository (a stored output
    from a copy of what its manifest lists)."""
    folder = output_argument(output) if isinstance(output, StoredPath) else output
    push_and_report(folder, settings.repo, private=settings.private, revision=settings.revision)


def _print_next_steps(result: RunResult, pushed: bool) -> None:
    """What a curator does with a finished output, as commands to copy."""
    out = result.output
    try:
        shown = out.relative_to(Path.cwd())
    except ValueError:
        shown = out
    first = next(iter(result.shards.values()))[0].name
    steps = _stored_steps(shown) if isinstance(shown, StoredPath) else _local_steps(shown, first)
    if not pushed:
        steps.append((f"mms push {shown} ORG/NAME", "publish it on the Hugging Face Hub"))
    width = max(len(visible(command)) for command, _ in steps)
    stderr.print("Next:", highlight=False)
    for command, what in steps:
        stderr.print(f"  {visible(command).ljust(width)}  {what}", highlight=False, markup=False)


def _stored_steps(out: StoredPath) -> list[tuple[str, str]]:
    """What to do with an output on an object store (readers that check its manifest)."""
    return [
        (
            f'datasets.load_dataset("parquet", data_files=published_data_files("{out}"))',
            "the splits, in Python (pipeline.output.stored)",
        ),
        (f'OutputLoader("{out}", batch_size=8)', "training batches (pipeline.loader)"),
        (f"mms verify {out}", "every row rendered again and checked"),
    ]


def _local_steps(shown: Path, first: str) -> list[tuple[str, str]]:
    """What to do with an output folder."""
    return [
        (f"open {shown / 'reports' / 'lint.html'}", "the lint report, thread by thread"),
        (f"open {shown / 'reports' / 'stats.html'}", "lengths, tokens per role, drops, sources"),
        (f'datasets.load_dataset("{local_dataset_path(str(shown))}")', "the splits, in Python"),
        (f"mms inspect {shown / 'data' / first}", "threads as the MMS spec draws them"),
        (f"mms verify {shown}", "every row rendered again and checked"),
    ]


def _hands_pyarrow_no_pandas(config: RunConfig) -> bool:
    """Whether nothing this process runs for `config` hands pyarrow pandas objects: no
    `hf:` input (datasets reads with pandas), no plugin (a curator's code), the local
    engine (Ray's drivers use pandas)."""
    return (
        config.engine.kind == "local"
        and not config.stages.plugins
        and not any(spec.is_hf for spec in config.inputs)
    )


def _describe_engine(config: RunConfig, workers: int | None) -> str:
    engine = config.engine
    count = workers or engine.workers
    if engine.kind == "ray":
        where = engine.address or ("RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else "local")
        parallel = plural(count, "worker") if count else "a worker per CPU"
        return f"ray at {where}, {parallel}"
    return f"local, {plural(count or LOCAL_WORKERS, 'worker')}"


def _print_plan(config: RunConfig, out: Path | StoredPath) -> None:
    parts = plan(config, out)
    inputs, counted = plural(len(config.inputs), "input"), plural(len(parts), "part")
    click.echo(f"{visible(config.name)}: {inputs}, {counted} -> {visible(out)}")
    for part in parts:
        fmt = visible(detected_format(config, part))
        click.echo(f"  {visible(part.id)}  {fmt:<20} {visible(part.describe())}")
    stages = config.stages
    names = ["normalize", "lint", "filters"]
    names += ["dedup"] if stages.dedup.enabled else []
    names += [f"tokenize ({visible(stages.tokenize.tokenizer)})"] if stages.tokenize else []
    names += (
        ["shard (" + ", ".join(f"{n} {f:g}" for n, f in stages.shard.splits) + ")"]
        if stages.shard
        else []
    )
    click.echo("stages: " + " -> ".join(names))


def _print_gate_failure(result: RunResult, config: RunConfig) -> None:
    """Which findings on kept threads failed the gate, and where the first of each is."""
    fail_on = config.stages.lint.fail_on
    withheld = "no shards, card or tokenizer written; " if config.stages.shard else ""
    stderr.print(
        f"[red]lint gate failed[/] (fail_on: {fail_on}): {withheld}manifest.json says "
        "gate.passed: false"
    )
    for code, severity, count, first in result.report.gate_findings(fail_on):
        where = first.locator or first.source or first.thread_id or ""
        stderr.print(f"  {count:>8,}  {code} {severity:<7} first at {safe(where)}")
    stderr.print(
        f"Fix them, drop them (stages.lint.drop_on) or relax fail_on; details in "
        f"{safe(result.output / 'reports' / 'lint.md')}"
    )


def _print_summary(result: RunResult) -> None:
    """What the run read, kept, dropped and wrote, and the check that the counts balance."""
    _print_reading(result)
    _print_rows(result)
    _print_tokens(result)
    _print_lint(result)
    _print_input_losses(result)
    _print_check(result.counts)
    if result.storage_retries:
        stderr.print(
            f"Storage: {plural(result.storage_retries, 'operation')} tried again after a "
            "transient error of the object store (each succeeded)"
        )


def _print_reading(result: RunResult) -> None:
    """Records read, converted, quarantined; threads dropped and tagged; groups."""
    counts = result.counts
    if result.resumed:
        stderr.print(
            f"Resumed: {result.resumed:,} of {plural(result.parts, 'part')} were done by "
            f"an earlier run of this config (kept in {safe(result.output / WORK_DIR)}), not redone"
        )
    for damaged in result.redone:
        stderr.print(f"Redone, damaged since it finished: {safe(damaged)}")
    stderr.print(
        f"Read {plural(counts.records_read, 'record')}: {counts.records_converted:,} converted "
        f"into {plural(counts.threads, 'thread')}, {counts.quarantined_total:,} quarantined"
    )
    skipped = result.report.stats.skipped_files
    if skipped:
        stderr.print(f"  skipped {plural(len(skipped), 'unsupported file')}: {some(skipped)}")
    print_refused(result.report.stats.refused_files)
    for code, count in most_first(counts.quarantined):
        stderr.print(f"  {count:>8,}  quarantined  {code}")
    for reason, count in most_first(counts.dropped):
        stderr.print(f"  {count:>8,}  dropped      {safe(reason)}")
    for key, count in most_first(counts.tagged):
        stderr.print(f"  {count:>8,}  tagged       {safe(key)}")
    if counts.dropped_total:
        listed = safe(result.output / DROPPED_FILE)
        stderr.print(f"            each dropped thread is listed, with why, in {listed}")
    for kind, noun in (("pair", "preference pairs"), ("group", "thread groups")):
        kept, dropped = counts.groups_kept[kind], counts.groups_dropped[kind]
        if kept or dropped:
            stderr.print(
                f"  {noun}: {kept:,} kept and {dropped:,} left out, each whole (no side alone)"
            )


def _print_rows(result: RunResult) -> None:
    """Rows written per split, the splits left empty and the rows withheld."""
    counts = result.counts
    for split, shards in result.shards.items():
        rows = counts.written[split] if result.packing else sum(s.rows for s in shards)
        stderr.print(f"  {rows:>8,}  written      {safe(split)} ({plural(len(shards), 'shard')})")
    if counts.copies:
        stderr.print(
            f"            of them {plural(counts.copies, 'weighted copy', 'weighted copies')}"
        )
    for split in result.empty_splits:
        stderr.print(f"  [yellow]split {safe(split)} got no rows[/]: not written, not in the card")
    if counts.withheld:
        stderr.print(f"  {counts.withheld:>8,}  withheld     the lint gate failed")


def _print_tokens(result: RunResult) -> None:
    """Tokens trained, messages weighted 0 and packing."""
    counts = result.counts
    if counts.tokens:
        stderr.print(
            f"Tokens: {counts.tokens:,}, trained {counts.trained_tokens:,} "
            f"(text encoded by {result.text_encoder})"
        )
    if counts.zero_weight_messages:
        stderr.print(
            f"  {counts.zero_weight_messages:,} assistant messages weighted 0 by their source: "
            "rendered, not trained"
        )
    packing = result.packing
    if packing:
        stderr.print(
            f"Packed {packing['threads']:,} threads into {packing['sequences']:,} rows of up to "
            f"{packing['seq_len']:,} tokens: fill {packing['fill']:.2%}, "
            f"{packing['threads_per_sequence']:.1f} threads per row"
        )


def _print_lint(result: RunResult) -> None:
    """The lint findings and what the run verified of its output."""
    report = result.report
    left_out = sum(report.on_dropped.values())
    not_gated = f", {left_out:,} of them on what was dropped (not gated)" if left_out else ""
    stderr.print(
        f"Lint: {plural(len(report.diagnostics), 'finding')} ({plural(report.errors, 'error')}, "
        f"{plural(report.warnings, 'warning')}){not_gated}; reports in {safe(result.output / 'reports')}"
    )
    checked = result.verification.checked if result.verification else None
    if checked:
        stderr.print(
            f"Verified: {plural(checked.get('files', 0), 'file')} and "
            f"{plural(checked.get('rows', 0), 'row')} "
            "against manifest.json, and the card (hashes only; `mms verify` renders every row)"
        )


def _print_input_losses(result: RunResult) -> None:
    """The per-input table, and a warning for an input that gave no row."""
    counts = result.counts
    if len(counts.inputs) > 1:
        _print_inputs(counts.inputs, bool(counts.tokens))
    for source in counts.inputs:
        if not source.written and not result.gate_failed and result.shards:
            loss = source.main_loss() or "nothing was read from it"
            stderr.print(
                f"[yellow]warning:[/] input {safe(source.path)} gave no row to the output "
                f"({source.records_read:,} records read): mostly {safe(loss)}"
            )


def _print_check(counts: Account) -> None:
    """Records in = threads out + quarantined; threads = written + dropped."""
    unsharded = f" + {counts.not_sharded:,} linted only" if counts.not_sharded else ""
    unsharded += f" + {counts.withheld:,} withheld" if counts.withheld else ""
    copies = (
        f" (+ {counts.copies:,} weighted copies: {counts.kept + counts.copies:,} rows)"
        if counts.copies
        else ""
    )
    stderr.print(
        f"Check: {counts.records_read:,} read = {counts.records_converted:,} converted + "
        f"{counts.quarantined_total:,} quarantined; {counts.threads:,} threads = "
        f"{counts.kept:,} written{copies}{unsharded} + {counts.dropped_total:,} dropped "
        f"{check_mark(counts.balanced)}"
    )


def _print_inputs(inputs: list[InputAccount], tokenized: bool) -> None:
    """One row per input: what it gave, from records read to rows and tokens written."""
    stderr.print("Per input (manifest.json counts.inputs has every reason):", highlight=False)
    for line in input_table([source.to_dict() for source in inputs], tokenized):
        stderr.print(f"  {line}", highlight=False, markup=False)
