"""`mms export`: MMS threads written in another transcript format (Harmony), one
transcript per thread, with every thread that format cannot hold listed."""

from __future__ import annotations

import sys

import click

from pipeline import api
from pipeline.cli.options import input_format_option, overwrite_file_option
from pipeline.cli.output import (
    Refusal,
    check_mark,
    exit_unbalanced,
    print_inputs,
    print_quarantine,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.jobs.convert import STDOUT
from pipeline.jobs.export import TARGETS, ExportResult, writes_lines
from pipeline.output.files import OutputPathError
from pipeline.sources import InputError
from pipeline.wording import plural

SHOWN_LEFT_OUT = 10
"""Threads left out that the summary names one by one."""


@writes(output="file-or-folder", quarantine="file")
@click.command(
    "export",
    epilog="\b\nExamples:\n"
    "  mms export out/threads.jsonl --to harmony -o out/harmony.jsonl\n"
    '                                   one {"id", "text"} line per thread\n'
    "  mms export out/threads.jsonl --to harmony -o out/harmony/\n"
    "                                   one <id>.txt transcript per thread\n"
    "  mms export out/threads.jsonl --to harmony -o - | jq -r .text\n"
    "                                   JSON Lines on standard output\n"
    "  mms export raw/chat.jsonl --from openai --to harmony -o out/chat.harmony.jsonl\n"
    "                                   any input format, normalized first\n"
    "\b\nRead back with `mms convert out/harmony.jsonl --from harmony -o threads.jsonl`.",
)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option(
    "--to",
    "target",
    type=click.Choice(sorted(TARGETS)),
    default="harmony",
    show_default=True,
    help="The transcript format to write.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="`-`: JSON Lines of {id, text} on standard output; a .jsonl name (.gz or .zst to "
    "compress): that file; anything else: a folder of <id>.txt files (created if needed; "
    "characters other than letters, digits, `.`, `_`, `-` in an id become `_`).",
)
@input_format_option("Input format; `auto` detects it per file (MMS JSONL is `mms`).")
@click.option(
    "--quarantine",
    metavar="FILE",
    default=None,
    help="Where records that cannot be read go (JSONL) [default: OUT's name + .rejected.jsonl].",
)
@overwrite_file_option
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 if any record was quarantined or any thread left out.",
)
def export_command(
    inputs: tuple[str, ...],
    target: str,
    output: str,
    input_format: str,
    quarantine: str | None,
    overwrite: bool,
    strict: bool,
) -> None:
    """Write the threads of INPUT files (MMS JSONL, or any format convert reads) as
    transcripts in another format: Harmony, OpenAI's format for gpt-oss.

    Each thread becomes one transcript: the platform message is the system message,
    developer messages the developer's `# Instructions`, declared tools its `# Tools`
    section (namespace functions), reasoning the `analysis` channel, tool calls
    `to=functions.NAME` on `commentary`, tool results `functions.NAME to=assistant`,
    answers `final`; a prompt-only thread ends with `<|start|>assistant`. A thread
    Harmony cannot hold (a context message without a name; content holding `<|end|>`
    or another token that ends a message) is left out and named in the summary.
    """
    if output.lower().endswith(".txt"):
        raise Refusal(
            f"-o {output} names a .txt file, but one file holds one transcript: give a folder "
            "(one .txt per thread) or a .jsonl file"
        )
    try:
        result = api.export(
            inputs,
            output,
            input_format=input_format,
            to=target,
            quarantine=quarantine,
            overwrite=overwrite,
        )
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
    _print_summary(result, target)
    stats = result.account
    if not stats.balanced:
        exit_unbalanced()
    if strict and (stats.quarantined_total or result.left_out):
        stderr.print("[red]--strict:[/] something was quarantined or left out")
        sys.exit(1)


def _print_summary(result: ExportResult, target: str) -> None:
    stats = result.account
    print_inputs(stats)
    if str(result.output) == STDOUT:
        where = "standard output"
    elif writes_lines(result.output):
        where = str(result.output)
    else:
        where = f"{result.output}/ (one .txt each)"
    stderr.print(f"Wrote {plural(stats.kept, f'{target} transcript')} to {safe(where)}")
    if result.left_out:
        stderr.print(f"Left out {plural(len(result.left_out), 'thread')} with no {target} form:")
        for thread_id, why in result.left_out[:SHOWN_LEFT_OUT]:
            stderr.print(f"  {safe(thread_id)}: {safe(why)}")
        if len(result.left_out) > SHOWN_LEFT_OUT:
            stderr.print(f"  and {len(result.left_out) - SHOWN_LEFT_OUT:,} more")
    print_quarantine(stats, result.quarantine)
    stderr.print(
        f"Check: {stats.records_read:,} read = {stats.records_converted:,} converted "
        f"+ {stats.quarantined_total:,} quarantined; {stats.threads:,} threads = "
        f"{stats.kept:,} written + {stats.dropped_total:,} left out "
        f"{check_mark(stats.balanced)}"
    )
