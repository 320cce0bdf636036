"""What the commands print on standard error: the console, live progress, and the summary
pieces more than one command shows."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pipeline.accounting import DEDUPLICATED, SAMPLED_OUT, Account, most_first
from pipeline.formats.detect import UNKNOWN
from pipeline.hub_ids import repo_id_problem
from pipeline.mms.groups import GROUP_DROP
from pipeline.output.folder import Publication
from pipeline.output.hub import OutputNotFound, fetch_output, is_hub_output
from pipeline.output.stored import fetch_stored_output
from pipeline.quarantine import ERROR_CODES
from pipeline.sources.paths import HF_PREFIX
from pipeline.storage import is_url
from pipeline.wording import plural, visible

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
UNMAPPED_CODES = frozenset({"unknown_format", "not_an_object"})
"""Quarantine codes that a field mapping may cure (the records' keys are not the ones a
format reads)."""


def _live() -> Progress:
    """A transient spinner, description and elapsed time on standard error."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    return Progress(*columns, console=stderr, transient=True)


@contextmanager
def read_progress() -> Iterator[Callable[[Account], None] | None]:
    """A live records/threads counter on a terminal; nothing when output is redirected."""
    if not stderr.is_terminal:
        yield None
        return
    with _live() as progress:
        task = progress.add_task("reading")

        def update(stats: Account) -> None:
            progress.update(
                task,
                description=f"{stats.records_read:,} records read, {stats.threads:,} threads, "
                f"{stats.quarantined_total:,} quarantined",
            )

        yield update


@contextmanager
def stage_progress(
    units: Mapping[str, str] | None = None,
) -> Iterator[Callable[[str, int, int, Account | None], None] | None]:
    """One live line per stage on a terminal (nothing when output is redirected): parts
    (or the stage's own unit, `units[stage]`) done with the time left at their pace, and
    the records and tokens so far when the stage counts them."""
    if not stderr.is_terminal:
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr, transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int, counts: Account | None) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            unit = (units or {}).get(stage, "part")
            figures = f"{done:,} of {plural(total, unit)}"
            if counts is not None:
                figures += f", {plural(counts.records_read, 'record')}"
                figures += f", {counts.tokens:,} tokens" if counts.tokens else ""
            progress.update(
                tasks[stage], completed=done, total=total, description=f"{stage}: {figures}"
            )

        yield update


def safe(value: object) -> str:
    """`value` (a name, locator, id or reason from the data or the command line) ready for
    a rich markup string: control characters escaped (`visible`), and markup too."""
    return escape(visible(value))


def some(paths: list[str], count: int = 3) -> str:
    """The first `count` paths (markup-safe), and how many more."""
    more = f" and {len(paths) - count} more" if len(paths) > count else ""
    return ", ".join(safe(path) for path in paths[:count]) + more


def check_mark(balanced: bool) -> str:
    """The mark ending a `Check:` line."""
    return "[green]✓[/]" if balanced else "[red]✗ MISMATCH[/]"


def output_argument(name: str) -> Path:
    """The folder an OUTPUT argument names: a local folder, a pushed output
    (hf:ORG/NAME[@REVISION]) fetched into the Hugging Face cache (or found there offline),
    or an output on an object store (`s3://bucket/prefix`), the files its manifest lists
    fetched into the mms cache."""
    if is_url(name):
        try:
            with stderr.status(f"fetching {safe(name)}", spinner="dots"):
                return fetch_stored_output(name)
        except OutputNotFound as err:
            raise click.UsageError(str(err)) from None
    if is_hub_output(name):
        repo_id = name.removeprefix(HF_PREFIX).partition("@")[0]
        problem = repo_id_problem(repo_id, owner=True)
        if problem is not None:
            raise click.UsageError(
                f"{name}: not a Hub dataset id: {problem}; a pushed output is "
                "hf:ORG/NAME[@REVISION], a local one a folder"
            )
        try:
            with stderr.status(f"fetching {safe(name)}", spinner="dots"):
                return fetch_output(name)
        except OutputNotFound as err:
            raise click.UsageError(str(err)) from None
    folder = Path(name)
    if not folder.is_dir():
        raise click.UsageError(f"{visible(name)} is not a folder (nor a Hub dataset: hf:ORG/NAME)")
    return folder


class Refusal(click.ClickException):
    """What a command refuses before any work (a path it must not write, an unusable
    setting): `error: ...` on one line and exit 2, without click's usage lines (the
    command line itself parsed)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        print_error(self.message)


class ConfigProblem(Refusal):
    """A config file, or what it names, that cannot be used."""


def print_error(message: object, after: str = "") -> None:
    """`error: MESSAGE` on stderr, the message shown as it is on one line (no rich markup: a
    path or an install hint like `mms-pipeline[ray]` keeps its brackets; control characters
    escaped), then `after` (markup)."""
    stderr.print(f"[red]error:[/] {safe(message)}{after}")


def exit_unbalanced() -> NoReturn:
    """Counts that do not balance are a bug: say so and exit 1."""
    stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
    sys.exit(1)


def print_inputs(stats: Account) -> None:
    """Records read per format, and the files skipped, read as companions or undetected."""
    by_format = Counter(stats.formats.values())
    formats = ", ".join(f"{safe(name)}: {count}" for name, count in sorted(by_format.items()))
    stderr.print(
        f"Read {plural(stats.records_read, 'record')} from {plural(len(stats.files), 'file')} "
        f"({formats})"
    )
    if stats.skipped_files:
        stderr.print(
            f"  skipped {plural(len(stats.skipped_files), 'unsupported file')}: "
            f"{some(stats.skipped_files)}"
        )
    for companion, main in sorted(stats.companion_files.items()):
        stderr.print(f"  read {safe(companion)} as part of {safe(main)}")
    print_refused(stats.refused_files)
    print_unread_files(stats)


def print_unread_files(stats: Account, shown: int = 5) -> None:
    """One line per file none of whose records converted: what most of them were
    quarantined as, and how to read it (`--from`, or a field mapping)."""
    unread = stats.files_with_nothing_converted()
    for path, counts in unread[:shown]:
        code, _ = most_first(counts.quarantined)[0] if counts.quarantined else ("", 0)
        if code in UNMAPPED_CODES or stats.formats.get(path) == UNKNOWN:
            hint = (
                f"`mms formats --suggest-mapping {safe(path)}` prints a field mapping to read "
                "it with (then --mapping FILE), or name its format with --from"
            )
        else:
            hint = ERROR_CODES.get(code, "see the quarantine file")
        stderr.print(
            f"  [yellow]none of the {plural(counts.read, 'record')} of {safe(path)} converted[/] "
            f"(mostly {safe(code) or 'unreadable'}): {hint}"
        )
    if len(unread) > shown:
        stderr.print(f"  ... and {len(unread) - shown} more files none of whose records converted")


def print_refused(refused: dict[str, str]) -> None:
    """Files of the inputs' folders and globs that were never opened, and why."""
    if refused:
        stderr.print(f"  [yellow]refused {plural(len(refused), 'file')}[/], never opened:")
        for path, why in sorted(refused.items()):
            stderr.print(f"    {safe(path)}: {safe(why)}")


def print_quarantine(stats: Account, path: Path) -> None:
    """Records quarantined, per code."""
    print_left_out("Quarantined", "records", stats.quarantined, path, ERROR_CODES, width=16)


def print_left_out(
    verb: str,
    noun: str,
    counts: Mapping[str, int],
    path: Path,
    meanings: Mapping[str, str],
    *,
    width: int,
) -> None:
    """What a job left out (to the file `path`), per code with what the code means."""
    total = sum(counts.values())
    if not total:
        stderr.print(f"{verb} 0 {noun}")
        return
    stderr.print(f"{verb} {total:,} {noun} to {safe(path)}:")
    for code, count in most_first(counts):
        meaning = meanings.get(code.removeprefix(GROUP_DROP), code)
        if code.startswith(GROUP_DROP):
            meaning = f"left out with the rest of its pair or group: {meaning}"
        stderr.print(f"  {count:>8,}  {code:<{width}} {meaning}")


def input_table(inputs: list[dict[str, Any]], tokenized: bool) -> list[str]:
    """The per-input table of a run (manifest `counts.inputs` entries) as aligned plain
    lines (no markup; the paths' control characters escaped): read, quarantined, dropped, deduplicated, sampled out, weighted copies, written, tokens."""
    header = ["input", "read", "quarantined", "dropped", "dedup", "sampled out", "copies"]
    header += ["written", "tokens"] if tokenized else ["written"]
    rows = []
    for source in inputs:
        dropped = source.get("dropped_by", {})
        figures = [
            source["records_read"],
            source["records_quarantined"],
            source["threads_dropped"],
            sum(dropped.get(reason, 0) for reason in DEDUPLICATED),
            dropped.get(SAMPLED_OUT, 0),
            source.get("weighted_copies", 0),
            source["rows_written"],
            *([source["tokens"]] if tokenized else []),
        ]
        rows.append([visible(source["path"]), *(f"{n:,}" for n in figures)])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            [
                row[0].ljust(widths[0]),
                *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
            ]
        )
        for row in [header, *rows]
    ]


def print_publication(publication: Publication | None) -> None:
    """What publishing an output removed beside writing it: the earlier output's files it
    does not write again, and what --overwrite took over."""
    if publication is None:
        return
    if publication.removed:
        stderr.print(
            f"Removed {plural(len(publication.removed), 'file')} of the earlier output that "
            f"this one does not write: {some(publication.removed)}"
        )
    if publication.taken_over:
        stderr.print(
            f"[yellow]--overwrite:[/] replaced or removed "
            f"{plural(len(publication.taken_over), 'file')} mms had not written (or that were "
            f"changed since): {some(publication.taken_over, 10)}"
        )
