"""`mms pack`: a tokenized output packed into sequences of at most --seq-len tokens."""

from __future__ import annotations

import sys

import click

from pipeline import api
from pipeline.cli.options import overlong_option, overwrite_option
from pipeline.cli.output import (
    Refusal,
    check_mark,
    exit_unbalanced,
    print_error,
    print_publication,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.jobs.pack import PackResult
from pipeline.output.files import OutputPathError
from pipeline.output.guard import check_output_folder
from pipeline.packing.best_fit import WINDOW
from pipeline.stages.pack import PackError
from pipeline.tokenize import TokenizerLoadError
from pipeline.tokenize.overlong import drop_codes

PACK_DROP_CODES = drop_codes("--seq-len")
"""What each drop code means for `mms pack`, whose limit is --seq-len."""


@writes(output="output-folder")
@click.command(
    "pack",
    epilog="\b\nExamples:\n"
    "  mms pack out/run --seq-len 4096 -o out/run-packed\n"
    "  mms pack out/tokens --seq-len 8192 --overlong truncate -o out/packed-8k\n"
    "\b\nOutput (PACKED/), the layout of the folder packed:\n"
    "  data/{split}-NNNNN-of-NNNNN.parquet   one row per packed sequence: input_ids, labels,\n"
    "                                      position_ids (0 at every thread), seq_lens, ids,\n"
    "                                      num_tokens, num_trained\n"
    "  tokenizer/                          the packed output's tokenizer, as it was\n"
    "  manifest.json, README.md            counts, fill, shards' sha256; the dataset card\n"
    "  quarantine/dropped.jsonl            threads over --seq-len left out, with why",
)
@click.argument("source", metavar="OUT", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--seq-len",
    required=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Most tokens in a packed sequence.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="DIR",
    help="Folder for the packed output (not OUT itself).",
)
@overlong_option(
    "Threads over --seq-len: drop them (counted, listed in quarantine/dropped.jsonl), "
    "truncate them at a message boundary (rendered again with OUT's tokenizer), or stop."
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=WINDOW,
    show_default=True,
    metavar="N",
    help="Threads sorted and placed together: larger packs tighter and holds more in memory.",
)
@overwrite_option
def pack_command(
    source: str, seq_len: int, output: str, overlong: str, window: int, overwrite: bool
) -> None:
    """Pack the tokenized output OUT into sequences of at most --seq-len tokens.

    Threads are placed best-fit-decreasing, a window at a time, so memory stays flat on any
    size. Every thread that fits lands in exactly one packed row with its input_ids and
    labels unchanged; position_ids restart at 0 for each thread and seq_lens gives their
    lengths, which is what attention needs to keep them apart (flash-attention varlen
    arguments, or a block-diagonal mask). The same OUT and options give the same bytes.
    Exit status: 0 packed, 1 --overlong error hit, 2 usage error (e.g. OUT holds no tokens).
    """
    try:
        check_output_folder(output)
    except OutputPathError as err:
        raise Refusal(f"-o: {err}") from None
    try:
        with stderr.status("packing", spinner="dots") as status:
            result = api.pack(
                source,
                output,
                seq_len=seq_len,
                overlong=overlong,  # type: ignore[arg-type]
                window=window,
                overwrite=overwrite,
                progress=lambda done: status.update(f"packing: {done:,} threads read"),
            )
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except PackError as err:
        if "more than --seq-len" in str(err):
            print_error(err, "; nothing was written")
            sys.exit(1)
        raise click.UsageError(str(err)) from None
    except TokenizerLoadError as err:
        raise click.UsageError(f"{source}/tokenizer: {err}") from None
    _print_summary(result)
    print_publication(result.publication)
    if not result.balanced:
        exit_unbalanced()


def _print_summary(result: PackResult) -> None:
    stats = result.stats
    for split, counts in result.splits.items():
        shards = result.shards[split]
        stderr.print(
            f"  {safe(split)}: {counts.rows_in:,} threads -> {counts.sequences:,} sequences "
            f"in {len(shards)} shard(s)"
            + (f", {counts.truncated:,} truncated" if counts.truncated else "")
        )
        for code, count in sorted(counts.dropped.items()):
            stderr.print(f"    {count:>8,}  dropped  {code:<20} {PACK_DROP_CODES.get(code, '')}")
    stderr.print(
        f"Packed {stats.rows:,} threads into {stats.sequences:,} sequences of up to "
        f"{result.seq_len:,} tokens: fill {stats.fill:.2%}, {stats.rows_per_sequence:.1f} "
        f"threads per sequence, {stats.padding:,} padding tokens at full length"
    )
    read = sum(s.rows_in for s in result.splits.values())
    dropped = sum(sum(s.dropped.values()) for s in result.splits.values())
    stderr.print(
        f"Check: {read:,} threads = {stats.rows:,} packed + {dropped:,} dropped "
        f"{check_mark(result.balanced)}"
    )
    stderr.print(f"Wrote {safe(result.output)}")
