"""`mms convert`: any supported input to MMS JSONL, with every rejected record quarantined."""

from __future__ import annotations

import sys
from collections import Counter
from typing import NoReturn

import click

from pipeline import api
from pipeline.accounting import Account, most_first
from pipeline.cli.mapping_inputs import mapped_inputs, mapping_options
from pipeline.cli.options import (
    hf_config_option,
    input_format_option,
    media_options,
    overwrite_file_option,
    read_spec,
    reading_media,
    split_option,
    worker_count,
    workers_option,
)
from pipeline.cli.output import (
    Refusal,
    check_mark,
    exit_unbalanced,
    print_error,
    print_inputs,
    print_quarantine,
    read_progress,
    safe,
    stderr,
)
from pipeline.cli.writes import writes
from pipeline.engine import PartFailed
from pipeline.formats import AUTO, ConvertOptions
from pipeline.formats.base import MULTIMODAL, OASST_PATHS, PARALLEL_CALLS, REASONING
from pipeline.formats.detect import UNKNOWN
from pipeline.jobs.convert import STDOUT, ConvertResult
from pipeline.jobs.read import detect_file
from pipeline.output.files import OutputPathError
from pipeline.quarantine import ERROR_CODES
from pipeline.sources import InputError, ReadLimits, is_hf_input
from pipeline.wording import plural


def _codes_help() -> str:
    return "\n".join(f"  {code:<16} {text}" for code, text in ERROR_CODES.items())


@writes(output="file", quarantine="file")
@click.command(
    "convert",
    epilog="\b\nExamples:\n"
    "  mms convert data_samples/mms -o out/threads.jsonl\n"
    "  mms convert 'raw/**/*.jsonl.gz' --from mms -o out/threads.jsonl.zst --strict\n"
    "  mms convert big.jsonl --from openai -o out/threads.jsonl --workers 4\n"
    "  mms convert hf:HuggingFaceH4/ultrachat_200k --split train_sft -o out/ultrachat.jsonl\n"
    "  mms convert hf:HuggingFaceTB/smoltalk --hf-config all --split test -o out/smoltalk.jsonl\n"
    "  mms convert hf:./my_dataset --split validation -o out/valid.jsonl\n"
    "  mms convert renamed.jsonl --mapping my_mapping.yaml -o out/threads.jsonl\n"
    "  mms convert --dataset-info data/dataset_info.json alpaca_en_demo -o out/alpaca.jsonl\n"
    "\b\nQuarantine codes (the `code` field of each rejected record):\n" + _codes_help(),
)
@click.argument("inputs", nargs=-1, metavar="INPUT...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE",
    help="MMS JSONL file to write (.gz or .zst to compress); `-` writes standard output "
    "(the summary goes to standard error, rejected records to --quarantine, default "
    "rejected.jsonl here).",
)
@input_format_option("Input format; `auto` detects it per file.")
@mapping_options
@click.option(
    "--quarantine",
    metavar="FILE",
    default=None,
    help="Where rejected records go (JSONL) [default: OUTPUT's name + .rejected.jsonl].",
)
@overwrite_file_option
@click.option("--strict", is_flag=True, help="Exit 1 if any record was quarantined.")
@click.option(
    "--max-record-bytes",
    type=click.IntRange(min=1),
    default=ReadLimits().max_record_bytes,
    show_default=True,
    help="Longest line or row accepted; longer ones are quarantined as oversize_record.",
)
@click.option(
    "--max-depth",
    type=click.IntRange(min=1, max=200),
    default=ReadLimits().max_depth,
    show_default=True,
    help="Deepest nesting of lists and objects accepted in a record; deeper ones are "
    "quarantined as too_deep.",
)
@click.option(
    "--max-decompression-ratio",
    type=click.IntRange(min=1),
    default=ReadLimits().max_decompression_ratio,
    show_default=True,
    metavar="N",
    help="A compressed file may decompress to N times its size plus 64 MiB; past that the "
    "rest of it is one unreadable_file line (a decompression bomb).",
)
@click.option(
    "--parallel-calls",
    type=click.Choice(PARALLEL_CALLS),
    default="sequence",
    show_default=True,
    help="Parallel tool calls as call1, result1, call2, result2 (`sequence`) or one "
    "`tool:jsonl` message per tool (`jsonl`).",
)
@click.option(
    "--reasoning",
    type=click.Choice(REASONING),
    default="keep",
    show_default=True,
    help="Keep the assistant's reasoning as a `reasoning` message, or drop it.",
)
@click.option(
    "--multimodal",
    type=click.Choice(MULTIMODAL),
    default="keep",
    show_default=True,
    help="Keep images, audio and video as media parts of their messages (paths as written, "
    "URLs, base64 data; checked as the media options below say), drop them (noted in "
    "meta) or write a `[image]`-style placeholder. Files and documents are dropped in "
    "every mode.",
)
@split_option
@hf_config_option
@click.option(
    "--oasst-paths",
    type=click.Choice(OASST_PATHS),
    default="all",
    show_default=True,
    help="OpenAssistant trees: one thread per root-to-leaf path, or only the top-ranked path.",
)
@click.option(
    "--expand-selects",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Prompt templates with select variables (prompt-json): up to N threads per prompt, "
    "one per allowed value; 0 renders only the defaults.",
)
@workers_option
@media_options
def convert_command(
    inputs: tuple[str, ...],
    output: str,
    input_format: str,
    mapping_file: str | None,
    dataset_info: str | None,
    quarantine: str | None,
    overwrite: bool,
    strict: bool,
    max_record_bytes: int,
    max_depth: int,
    max_decompression_ratio: int,
    parallel_calls: str,
    reasoning: str,
    multimodal: str,
    oasst_paths: str,
    split: str,
    hf_config: str | None,
    expand_selects: int,
    workers: int | None,
    media_flags: dict[str, object],
) -> None:
    """Convert INPUT files, directories, globs or Hugging Face datasets to MMS JSONL.

    Reads .jsonl/.json/.yaml/.parquet/.csv (optionally .gz/.zst/.bz2/.xz compressed),
    prompt scripts read whole (PPE *.ai.yaml; Semantic Kernel skprompt.txt with the
    config.json beside it; templates are rendered in a sandbox, never run), and Hugging Face datasets as hf:ORG/NAME (the Hub) or hf:./local/dir, streamed one
    row at a time (--split, --hf-config choose what). Every record becomes a thread or a
    quarantined entry with its file, line (or dataset row) and a stable code; the summary
    checks that records read = converted + quarantined.
    """
    limits = ReadLimits(
        max_record_bytes=max_record_bytes,
        max_depth=max_depth,
        max_decompression_ratio=max_decompression_ratio,
    )
    chosen = mapped_inputs(inputs, input_format, mapping_file, dataset_info, split, hf_config)
    inputs, input_format = chosen.inputs, chosen.input_format
    options = ConvertOptions(
        parallel_calls=parallel_calls,  # type: ignore[arg-type]
        reasoning=reasoning,  # type: ignore[arg-type]
        multimodal=multimodal,  # type: ignore[arg-type]
        oasst_paths=oasst_paths,  # type: ignore[arg-type]
        expand_selects=expand_selects,
        mapping=chosen.mapping,
    )
    spec = read_spec(inputs, input_format, chosen.split, chosen.hf_config, options, limits)
    spec = reading_media(spec, media_flags, output)
    try:
        with read_progress() as update:
            result = api.convert(
                inputs,
                output,
                spec=spec,
                quarantine=quarantine,
                progress=update,
                workers=worker_count(workers),
                overwrite=overwrite,
            )
    except OutputPathError as err:
        raise Refusal(str(err)) from None
    except InputError as err:
        raise click.UsageError(str(err)) from None
    except PartFailed as err:
        print_error(err, "; nothing was written")
        sys.exit(1)
    _print_summary(result)
    stats = result.account
    if not stats.balanced:
        exit_unbalanced()
    if input_format != AUTO and stats.records_read and not stats.records_converted:
        _exit_wrong_format(input_format, stats)
    if strict and stats.quarantined_total:
        stderr.print(f"[red]--strict:[/] {plural(stats.quarantined_total, 'record')} quarantined")
        sys.exit(1)


DETECTED_FILES = 20
"""Files auto-detection looks at when --from converted nothing."""


def _exit_wrong_format(named: str, stats: Account) -> NoReturn:
    """--from converted no record: say how auto-detection reads the files, and exit 1."""
    found = Counter(
        detect_file(path).label for path in stats.files[:DETECTED_FILES] if not is_hf_input(path)
    )
    found.pop(UNKNOWN, None)
    stderr.print(
        f"[red]error:[/] --from {named} converted none of the {plural(stats.records_read, 'record')}",
        highlight=False,
    )
    if found:
        guesses = ", ".join(f"{label} ({plural(n, 'file')})" for label, n in most_first(found))
        best = most_first(found)[0][0]
        hint = "without --from" if best == "per-record" else f"with --from {best} or without --from"
        stderr.print(
            f"  auto-detection reads them as: {guesses}; run again {hint}", highlight=False
        )
    else:
        stderr.print(
            "  auto-detection recognises none of them either (see `mms formats --detect FILE`)"
        )
    sys.exit(1)


def _print_summary(result: ConvertResult) -> None:
    stats = result.account
    print_inputs(stats)
    where = "standard output" if str(result.output) == STDOUT else safe(result.output)
    stderr.print(f"Wrote {plural(stats.threads, 'thread')} to {where}")
    print_quarantine(stats, result.quarantine)
    stderr.print(
        f"Check: {stats.records_read:,} read = {stats.records_converted:,} converted "
        f"+ {stats.quarantined_total:,} quarantined {check_mark(stats.balanced)}"
    )
