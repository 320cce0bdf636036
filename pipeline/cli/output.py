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
from pipeline.output.hub import OutputNotFound, fetch_output, is_hub_output
from pipeline.quarantine import ERROR_CODES
from pipeline.wording import plural

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


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
def stage_progress() -> Iterator[Callable[[str, int, int, Account | None], None] | None]:
    """One live line per stage on a terminal (nothing when output is redirected): work
    units done with the time left at their pace, and the records and tokens so far when
    the stage counts them."""
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
            figures = f"{done:,} of {plural(total, 'work unit')}"
            if counts is not None:
                figures += f", {plural(counts.records_read, 'record')}"
                figures += f", {counts.tokens:,} tokens" if counts.tokens else ""
            progress.update(
                tasks[stage], completed=done, total=total, description=f"{stage}: {figures}"
            )

        yield update


def some(paths: list[str], shown: int = 3) -> str:
    """The first `shown` paths, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def check_mark(balanced: bool) -> str:
    """The mark ending a `Check:` line."""
    return "[green]✓[/]" if balanced else "[red]✗ MISMATCH[/]"


def output_argument(name: str) -> Path:
    """The folder an OUTPUT argument names: a local folder, or a pushed output
    (hf:ORG/NAME[@REVISION]) fetched into the Hugging Face cache (or found there offline)."""
    if is_hub_output(name):
        try:
            with stderr.status(f"fetching {name}", spinner="dots"):
                return fetch_output(name)
        except OutputNotFound as err:
            raise click.UsageError(str(err)) from None
    folder = Path(name)
    if not folder.is_dir():
        raise click.UsageError(f"{name} is not a folder (nor a Hub dataset: hf:ORG/NAME)")
    return folder


class ConfigProblem(click.ClickException):
    """A config file, or what it names, that cannot be used: `error: ...` and exit 2,
    without click's usage lines (the command line itself was right)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        print_error(self.message)


def print_error(message: object, after: str = "") -> None:
    """`error: MESSAGE` on stderr, the message shown as it is (no rich markup: a path or an
    install hint like `mms-pipeline[ray]` keeps its brackets), then `after` (markup)."""
    stderr.print(f"[red]error:[/] {escape(str(message))}{after}")


def exit_unbalanced() -> NoReturn:
    """Counts that do not balance are a bug: say so and exit 1."""
    stderr.print("[red]error:[/] the counts do not balance; this is a bug, please report it")
    sys.exit(1)


def print_inputs(stats: Account) -> None:
    """Records read per format, and the files skipped, read as companions or undetected."""
    by_format = Counter(stats.formats.values())
    formats = ", ".join(f"{name}: {count}" for name, count in sorted(by_format.items()))
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
        stderr.print(f"  read {companion} as part of {main}")
    print_refused(stats.refused_files)
    undetected = [path for path, name in stats.formats.items() if name == "-"]
    if undetected:
        stderr.print(
            f"  [yellow]no format detected[/] in {plural(len(undetected), 'file')}, "
            f"e.g. {some(undetected)}: name it with --from"
        )


def print_refused(refused: dict[str, str]) -> None:
    """Files of the inputs' folders and globs that were never opened, and why."""
    if refused:
        stderr.print(f"  [yellow]refused {plural(len(refused), 'file')}[/], never opened:")
        for path, why in sorted(refused.items()):
            stderr.print(f"    {path}: {why}")


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
    stderr.print(f"{verb} {total:,} {noun} to {path}:")
    for code, count in most_first(counts):
        stderr.print(f"  {count:>8,}  {code:<{width}} {meanings[code]}")


def input_table(inputs: list[dict[str, Any]], tokenized: bool) -> list[str]:
    """The per-input table of a run (manifest `counts.inputs` entries) as aligned lines:
    read, quarantined, dropped, deduplicated, sampled out, weighted copies, written, tokens."""
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
        rows.append([source["path"], *(f"{n:,}" for n in figures)])
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
