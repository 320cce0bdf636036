"""`mms verify`: check an output folder against its manifest and its rows, trusting nothing."""

from __future__ import annotations

import sys

import click

from pipeline import api
from pipeline.cli.output import output_argument, safe, stderr
from pipeline.cli.writes import writes
from pipeline.jobs.verify import OutputError
from pipeline.wording import plural

_SHOWN = 50  # problems listed one by one; the rest are counted


@writes()
@click.command(
    "verify",
    epilog="\b\nExamples:\n  mms verify out/quickstart\n  mms verify out/big --no-render\n"
    "  mms verify hf:me/quickstart            a pushed output (fetched, or from the cache)",
)
@click.argument("output", metavar="OUTPUT")
@click.option("--no-render", is_flag=True, help="Skip rendering every row again (hashes only).")
@click.option(
    "--no-template",
    is_flag=True,
    help="Skip checking the shipped chat template against every row (needs transformers).",
)
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False),
    metavar="DIR",
    help="A packed OUTPUT's source (the output `mms pack` read): its threads are checked "
    "on the source's rows. Default: the folder its manifest names, beside OUTPUT.",
)
def verify_command(output: str, no_render: bool, no_template: bool, source: str | None) -> None:
    """Check an OUTPUT folder of mms run, tokenize or pack (or a pushed one,
    hf:ORG/NAME[@REVISION]) without trusting it.

    Every shard's sha256 and row count against manifest.json (and no unlisted shard), the
    tokenizer's sha256, the dataset card's splits, files and row counts; then every row's
    input_ids and labels rendered again from its messages with the shipped tokenizer and
    labels policy, and the shipped chat template's ids and generation mask against every
    row. Packed rows are checked as packed (lengths, positions restarting at every thread,
    labels, media), and their threads on the rows they were packed from (--source): each
    source row rendered again, packed exactly once or dropped with its reason. Problems are
    listed with the row id. Exit status: 0 all hold, 1 a problem, 2 not an output folder.
    """
    folder = output_argument(output)
    try:
        with stderr.status("verifying", spinner="dots") as status:
            result = api.verify(
                folder,
                render=not no_render,
                template=not no_template,
                source=source,
                progress=lambda what, done: status.update(f"{what}: {done:,} rows"),
            )
    except OutputError as err:
        raise click.UsageError(str(err)) from None
    for check, count in result.checked.items():
        stderr.print(f"  {count:>8,}  {check}")
    for note in result.notes:
        stderr.print(f"  [yellow]note:[/] {safe(note)}")
    for problem in result.problems[:_SHOWN]:
        stderr.print(f"  [red]✗[/] {safe(problem.where)}: {safe(problem.what)}")
    if len(result.problems) > _SHOWN:
        stderr.print(f"  ... and {len(result.problems) - _SHOWN} more")
    if result.problems:
        stderr.print(
            f"[red]verify failed:[/] {plural(len(result.problems), 'problem')} in {safe(output)}"
        )
        sys.exit(1)
    stderr.print(f"[green]✓[/] {safe(output)} verified")
